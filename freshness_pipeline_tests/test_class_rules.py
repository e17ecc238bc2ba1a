"""A URL class's ``match`` patterns and ``value`` in freshness.toml: a page a site adds after
the seeds were loaded (listed by its sitemap, pointed to by a redirect) takes the class its
URL's pattern says, with that class's value and extraction, instead of no class and value 1.
A seed row's class and value stay the user's word; an inherited class gives way to a pattern.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from aiohttp import web

from freshness_pipeline.app.runner import load_seeds
from freshness_pipeline.config import PipelineConfig, load_config
from freshness_pipeline.stages.candidates import canonical_candidates
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import run_cycles, serve_on_loopback

NOW = datetime(2026, 11, 30, tzinfo=UTC)
SHOP = "https://shop.example"
RULES = """
[url_classes.product]
match = ["/products/[^/?]+$", "/product/"]
value = 5
json_ld = true

[url_classes.collection]
match = ["/collections/"]
value = 2
"""


def _config(tmp_path: Path, text: str) -> PipelineConfig:
    home = tmp_path / f"home{len(list(tmp_path.iterdir()))}"
    home.mkdir()
    (home / "freshness.toml").write_text(text)
    return load_config(home)


def _classes(
    rows: list[tuple[str, str, float | None, str | None]], config: PipelineConfig
) -> dict[str, tuple[str | None, float]]:
    """Each candidate's (url_class, value) from inventory rows (path, source, value, class)."""
    inventory = tables.conform(
        "url_inventory",
        pl.DataFrame(
            {
                "url": [SHOP + path for path, *_ in rows],
                "host": ["shop.example"] * len(rows),
                "source": [source for _, source, _, _ in rows],
                "value": [value for _, _, value, _ in rows],
                "url_class": [url_class for *_, url_class in rows],
                "first_seen_at": [NOW] * len(rows),
                "last_seen_at": [NOW] * len(rows),
            },
            schema_overrides={"value": pl.Float64, "url_class": pl.String},
        ),
    )
    candidates, invalid = canonical_candidates(inventory, ["shop.example"], NOW, config)
    assert invalid == 0
    return {
        url.removeprefix(SHOP): (url_class, value)
        for url, url_class, value in candidates.select("url", "url_class", "value").iter_rows()
    }


def test_a_pattern_classes_a_url_no_seed_row_classes(tmp_path: Path) -> None:
    got = _classes(
        [
            # launched after the seeds were loaded: listed by the sitemap alone
            ("/products/lamp", "sitemap", None, None),
            ("/product/123", "feed", None, None),
            # the user's seed row: its class and value win over the pattern's
            ("/products/gift-card", "seed", 3.0, "voucher"),
            ("/products/gift-card", "sitemap", None, None),
            # a seed row with a class and no value: the class's value
            ("/products/chair", "seed", None, "product"),
            # a seed row with neither: both from the pattern
            ("/products/desk", "seed", None, None),
            # a discontinued product redirected to its category: the category is a collection
            ("/collections/lamps", "redirect", 5.0, "product"),
            ("/collections/lamps", "sitemap", None, None),
            # an inherited value gives way to the value of the class the URL ends up with
            ("/products/moved", "redirect", 9.0, "product"),
            # both classes' patterns match: the first class in the file wins
            ("/collections/lamps/products/desk-lamp", "sitemap", None, None),
            # nothing matches: no class, and what the URL inherited, or the host's typical seed
            ("/about", "sitemap", None, None),
            ("/pages/new-home", "redirect", 4.0, "landing"),
        ],
        _config(tmp_path, RULES),
    )
    assert got == {
        "/products/lamp": ("product", 5.0),
        "/product/123": ("product", 5.0),
        "/products/gift-card": ("voucher", 3.0),
        "/products/chair": ("product", 5.0),
        "/products/desk": ("product", 5.0),
        "/collections/lamps": ("collection", 2.0),
        "/products/moved": ("product", 5.0),
        "/collections/lamps/products/desk-lamp": ("product", 5.0),
        # the mean of the seeds' values: 3 (gift card), 5 and 5 (chair, desk: their class's)
        "/about": (None, 13 / 3),
        "/pages/new-home": ("landing", 4.0),
    }


def test_the_first_class_in_the_file_wins(tmp_path: Path) -> None:
    """Order is the order classes first appear in the file, a sub-table included."""
    url = "/collections/lamps/products/desk-lamp"
    rows: list[tuple[str, str, float | None, str | None]] = [(url, "sitemap", None, None)]
    collection_first = (
        '[url_classes.collection.fields]\ntag = ".tag"\n'
        '[url_classes.product]\nmatch = ["/products/"]\n'
        '[url_classes.collection]\nmatch = ["/collections/"]\n'
    )
    assert _classes(rows, _config(tmp_path, collection_first)) == {url: ("collection", 1.0)}
    assert _classes(rows, _config(tmp_path, RULES)) == {url: ("product", 5.0)}


def test_a_class_value_applies_to_a_class_given_otherwise(tmp_path: Path) -> None:
    """``value`` without ``match``: the class's URLs, however classed, that have no value of
    their own; patterns search the whole normalized URL, host included, and take flags."""
    config = _config(
        tmp_path,
        "[url_classes.article]\nvalue = 3\n"
        '[url_classes.guide]\nmatch = ["(?i)^https://SHOP\\\\.EXAMPLE/guide"]\n',
    )
    rows: list[tuple[str, str, float | None, str | None]] = [
        ("/a", "seed", None, "article"),
        ("/b", "redirect", None, "article"),
        ("/c", "sitemap", None, None),
        ("/guide", "sitemap", None, None),
        ("/blog/guide", "sitemap", None, None),
    ]
    assert _classes(rows, config) == {
        "/a": ("article", 3.0),
        "/b": ("article", 3.0),
        # the host's one seed is worth 3 (its class's value): so is a page found beside it
        "/c": (None, 3.0),
        "/guide": ("guide", 3.0),
        "/blog/guide": (None, 3.0),
    }


def test_a_found_page_is_worth_what_its_hosts_seeds_are_worth() -> None:
    """A page a sitemap, feed or canonical link brings, with no value of its own, takes the
    mean of its host's seed values (a seed without one counts 1.0), each counted at most at
    the host's 99th percentile of them; a host without seeds gives 1.0, as before (it gave
    1.0 on every host: ranked below the seeds of a host valued 3, above those of one valued
    0.5)."""
    config = PipelineConfig()
    valued = [
        ("/a", "seed", 3.0, None),
        ("/b", "seed", 2.0, None),
        ("/c", "seed", None, None),  # loaded without a value: 1.0
        ("/found", "sitemap", None, None),
        ("/listed", "feed", None, None),
        ("/c", "sitemap", None, None),  # a seed the sitemap lists too is still a seed
    ]
    got = _classes(valued, config)
    # 3, 2 and 1, the highest counted at the 99th percentile's value below it: 2, 2 and 1
    assert got["/found"] == got["/listed"] == (None, 5 / 3)
    assert got["/c"] == (None, 1.0)
    # one seed valued far above its neighbours counts as the next below it
    home_page = [("/", "seed", 1000.0, None)] + [(f"/{i}", "seed", 0.5, None) for i in range(4)]
    got = _classes([*home_page, ("/found", "sitemap", None, None)], config)
    assert got["/found"] == (None, 0.5) and got["/"] == (None, 1000.0)
    # what a page inherited through a redirect still comes before the host's figure
    got = _classes([*valued, ("/moved", "redirect", 7.0, None)], config)
    assert got["/moved"] == (None, 7.0)
    assert _classes([("/found", "sitemap", None, None)], config) == {"/found": (None, 1.0)}


PRODUCT = (
    "<html><head><title>{0}</title></head><body><main><h1>{0}</h1>"
    '<p class="price">${1}</p><p>{0}: a product page with words of its own.</p></main></body></html>'
)


@pytest.mark.usefixtures("loopback_crawl")
def test_a_url_the_sitemap_adds_is_crawled_as_its_class(tmp_path: Path) -> None:
    """Through real cycles: a product the sitemap lists after a rule is added is planned at
    its class's value and fetched with its class's fields; one found before the rule takes
    the class and value in url_state at the next cycle (candidates are classed afresh every
    cycle), and with them its class's extraction: a re-extraction, not a change; and loses
    them when the rule no longer matches it."""
    listed = ["/products/lamp"]

    async def shop(request: web.Request) -> web.Response:
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        if request.path == "/sitemap.xml":
            locs = "".join(f"<url><loc>http://{request.host}{p}</loc></url>" for p in listed)
            return web.Response(
                text=f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>',
                content_type="application/xml",
            )
        name = request.path.rsplit("/", 1)[-1] or "home"
        return web.Response(text=PRODUCT.format(name, len(name)), content_type="text/html")

    home = tmp_path / "home"
    with serve_on_loopback(shop) as base:
        load_seeds(home, f"url\n{base}/\n".encode(), added_at=NOW)
        run_cycles(home, NOW, 1)
        wh = Warehouse(home)
        before = wh.read("url_state").filter(pl.col("url") == f"{base}/products/lamp")
        assert before.select("url_class", "value").row(0) == (None, 1.0)

        (home / "freshness.toml").write_text(
            '[url_classes.product]\nmatch = ["/products/[^/?]+$"]\nvalue = 5\n'
            '[url_classes.product.fields]\nprice = ".price"\n'
        )
        listed.append("/products/desk")
        run_cycles(home, NOW, 1, first=1)
        assert _state(wh, base) == {
            "/": (None, 1.0),  # the seed's own value; no pattern matches it
            "/products/lamp": ("product", 5.0),
            "/products/desk": ("product", 5.0),
        }
        plan = wh.read("revisit_plan").filter(pl.col("url") == f"{base}/products/desk")
        assert plan.select("url_class", "value", "selected").row(0) == ("product", 5.0, True)
        desk = wh.read("page_versions").filter(pl.col("url") == f"{base}/products/desk")
        assert json.loads(desk["fields"][0])["price"] == "$4"
        # the reclassified page: read again under its class's extraction, not taken for a change
        lamp = wh.read("page_versions").filter(pl.col("url") == f"{base}/products/lamp")
        assert lamp.sort("observed_at")["outcome"].to_list() == ["new", "reextracted"]
        assert json.loads(lamp.sort("observed_at")["fields"][-1])["price"] == "$4"
        assert wh.read("changes").filter(pl.col("url") == f"{base}/products/lamp").is_empty()

        # a rule narrowed: the URL it no longer matches is of no class again, in url_state as
        # in the plan that fetched it, not a product valued 1 fetched as no class
        (home / "freshness.toml").write_text(
            '[url_classes.product]\nmatch = ["/products/desk$"]\nvalue = 5\n'
        )
        run_cycles(home, NOW, 1, first=2)
    assert _state(wh, base)["/products/lamp"] == (None, 1.0)


def _state(wh: Warehouse, base: str) -> dict[str, tuple[str | None, float]]:
    """Each url_state row's (url_class, value), by path."""
    rows = wh.read("url_state").select("url", "url_class", "value").iter_rows()
    return {url.removeprefix(base): (url_class, value) for url, url_class, value in rows}
