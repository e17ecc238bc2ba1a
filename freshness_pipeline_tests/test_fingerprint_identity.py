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


# the outputs of FINGERPRINT_VERSION 14 (FIELD_RULES_VERSION 4)
PINNED: dict[str, str] = {
    "synthweb home honest": "1c6d2e4b6fe73e58 c1de133703e06367 6d960c086529da52 9a6742cf9fb81156 0e1c189b8b95361c",
    "synthweb honest/articles/1": "a6773f1b2bfa5cb4 0a7ec914af156289 cc61d35d5b6c3d81 cc6358fb7d16042b 9b208f291fdbb792",
    "synthweb honest/static/about-1": "bfd589abaf09d32d 78dca467c776376e 187f38fcce18b66a 588fdb84ff22808a e65f090570f73a30",
    "synthweb honest/listing/1": "bcedb29d4c966104 55d69204e79a59cd 1b2e9655e260fa31 a38835fb4cefd2b9 0c221e7cdd4d3e5b",
    "synthweb home lastmod": "8f0bf22f9b527220 84418be817d80796 822635579f05ed1a 978cea5ade3ec773 4cf4608d9aced29b",
    "synthweb lastmod/articles/1": "6721dde38ebe15ff 94469600f5e03885 b3f16625962beaa2 7dd94481ec87c73f f54ea1277c3b0d79",
    "synthweb lastmod/static/about-1": "8188887fd9c6dc66 9a5840102f4e41a3 7819756e21321bed 5df62b442c5204aa c5a2713489a4dd6b",
    "synthweb lastmod/static/about-2": "ede6ebc0c2d66690 9b203a32076998d7 64a8e680bf195ca3 7eaa816d5a038d3e 4eaf79046e4b7847",
    "synthweb home novalid": "542d78db31397d5f 673be47ea11d98e8 e5bf852b6e0a2a96 22321f60df4b1673 5055d8b2f796c2e7",
    "synthweb novalid/articles/1": "c0b7c1e33dc373d8 4565083c227dab0d 2b85f9b5d893de94 b42044b84a3bdae0 74d42553525143e0",
    "synthweb novalid/articles/2": "34f4be5af61c6b8b a02c52d7f5426666 589d0483d538bb38 190dd50ea26bdcdc 508a6836193d3e21",
    "synthweb novalid/static/about-1": "4cfb2b7e0af45309 ab5a0051e886a228 f6014b7c4b07cac3 8001a8cc9f0bfbb2 9804ce87c5a22c03",
    "synthweb home volatile": "d93f8286ba0b6d72 65ce2487c2fd4a47 bfe9aaf92bb34d33 a85e245f3a92e1e4 753836e078d0f542",
    "synthweb volatile/articles/1": "07aa4e19a2a188a2 956fdff8a3673de0 08f46bfd013e35f8 deb137de7db8fdff 9efd4b64e621a967",
    "synthweb volatile/articles/2": "04686eb880211e41 6efefbfdc0b7cee0 9dfbc287974490d2 0483b5dd00355d5b 7c169986ddf586b0",
    "synthweb volatile/articles/3": "d8ebee8fd499550d b0ab4f156a662fb8 dc90363df00572f0 5d368a0efbeec72e b792f561f3e2af35",
    "synthweb home polite": "b78f0ed65ccfd5c0 8eb3a9efb9f7d328 35e28e83ace50023 3483aef1815b4299 579c9b366ad9eb9c",
    "synthweb polite/static/about-1": "470d4029ba9447d6 5e9aafe4534f8a00 0c532585bcdb9bf6 dde8da02ac6be718 231a3b9774d536d0",
    "synthweb polite/articles/1": "fd5841cd5c7a816b c068b4c44000614e c8227b56749db083 58a1265ded8877eb 6aaa4a6a576db793",
    "synthweb polite/static/about-2": "fe5545c1c8c69ef9 e6a3a3dc4244c15d 82e2e5970d689170 32ee2a144655941d 22a35456b578b15e",
    "synthweb mutated 0": "4cd193c7aa751a63 bc090edf2d9d2eb6 eec219fe207613fa b90fe1542f36198a 878bd333f53e61bc",
    "synthweb mutated 1": "586ee95423c66e2a bc090edf2d9d2eb6 37ef2ff3c2f326b0 b90fe1542f36198a 58d5f9502dee793b",
    "synthweb mutated 2": "a62fcba571958f39 bc090edf2d9d2eb6 0c9ae7c5519eac7b b90fe1542f36198a 05e589c285cfd7eb",
    "synthweb mutated 3": "7804f1c5ca162fb9 446c3965df7b2b30 51ebe7c9648710d2 5e56929e3529a102 a58c25bb775df3db",
    "synthweb mutated 4": "4bbb1190ee2c7cc4 446c3965df7b2b30 56ea7010de6e4a68 5e56929e3529a102 e775af8804b31462",
    "benchmark web news-wire 1": "5b9c3a8f58d85f58 308b0933f5a1def8 404639629d94fca6 3d601d7abea79e82 48a2b8d4266411ba",
    "benchmark web news-wire 2": "6cc87d15efcb3334 308b0933f5a1def8 404639629d94fca6 3d601d7abea79e82 48a2b8d4266411ba",
    "benchmark web shop-amp 1": "1e43ff7a44783134 afe060b31b5dd9e1 f7bc9a04cec28846 693e32a1d2dd0764 98e17032227d9dc3",
    "benchmark web shop-amp 2": "7e40fb547dcc0328 afe060b31b5dd9e1 f7bc9a04cec28846 693e32a1d2dd0764 98e17032227d9dc3",
    "benchmark web shop-lm 1": "d705458a98064073 225479b08f5efbc9 fc031c1c8768490a d7b3b7d5d1390fd5 9a80b44440d68372",
    "benchmark web shop-lm 2": "05ca0b8acf2f8dd3 225479b08f5efbc9 fc031c1c8768490a d7b3b7d5d1390fd5 9a80b44440d68372",
    "benchmark web docs-lastmod-now 1": "f79f428ed501a8c4 b33d7f992939b838 fe6e5e30f6fcff33 db10b97111f50ede 00285c730152765a",
    "benchmark web docs-lastmod-now 2": "73fd89bc1bd8d727 b33d7f992939b838 fe6e5e30f6fcff33 db10b97111f50ede 00285c730152765a",
    "soft 404": "35343f1f9154087f 028cb503cde8e783 efb9fd4d6f4622a5 30a844d8daf8b4f9 11a9513b301f2d0f",
    "test page": "7426a8f89726b7e0 6c68b7ec0dd38585 0b12dcf38ddc4976 85a991fbe71bce05 b3050d9655bd25f9",
    "test page, other noise": "c427529c3db0b600 63bcc7c2344bee23 ffb268126047d9d3 8a2ebf0b0d9911e6 74a47062a938307e",
    "test product": "aee3c8cf6941e54b 4292267363ce99c6 f9fe38a3767f07d1 2d2064d30e62d7f0 1b9b10d29994364b",
    "latin-1": "48e43584a22cd4b2 1b8e68ea6fe8b7a6 ef66fb04f84ed5dc 8d97fb8452cafa5f e75e4ea20bc8fd4c",
}

REAL_PINNED: dict[str, str] = {
    "ap_meta_refresh": "c379fef93768ddbc 7fd6446422f5a564 0f61506ba98fa5a2 71b3a8f3240f0198 6b1a7a5d469b6d38",
    "arabic_article": "7f8c5cf000f5b5a1 95546e961962fa17 3dc9c7b71018ce93 8055c91a418a4e0c 3ae11ce389ae6d5f",
    "article_with_br": "7432cd7559340c77 0faf0ce34d2fbe5b 54e5256efd06eeff 4c704492b6d3991b 52dd29ac500305ab",
    "article_with_divs": "69726db8bbb8fc2d 5a3c5719665dcdff 360a87e717286c1d 88aef0f0f68c3ac6 181cf852f62b712c",
    "autoindustria": "399c1151efea3992 a7a8cee76a09b2e3 072e86710d3d0b12 15002844dd356123 2cf24952f2f9f51b",
    "burmese_article": "02c1c71f4a725528 2f71255280775b5f f9b5595db7ba19d9 f42e35e2bee0e7ae b8bf69f5d9f4f004",
    "chinese_article": "3a73eafc0a561416 9f1b86f513c5374b 68a629e24ec5b9c2 a80e504902a14b57 11ef70ad26c5af10",
    "chinese_article_001": "519d8f6cd53ab0ab 8f1c3463937eebbf 92cde2529a8599d3 6146b3783f2462e9 442781677b10feea",
    "chinese_article_002": "96d40bcd8d259d3e 0cdbd93f41f49e67 569d54dc239efbc2 14cc416a5b909f3d 1075cbdd545601d9",
    "cleveland.com1": "f5351e25a6d4e8d6 fe523b944610092f 59727d87a1dc9833 da628a478ec276c8 5618c1aae525942b",
    "cnn_001": "74c2423f70886b7d 33912b6b43a8eab0 495715d3cec98332 98c496bbcfbe215a b5c2333344203519",
    "cnn_002": "a337d75bd43ae7dc 549d03cdbbc28d52 9be14d8f0373ebb9 772b460cf4d8a396 f79ecc93598569ea",
    "cnn_article": "6eb617197ea2f591 6e4334dd8b6e1452 528443b3eaa102f4 5f21911b4b9f7d27 87e2d65a86eb485c",
    "cnn_main_site": "006b44c55f77b879 cbae5ec3d966b074 21a64af1a9fec6b6 3fa64dc275cf23ac f4254db1228f0f5c",
    "cnn_test_nlp": "9883349e60f8cacc 7cdc9433fd3de096 3b949d9555d6d981 8f2df39cd34c5651 6e7bdaeb1ee531c1",
    "fox13now_001": "65fbed2e22a38dbc 394a0332f44640ed c10bf3eaf7451412 f62d3663413d995b 93c2fc16415ad40d",
    "japanese_article": "c5113676449b5b25 ebfa6fb5a72ee27b 86c31e487daf3949 567e59ac8b10c6ae 439d9063201fe553",
    "japanese_article2": "94a935e9b9def561 489c6f0b3e822285 05cde843a9915eca daa1e3491b7d55fd c0b2692d0da6acf0",
    "latvian_article": "77e52df951b5b7a9 dde1dee66595c571 af54f67cbd80b4ed bcf6c6b061adf48d d706ae00d43b962e",
    "spanish_article": "8b50eb898c874db6 396dac8fa75674ca bd015552b2cdde6c a44dcb0eab14fe0d 24642e791b4468eb",
    "thai_article": "c3514d7fc3cbc91b 4643b007cf4387f4 b558ee7ee0dd49b9 58df9597ddef451a 0110baffd99be40e",
    "time_001": "1502c6683f0354f6 34375dbdae2dee13 ba0b136746e3a25e b79b5a87e100e36f cc6005dee8832df3",
    "video_article_02": "fa606729abe7ecdf 23cb08efaec87889 37ba25c0dcf59547 d175f4be69805a2e e35eb31fa50bf84f",
    "wired_001": "dac2a443ae6f6ec7 d16aa69270f4b1dc 18c83e12f5e5df8b add85afb228eda95 862e7132c0dd612a",
    "wired_main_site": "c9ae526763a1f7f5 837dbf1532e5b516 c0ea1e9bea4c069f a87be89777dba738 610f9832fbe9d51b",
    "yahoo_main_site": "3241efc473953635 c77ba79b7c84f6aa fa7a274e4f7b13f5 b0c86b5b94d77124 d4eeced8f3d722f5",
    "yna_co_kr": "9dc11ef76d36723c f14edcd98e37b79e 3df54c5a4405c066 c6cf6210a2122416 989481c3afca245c",
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
