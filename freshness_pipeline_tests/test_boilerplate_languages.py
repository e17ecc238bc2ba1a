"""The extraction on pages that are not in English, as an exploratory run served them: ad
labels and recirculation headings in other languages and scripts, a sentence that only starts
with a label word, a stock count, table cells, and undeclared legacy charsets."""

from __future__ import annotations

import pytest

from freshness_pipeline.science.fingerprint import content_fingerprint, extract_content
from freshness_pipeline.science.fingerprint.decode import decode_body
from freshness_pipeline.science.fingerprint.extraction import Extraction

ARTICLE = (
    "<p>" + "Der Stadtrat hat den Haushalt für 2027 nach langer Debatte beschlossen. " * 4 + "</p>"
)


def _fingerprints(page: str, variants: list[str]) -> set[str]:
    return {
        content_fingerprint(page.format(v).encode(), content_type="text/html; charset=utf-8")
        for v in variants
    }


@pytest.mark.parametrize(
    "label", ["Werbung", "Publicidad", "Pubblicità", "Реклама", "РЕКЛАМА", "إعلان", "Reklama", "PR"]
)
def test_a_rotating_ad_under_a_label_in_any_language_is_not_the_content(label: str) -> None:
    page = (
        f'<html><body><article>{ARTICLE}<div class="teaser"><span>{label}</span><p><a href=/x>'
        "{}</a></p></div>" + ARTICLE + "</article></body></html>"
    )
    ads = ["Gebrauchtwagen mit Garantie", "Glasfaser für Ihr Zuhause", "Kreditkarte ohne Gebühr"]
    assert len(_fingerprints(page, ads)) == 1
    assert "Gebrauchtwagen" not in extract_content(page.format(ads[0]))


@pytest.mark.parametrize(
    "sentence",
    [
        "Anzeige gegen Unbekannt wurde erstattet; die Polizei sucht {} Zeugen.",
        "Реклама на телевидении подорожала на {} процентов.",
        "Werbung im Netz wächst um {} Prozent.",
    ],
)
def test_a_sentence_that_starts_with_a_label_word_is_content(sentence: str) -> None:
    page = f"<html><body><article>{ARTICLE}<p>{sentence}</p></article></body></html>"
    assert len(_fingerprints(page, ["zwei", "sechs"])) == 2
    assert sentence.split()[1] in extract_content(page.format("zwei"))


@pytest.mark.parametrize(
    "heading",
    [
        "Lesen Sie auch",
        "À lire aussi",
        "Te puede interesar",
        "Leggi anche",
        "Leia também",
        "Читайте также",
        "相关文章",
        "関連記事",
        "관련 기사",
        "Meistgelesen",
        "Les plus lus",
        "Самое читаемое",
    ],
)
def test_a_recirculation_list_under_a_heading_in_any_language_is_not_the_content(
    heading: str,
) -> None:
    def page(stories: list[int]) -> str:
        links = "".join(f"<li><a href=/s/{k}>Artikel Nummer {k}</a></li>" for k in stories)
        return f"<html><body><main>{ARTICLE}<h2>{heading}</h2><ul>{links}</ul></main></body></html>"

    prints = {
        content_fingerprint(page(k).encode(), content_type="text/html; charset=utf-8")
        for k in ([1, 2, 3, 4], [7, 9, 18, 3])
    }
    assert len(prints) == 1
    assert "Artikel Nummer" not in extract_content(page([1, 2, 3, 4]))


def test_a_stock_count_is_content_though_its_class_says_count() -> None:
    page = (
        "<html><body><main>" + ARTICLE + '<p>Preis 89,00 €</p><span class="stock-count">Nur '
        "noch {} Stück auf Lager</span></main></body></html>"
    )
    assert len(_fingerprints(page, ["9", "5"])) == 2
    assert "Stück auf Lager" in extract_content(page.format("9"))


def test_a_tables_cells_and_a_label_before_a_block_are_apart_in_the_versions_text() -> None:
    html = (
        "<html><body><main><table><tr><th>Jahr</th><th>Umsatz</th><th>Mitarbeiter</th></tr>"
        "<tr><td>2024</td><td>1.250</td><td>310</td></tr></table>"
        "<div><b>Hinweis</b><p>Die Zahlen sind vorläufig.</p></div></main></body></html>"
    )
    assert Extraction(html, []).lines().splitlines() == [
        "Jahr Umsatz Mitarbeiter",
        "2024 1.250 310",
        "Hinweis",
        "Die Zahlen sind vorläufig.",
    ]


@pytest.mark.parametrize(
    ("text", "charset"),
    [
        ("市は月曜日、学校と自転車道への投資を含む予算案を発表した。", "shift_jis"),
        ("Городская администрация в понедельник представила проект бюджета.", "cp1251"),
        ("시는 월요일 학교와 자전거 도로에 대한 투자를 포함한 예산안을 발표했다.", "euc_kr"),
        ("市政府周一公布了包括学校和自行车道投资在内的预算草案。", "gbk"),
    ],
)
def test_an_undeclared_legacy_charset_of_another_script_is_detected(
    text: str, charset: str
) -> None:
    page = f"<html><head><title>{text[:6]}</title></head><body><p>{text}</p></body></html>"
    assert decode_body(page.encode(charset), "text/html") == page


def test_an_undeclared_latin_page_keeps_its_windows_1252_reading() -> None:
    page = "<p>La municipalité a présenté lundi un projet de budget à 12 millions.</p>"
    assert decode_body(page.encode("cp1252"), "text/html") == page
