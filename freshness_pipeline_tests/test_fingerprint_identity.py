"""The fingerprint's outputs, pinned page by page.

Work on the extractor's speed must not move a single fingerprint: a changed fingerprint is a
false change for every page it touches, on every crawl. So the outputs of a set of pages that
the suite builds offline (synthweb's pages, served as they are and with the volatile noise of
``page_mutations``, the benchmark web's pages with its boilerplate, the checked-in HTML) are
pinned here: the fingerprint, and a hash of the version's title, text and fields. A change
that is meant to move them bumps ``FINGERPRINT_VERSION`` and re-pins with
``python -m freshness_pipeline_tests.test_fingerprint_identity``. Each page's own hash is
pinned too, so a changed page generator is told apart from a changed extractor.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from freshness_pipeline.science.fingerprint import content_record
from freshness_pipeline_tests import page_mutations, real_pages

ROOT = Path(__file__).resolve().parent.parent
FIELDS = {"price": ".price", "headline": "h1", "missing": ".no-such-thing"}


def _synthweb_pages() -> Iterator[tuple[str, bytes]]:
    from freshness_pipeline.synthweb.server import _ADS
    from freshness_pipeline.synthweb.world import build_world

    world = build_world(0)
    later = world.start + timedelta(days=20)
    for site in world.sites:
        yield f"synthweb home {site.name}", world.home_html(site.name, world.start).encode()
        for page in world.pages_of(site.name)[:3]:
            volatile = None
            if site.behaviour == "volatile":
                ad = page.page_id % len(_ADS)
                volatile = {"nonce": f"{page.page_id:016x}", "counter": "1234", "ad": _ADS[ad],
                            "ad_id": str(ad)}  # fmt: skip
            html = world.render(page, later, volatile=volatile)
            yield f"synthweb {site.name}{page.path}", html.encode()
    # served with a rotating promo, a consent banner, timestamps, counters and tokens
    page = world.pages_of("honest")[0]
    html = world.render(page, world.start).encode()
    for n, fetch in enumerate(page_mutations.fetches(html, None, seed=3, count=5)):
        yield f"synthweb mutated {n}", fetch.body


def _benchmark_web_pages() -> Iterator[tuple[str, bytes]]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from e2e_web import content
    from e2e_web.hosts import HOSTS, scaled_hosts
    from e2e_web.truth import build_truth

    hosts = [h for h in scaled_hosts(0.01) if h.boilerplate][:4]
    assert hosts, f"no host with boilerplate among {len(HOSTS)}"
    truth = build_truth(tuple(hosts), seed=5, cycles=1)
    for h, host in enumerate(truth.hosts):
        page_id = truth.pages.filter(truth.pages["host"] == h)["page_id"][0]
        for serial in (1, 2):
            html = content.render_page(
                truth, h, page_id, 2, serial=serial,
                now=datetime(2026, 5, 1, 12, serial, tzinfo=UTC), base_url="http://127.0.0.2:80",
            )  # fmt: skip
            yield f"benchmark web {host.name} {serial}", html.encode()


def _checked_in_pages() -> Iterator[tuple[str, bytes]]:
    from freshness_pipeline_tests.test_fingerprint import PRODUCT, _page

    yield (
        "soft 404",
        (ROOT / "freshness_pipeline_tests/data/sitemaps/html_soft_404.html").read_bytes(),
    )
    yield "test page", _page().encode()
    yield "test page, other noise", _page(date="2026-05-01", views="1,234", ad="promo").encode()
    yield "test product", PRODUCT
    latin1 = (
        '<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head>'
        "<body><article>Cr\xe8me br\xfbl\xe9e</article></body></html>"
    )
    yield "latin-1", latin1.encode("latin-1")


def pages() -> list[tuple[str, bytes]]:
    return [*_synthweb_pages(), *_benchmark_web_pages(), *_checked_in_pages()]


def _hash(value: object) -> str:
    return hashlib.sha256(repr(value).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def outputs(body: bytes) -> str:
    """The page's hash, then for the default extraction and for one with fields, JSON-LD and
    selectors: the fingerprint and a hash of the title, text and fields."""
    out = [_hash(body)]
    for options in ({}, {"fields": FIELDS, "json_ld": True, "selectors": ("article", "main p")}):
        record = content_record(body, content_type="text/html", **options)
        fields = sorted((record.fields or {}).items())
        out += [record.fingerprint, _hash((record.title, record.text, fields))]
    return " ".join(out)


# the outputs of the code at the package's split
PINNED: dict[str, str] = {
    "synthweb home honest": "1c6d2e4b6fe73e58 c1de133703e06367 6d960c086529da52 d87276a298760c76 a08f37f541f46632",
    "synthweb honest/articles/1": "a6773f1b2bfa5cb4 0a7ec914af156289 cc61d35d5b6c3d81 3e9a15b33e3d97f6 c93c35765097e55e",
    "synthweb honest/static/about-1": "bfd589abaf09d32d 78dca467c776376e 187f38fcce18b66a 0094f1611868db83 39541e4004b9cde1",
    "synthweb honest/listing/1": "bcedb29d4c966104 55d69204e79a59cd 1b2e9655e260fa31 68397d64f95f3ec9 074385caa2a34a99",
    "synthweb home lastmod": "8f0bf22f9b527220 84418be817d80796 822635579f05ed1a 952999438196982b 4e2b19bc029b5d7d",
    "synthweb lastmod/articles/1": "6721dde38ebe15ff 94469600f5e03885 b3f16625962beaa2 ed6cee30368b1c6a 09b45f38ee7b8926",
    "synthweb lastmod/static/about-1": "8188887fd9c6dc66 9a5840102f4e41a3 7819756e21321bed 71cd61772d3bc051 1532113a263427a5",
    "synthweb lastmod/static/about-2": "ede6ebc0c2d66690 9b203a32076998d7 64a8e680bf195ca3 c5cda4835217448b faacd1131d04c8b5",
    "synthweb home novalid": "542d78db31397d5f 673be47ea11d98e8 e5bf852b6e0a2a96 05052f39ff67ba13 e815b4a0b665ce90",
    "synthweb novalid/articles/1": "c0b7c1e33dc373d8 4565083c227dab0d 2b85f9b5d893de94 55ea02f13c3dbe32 2448303383d6fe30",
    "synthweb novalid/articles/2": "34f4be5af61c6b8b a02c52d7f5426666 589d0483d538bb38 ad706b8b9d646007 0d1134f84bc90e7f",
    "synthweb novalid/static/about-1": "4cfb2b7e0af45309 ab5a0051e886a228 f6014b7c4b07cac3 c3033d3e75fcb973 ac81bc4317351286",
    "synthweb home volatile": "d93f8286ba0b6d72 65ce2487c2fd4a47 bfe9aaf92bb34d33 1c95462d29f22431 dc0ff751ea792bdf",
    "synthweb volatile/articles/1": "07aa4e19a2a188a2 956fdff8a3673de0 08f46bfd013e35f8 4a6b3803fe49c8ca 31d86e77a6e751fa",
    "synthweb volatile/articles/2": "04686eb880211e41 6efefbfdc0b7cee0 9dfbc287974490d2 cf8c5c19c9c0b791 57ff194c8c6ba96a",
    "synthweb volatile/articles/3": "d8ebee8fd499550d b0ab4f156a662fb8 dc90363df00572f0 a6852606a557980b 8c6fa57b54cec2db",
    "synthweb home polite": "b78f0ed65ccfd5c0 8eb3a9efb9f7d328 35e28e83ace50023 7c41c4704c28d2eb d6d22c56787e37b4",
    "synthweb polite/static/about-1": "470d4029ba9447d6 5e9aafe4534f8a00 0c532585bcdb9bf6 be79b43f802ef43a 779820194537bf6f",
    "synthweb polite/articles/1": "fd5841cd5c7a816b c068b4c44000614e c8227b56749db083 bc2a2bdaf183208c b560b4c27428746b",
    "synthweb polite/static/about-2": "fe5545c1c8c69ef9 e6a3a3dc4244c15d 82e2e5970d689170 344fe46d321f803a 95e1fa13ed0d4fe5",
    "synthweb mutated 0": "4cd193c7aa751a63 bc090edf2d9d2eb6 eec219fe207613fa 470f9114ef02c85f 6997035dfce6c71f",
    "synthweb mutated 1": "586ee95423c66e2a bc090edf2d9d2eb6 37ef2ff3c2f326b0 470f9114ef02c85f 89752f072c42286c",
    "synthweb mutated 2": "a62fcba571958f39 bc090edf2d9d2eb6 0c9ae7c5519eac7b 470f9114ef02c85f c309990e5301d4ca",
    "synthweb mutated 3": "7804f1c5ca162fb9 446c3965df7b2b30 51ebe7c9648710d2 36507048fb64ea97 8a3bb48a1543323f",
    "synthweb mutated 4": "4bbb1190ee2c7cc4 446c3965df7b2b30 56ea7010de6e4a68 36507048fb64ea97 fbf46b74a7689841",
    "benchmark web news-wire 1": "5b9c3a8f58d85f58 308b0933f5a1def8 404639629d94fca6 89db927497b6349a c147600e97850ae7",
    "benchmark web news-wire 2": "6cc87d15efcb3334 308b0933f5a1def8 404639629d94fca6 89db927497b6349a c147600e97850ae7",
    "benchmark web shop-amp 1": "1e43ff7a44783134 afe060b31b5dd9e1 f7bc9a04cec28846 290488db885e0213 5e0388721dd682b7",
    "benchmark web shop-amp 2": "7e40fb547dcc0328 afe060b31b5dd9e1 f7bc9a04cec28846 290488db885e0213 5e0388721dd682b7",
    "benchmark web shop-lm 1": "d705458a98064073 225479b08f5efbc9 fc031c1c8768490a a4db3fa2b6be26d6 89a08522eb2fed93",
    "benchmark web shop-lm 2": "05ca0b8acf2f8dd3 225479b08f5efbc9 fc031c1c8768490a a4db3fa2b6be26d6 89a08522eb2fed93",
    "benchmark web docs-lastmod-now 1": "f79f428ed501a8c4 b33d7f992939b838 fe6e5e30f6fcff33 541bb6ce1b7607c5 e123289638981d0e",
    "benchmark web docs-lastmod-now 2": "73fd89bc1bd8d727 b33d7f992939b838 fe6e5e30f6fcff33 541bb6ce1b7607c5 e123289638981d0e",
    "soft 404": "35343f1f9154087f 028cb503cde8e783 efb9fd4d6f4622a5 ac54a9aab4f8ea23 e19d0af65f2bcfac",
    "test page": "7426a8f89726b7e0 6c68b7ec0dd38585 0b12dcf38ddc4976 eee3f8ccb197066b 7a962f95f7d69b24",
    "test page, other noise": "c427529c3db0b600 63bcc7c2344bee23 ffb268126047d9d3 739d9dc247491c3a 9078dee5f4e14fd5",
    "test product": "aee3c8cf6941e54b 475e3eb6abf710e2 778785ef8bf76de3 fbf1eefdb2bc3a82 b0f0d42294d4df56",
    "latin-1": "48e43584a22cd4b2 1b8e68ea6fe8b7a6 ef66fb04f84ed5dc abc8bd8b591cbf48 c0b583e180e303e3",
}

REAL_PINNED: dict[str, str] = {
    "ap_meta_refresh": "c379fef93768ddbc 7fd6446422f5a564 0f61506ba98fa5a2 84c404b0269e2dbf a34f718a7020fcfb",
    "arabic_article": "7f8c5cf000f5b5a1 95546e961962fa17 3dc9c7b71018ce93 cba12afd01ef10c3 a81f41af7e98809f",
    "article_with_br": "7432cd7559340c77 26cf86ec77dedf03 71935c1cdd3b9a26 02547fdd9a2359b1 405ce86a15093c1d",
    "article_with_divs": "69726db8bbb8fc2d 4ca951c037602a17 0e466cee44743490 f1681a2108c27497 15420cef314422dc",
    "autoindustria": "399c1151efea3992 a7a8cee76a09b2e3 072e86710d3d0b12 b80a477da533acb4 209b9b873bc23b60",
    "burmese_article": "02c1c71f4a725528 2f71255280775b5f f9b5595db7ba19d9 17271573252a5dde 5f0281017ab81aa4",
    "chinese_article": "3a73eafc0a561416 59cc1dbe0402e511 85faa8a37555e233 d06156dcaf3561f1 7b1fb966ab8db823",
    "chinese_article_001": "519d8f6cd53ab0ab 8f1c3463937eebbf 92cde2529a8599d3 2224dfad33f68dc5 23dbe2858a81eb44",
    "chinese_article_002": "96d40bcd8d259d3e 0cdbd93f41f49e67 569d54dc239efbc2 f8da2a235cc8d6c6 e11d768e42cec2cc",
    "cleveland.com1": "f5351e25a6d4e8d6 fe523b944610092f 59727d87a1dc9833 62a9a56d6b0ca098 c1054bbf8b7076a1",
    "cnn_001": "74c2423f70886b7d 33912b6b43a8eab0 495715d3cec98332 a4e1b9a37fbc0e94 1f7b0a6e5ec585dc",
    "cnn_002": "a337d75bd43ae7dc 549d03cdbbc28d52 9be14d8f0373ebb9 31fdc3592fe4b639 8fde605ec9a6d305",
    "cnn_article": "6eb617197ea2f591 6e4334dd8b6e1452 528443b3eaa102f4 917afeeb88c41e6f c14b8f40110bf4df",
    "cnn_main_site": "006b44c55f77b879 cbae5ec3d966b074 21a64af1a9fec6b6 f0a72e860f2bbc6d 5fd4005904bebb4e",
    "cnn_test_nlp": "9883349e60f8cacc 7cdc9433fd3de096 3b949d9555d6d981 3557548bcd25bf9b 62f1346b0dbe1ec1",
    "fox13now_001": "65fbed2e22a38dbc 394a0332f44640ed c10bf3eaf7451412 ff9ff1304d11b4e9 c44b21b29b01b375",
    "japanese_article": "c5113676449b5b25 ebfa6fb5a72ee27b 86c31e487daf3949 e8ba190bbd068e2a a6ac353d90f3fc00",
    "japanese_article2": "94a935e9b9def561 489c6f0b3e822285 05cde843a9915eca 8bece6cf6db4d394 5be00172fa8ccb92",
    "latvian_article": "77e52df951b5b7a9 dde1dee66595c571 af54f67cbd80b4ed 9ac6913d2d267c6a 277c792a8a06b8ff",
    "spanish_article": "8b50eb898c874db6 396dac8fa75674ca bd015552b2cdde6c 18aed98f612a70b3 c41d3af55a7301aa",
    "thai_article": "c3514d7fc3cbc91b 4643b007cf4387f4 b558ee7ee0dd49b9 7b6ebf9aa326af18 7900ebc0c3e87cec",
    "time_001": "1502c6683f0354f6 34375dbdae2dee13 ba0b136746e3a25e bf3bfae639fd009a 602c4827d829d062",
    "video_article_02": "fa606729abe7ecdf 23cb08efaec87889 37ba25c0dcf59547 a30b5029e07d249f a66bbc01ed84697f",
    "wired_001": "dac2a443ae6f6ec7 d16aa69270f4b1dc 18c83e12f5e5df8b 54bc45438e2fe82d c33a353a67c2127a",
    "wired_main_site": "c9ae526763a1f7f5 837dbf1532e5b516 c0ea1e9bea4c069f bc17914be05be3dc 59e8f0db4bd35ac6",
    "yahoo_main_site": "3241efc473953635 c77ba79b7c84f6aa fa7a274e4f7b13f5 f375771f61932e2b e728c0e92154a461",
    "yna_co_kr": "9dc11ef76d36723c f14edcd98e37b79e 3df54c5a4405c066 67532c81d3513040 4ee3bcf7f0deb7b7",
}


def _compare(name: str, got: str, pinned: str) -> None:
    page, *rest = got.split()
    pinned_page, *pinned_rest = pinned.split()
    assert page == pinned_page, f"{name}: the page itself changed (its generator?); re-pin"
    assert rest == pinned_rest, f"{name}: the fingerprint's outputs changed"


def test_the_fingerprints_of_pages_built_offline_stay_as_pinned() -> None:
    built = pages()
    assert len(built) >= 30 and len({n for n, _ in built}) == len(built)
    assert {n for n, _ in built} == set(PINNED)
    for name, body in built:
        _compare(name, outputs(body), PINNED[name])


def test_the_fingerprints_of_the_real_pages_stay_as_pinned() -> None:
    reason = real_pages.missing_reason()
    if reason is not None:
        pytest.skip(reason)
    loaded = real_pages.load()
    assert {p.name for p in loaded} == set(REAL_PINNED)
    for page in loaded:
        _compare(page.name, outputs(page.html), REAL_PINNED[page.name])


if __name__ == "__main__":  # print the pins for the current code
    print("PINNED = {")
    for name, body in pages():
        print(f"    {name!r}: {outputs(body)!r},")
    print("}\n\nREAL_PINNED = {")
    if real_pages.missing_reason() is None:
        for page in real_pages.load():
            print(f"    {page.name!r}: {outputs(page.html)!r},")
    print("}")
