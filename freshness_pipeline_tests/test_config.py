"""freshness.toml: per-host extra strip params collapse session-id variants; per-class
selectors, fields and json_ld get their own fingerprint version, so adding them re-extracts
instead of reporting a wave of changes; a bad file fails the cycle naming the file and the
key."""

from __future__ import annotations

import os
import shutil
import zlib
from datetime import timedelta

import polars as pl
import pytest

from freshness_pipeline.app.runner import CycleFailed, load_seeds, run_cycle
from freshness_pipeline.config import ConfigError, extractor_version, load_config
from freshness_pipeline.science.fingerprint import FINGERPRINT_VERSION
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.storage import Warehouse

T1 = DEFAULT_START + timedelta(hours=6)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[hosts", "freshness.toml"),
        ("[other]\nx = 1\n", "unknown section"),
        ('[hosts."a.example"]\nstrip_params = "sid"\n', 'hosts."a.example".strip_params'),
        ("[url_classes.article]\nselectors = [1]\n", "url_classes.article.selectors"),
        ('[hosts."a.example"]\ncolour = 1\n', "takes only strip_params, not colour$"),
        ('[planning]\nobjective = "speed"\n', "planning.objective must be one of"),
        ("[planning]\nbudget = 3\n", "takes only cost, credits, objective, not budget$"),
        ('[planning]\nobjectiv = "capture"\n', r"\[planning\] takes only .*, not objectiv$"),
        ('[planning]\ncost = "dollars"\n', "planning.cost must be one of fetches, bytes"),
        ("[planning.credits]\nproduct = -2\n", "planning.credits.product must be a positive"),
        ('[planning.credits]\nproduct = "5"\n', "planning.credits.product must be a positive"),
        ("[planning]\ncredits = 3\n", r"\[planning.credits\] must be a table"),
        (
            "[url_classes.product]\ncolour = 1\n",
            "takes only selectors, fields, json_ld.*, not colour",
        ),
        ("[url_classes]\nproduct = 1\n", r"\[url_classes.product\] takes only"),
        ('url_classes = "product"\n', r"\[url_classes\] must be a table"),
        (
            '[url_classes.product]\nselectors = ["div[[["]\n',
            r"url_classes.product.selectors\[0\]: invalid CSS selector 'div\[\[\['",
        ),
        ('[url_classes.product]\nfields = ".price"\n', "url_classes.product.fields must be a"),
        ("[url_classes.product.fields]\nprice = 3\n", "fields.price must be a CSS selector"),
        ('[url_classes.product.fields]\nprice = "  "\n', "fields.price must be a CSS selector"),
        (
            '[url_classes.product.fields]\nprice = ".price["\n',
            r"url_classes.product.fields.price: invalid CSS selector '.price\['",
        ),
        ('[url_classes.product.fields]\n"unit price" = ".p"\n', "'unit price' must be an ident"),
        ('[url_classes.product.fields]\n"2nd" = ".p"\n', "'2nd' must be an identifier"),
        ('[url_classes.product.fields]\n"" = ".p"\n', "'' must be an identifier"),
        (
            '[url_classes.product.fields]\ntitle = "h1"\n',
            "the field 'title' is every version's own",
        ),
        (
            '[url_classes.product.fields]\ntext = "p"\n',
            "fields.text: the field 'text' is every",
        ),
        (
            '[url_classes.product]\njson_ld = true\n[url_classes.product.fields]\nprice = ".p"\n',
            r"fields.price: the field 'price' is read from JSON-LD \(json_ld = true\)",
        ),
        ('[url_classes.product]\njson_ld = "yes"\n', "json_ld must be true or false, not 'yes'"),
        ("[url_classes.product]\njson_ld = 1\n", "json_ld must be true or false, not 1"),
        # patterns run in polars' engine, which Python's re would have let through
        (
            '[url_classes.product]\nmatch = ["/products/", "/p(?=/)"]\n',
            r"freshness.toml: url_classes.product.match\[1\]: polars cannot run the regular "
            r"expression '/p\(\?=/\)': look-around, including look-ahead and look-behind, is "
            "not supported",
        ),
        (
            "[url_classes.product]\nmatch = ['/(p)/\\1']\n",
            r"url_classes.product.match\[0\]: .*'/\(p\)/\\\\1': backreferences are not supported",
        ),
        ('[url_classes.product]\nmatch = ["[a-"]\n', r"match\[0\]: .*'\[a-'"),
        ('[url_classes.product]\nmatch = "/products/"\n', "product.match must be a list of reg"),
        ("[url_classes.product]\nmatch = [1]\n", "product.match must be a list of non-empty"),
        ('[url_classes.product]\nmatch = [""]\n', "product.match must be a list of non-empty"),
        ("[url_classes.product]\nvalue = 0\n", "url_classes.product.value must be a positive"),
        ("[url_classes.product]\nvalue = -2\n", "product.value must be a positive number"),
        ("[url_classes.product]\nvalue = inf\n", "product.value must be a positive number"),
        ("[url_classes.product]\nvalue = nan\n", "product.value must be a positive number"),
        ('[url_classes.product]\nvalue = "5"\n', "product.value must be a positive number"),
        ("[url_classes.product]\nvalue = true\n", "product.value must be a positive number"),
    ],
)
def test_bad_config_is_named(tmp_path, text, message):
    (tmp_path / "freshness.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(tmp_path)


def test_fields_and_json_ld_are_read_per_class(tmp_path):
    (tmp_path / "freshness.toml").write_text(
        '[url_classes.product]\nselectors = ["main"]\njson_ld = true\n'
        '[url_classes.product.fields]\nshown_price = " .price-box > .price "\n'
        'stock = "#stock"\n'
        "[url_classes.listing.fields]\n"
        "[url_classes.article]\njson_ld = false\n"
    )
    config = load_config(tmp_path)
    assert config.fields_for("product") == {"shown_price": ".price-box > .price", "stock": "#stock"}
    assert config.json_ld_for("product") is True
    assert config.selectors_for("product") == ("main",)
    # an empty table and an unconfigured class are the defaults; json_ld = false is said
    for url_class in ("listing", "article", "static", None):
        assert config.fields_for(url_class) is None
        assert config.json_ld_for(url_class) is (False if url_class == "article" else None)
    assert load_config(tmp_path / "nowhere").fields_for("product") is None


def test_match_and_value_are_read_per_class_in_file_order(tmp_path):
    """The classes' patterns in the order the classes first appear in the file (the first
    that matches a URL gives its class); a class without ``match`` or ``value`` adds none."""
    (tmp_path / "freshness.toml").write_text(
        '[url_classes.product.fields]\nprice = ".price"\n'
        '[url_classes.collection]\nmatch = ["/collections/"]\n'
        '[url_classes.product]\nmatch = ["/products/[^/?]+$", "/product/"]\nvalue = 5\n'
        "[url_classes.article]\nvalue = 0.5\n"
        "[url_classes.static]\nmatch = []\n"
    )
    config = load_config(tmp_path)
    assert list(config.class_patterns.items()) == [
        ("product", ("/products/[^/?]+$", "/product/")),
        ("collection", ("/collections/",)),
    ]
    assert config.class_values == {"product": 5.0, "article": 0.5}
    assert config.fields_for("product") == {"price": ".price"}
    assert load_config(tmp_path / "nowhere").class_patterns == {}


def test_the_fingerprint_version_follows_selectors_fields_and_json_ld(tmp_path):
    """Each part of a class's extraction makes its own fingerprint version (so changing any
    re-extracts), and a selectors-only class keeps the number it had before fields existed."""
    price = {"price": ".price"}
    versions = {
        "default": extractor_version(()),
        "selectors": extractor_version(("main",)),
        "fields": extractor_version((), price),
        "other field name": extractor_version((), {"cost": ".price"}),
        "other field selector": extractor_version((), {"price": ".amount"}),
        "json_ld": extractor_version((), None, True),
        "no json_ld": extractor_version((), None, False),
        "fields and json_ld": extractor_version((), {"shown": ".price"}, True),
        "selectors and fields": extractor_version(("main",), price),
        "all": extractor_version(("main",), {"shown": ".price"}, True),
    }
    assert len(set(versions.values())) == len(versions), versions
    assert versions["default"] == FINGERPRINT_VERSION
    assert extractor_version((), {}, None) == FINGERPRINT_VERSION  # nothing configured
    assert versions["selectors"] == FINGERPRINT_VERSION + 1000 * (
        zlib.crc32(b"main") % 1_000_000 + 1
    )
    # the fingerprint hashes fields sorted by name: their order in the file changes nothing
    both = {"a": ".a", "b": ".b"}
    assert extractor_version((), both) == extractor_version((), dict(reversed(both.items())))

    configs = {}
    for name, text in {
        "none": "",
        "selectors": '[url_classes.product]\nselectors = ["main"]\n',
        "fields": '[url_classes.product.fields]\nprice = ".price"\n',
        "json_ld": "[url_classes.product]\njson_ld = true\n",
        "no json_ld": "[url_classes.product]\njson_ld = false\n",
    }.items():
        home = tmp_path / name
        home.mkdir()
        (home / "freshness.toml").write_text(text)
        configs[name] = load_config(home)
    rows = pl.DataFrame({"url_class": ["product", "article", None]})
    got = {
        name: rows.select(config.version_expr())["url_class"].to_list()
        for name, config in configs.items()
    }
    assert got["none"] == [FINGERPRINT_VERSION] * 3
    assert got["selectors"][0] == versions["selectors"]
    assert got["fields"][0] == versions["fields"]
    assert got["json_ld"][0] == versions["json_ld"]
    assert got["no json_ld"][0] == versions["no json_ld"]
    # other classes keep the default extractor's version
    assert all(g[1:] == [FINGERPRINT_VERSION] * 2 for g in got.values())


def honest_world(seed: int, pages: int):
    """One honest synthetic host of ``pages`` pages over a day, served on loopback."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    return build_world(
        seed, start=DEFAULT_START, horizon_days=1, sites=[SiteSpec("honest", "honest", pages)]
    )


def test_strip_params_and_selectors_take_effect(tmp_path):
    world = honest_world(3, pages=12)
    home = tmp_path / "home"
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        host, base = web.hosts["honest"], web.base_urls["honest"]
        page = next(u for u in web.truth().urls() if web.truth().url_class(u) == "article")
        seeds = web.seeds_csv(tmp_path / "seeds.csv", variants=False).read_text()
        seeds += f"{page}?sid=1,1,article\n{page}?sid=2,1,article\n"
        load_seeds(home, seeds.encode(), added_at=DEFAULT_START)
        run_cycle(home, DEFAULT_START)
        wh = Warehouse(home)
        assert wh.read("url_state").filter(pl.col("url").str.contains("sid=")).height == 2

        (home / "freshness.toml").write_text(
            f'[hosts."{host}"]\nstrip_params = ["sid"]\n\n[url_classes.article]\nselectors = ["article"]\n'
        )
        web.set_now(T1)
        run_cycle(home, T1)
        state = wh.read("url_state")
        assert state.filter(pl.col("url").str.contains("sid=")).height == 2  # kept, not lost
        candidates = wh.read("url_candidates")
        assert candidates.filter(pl.col("url").str.contains("sid=")).height == 0
        log = wh.read("fetch_log").filter(pl.col("fetched_at") == T1)
        articles = log.join(state.select("url", "url_class"), on="url").filter(
            pl.col("url_class") == "article"
        )
        assert articles.height > 0
        assert "changed" not in articles["outcome"].to_list()  # re-extraction, not false changes
        assert set(articles["fingerprint_version"].to_list()) == {extractor_version(("article",))}
        assert base in page

        (home / "freshness.toml").write_text("[hosts\n")
        with pytest.raises(CycleFailed, match="freshness.toml"):
            run_cycle(home, T1 + timedelta(hours=6))
        # through the CLI a bad freshness.toml is bad input (exit 2), named, and nothing ran
        from typer.testing import CliRunner

        from freshness_pipeline.app.cli import app

        before = wh.read("fetch_log").height
        later = (T1 + timedelta(hours=6)).isoformat()
        done = CliRunner().invoke(app, ["cycle", "--home", str(home), "--now", later])
        assert done.exit_code == 2, done.output
        assert "freshness.toml" in done.output
        assert wh.read("fetch_log").height == before


def test_the_objective_switch_changes_what_a_fetch_is_worth(tmp_path):
    """[planning] objective: "capture" scores a fetch by the chance it catches a change (at
    most 1), "freshness" by the days of fresh copy it buys (a never-fetched page: the expected
    time to its next change, many days)."""
    world = honest_world(5, pages=12)
    home = tmp_path / "home"
    gains = {}
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        seeds = web.seeds_csv(tmp_path / "seeds.csv", variants=False).read_bytes()
        load_seeds(home, seeds, added_at=DEFAULT_START)
        assert load_config(home).objective == "freshness"
        for objective in ("capture", "freshness"):
            (home / "freshness.toml").write_text(f'[planning]\nobjective = "{objective}"\n')
            assert load_config(home).objective == objective
            run_cycle(home, DEFAULT_START, dry_run=True)
            plan = Warehouse(home).read("revisit_plan")
            gains[objective] = plan["expected_gain"].drop_nulls()
    assert gains["capture"].len() == gains["freshness"].len() > 0
    assert gains["capture"].max() <= 1.0
    assert gains["freshness"].min() > 1.0


def test_cost_basis_prices_page_types(tmp_path):
    """[planning] cost: "credits" divides each page's gain by its class's credits; "bytes" by
    what its host and class's requests transferred (the fetch_totals the fetch stage keeps),
    so after a real cycle the plan's cost follows the bytes each class sent; a warehouse
    without the totals prices the same from fetch_log."""
    world = honest_world(7, pages=30)
    home = tmp_path / "home"
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        seeds = web.seeds_csv(tmp_path / "seeds.csv", variants=False).read_bytes()
        load_seeds(home, seeds, added_at=DEFAULT_START)
        run_cycle(home, DEFAULT_START, budget=1000)  # fetch everything once: fetch_log
        plans = {}
        for text in (
            '[planning]\ncost = "credits"\n[planning.credits]\nproduct = 10\ndefault = 2\n',
            '[planning]\ncost = "bytes"\n',
            "",
        ):
            (home / "freshness.toml").write_text(text)
            run_cycle(home, T1, dry_run=True)
            plans[text.split("\n")[1] if text else "fetches"] = Warehouse(home).read("revisit_plan")
        (home / "freshness.toml").write_text('[planning]\ncost = "bytes"\n')
        shutil.rmtree(Warehouse(home).table_dir("fetch_totals"))
        run_cycle(home, T1, dry_run=True)
        from_log = Warehouse(home).read("revisit_plan")
    assert (
        from_log.select("url", "cost")
        .sort("url")
        .equals(plans['cost = "bytes"'].select("url", "cost").sort("url"))
    )
    base = plans["fetches"].select("url", "url_class", pl.col("cost").alias("base"))

    def type_cost(name: str) -> pl.DataFrame:
        """Cost over the "fetches" plan's (host health, a URL's errors): the page type's part."""
        return base.join(plans[name].select("url", "cost"), on="url").with_columns(
            (pl.col("cost") / pl.col("base")).alias("ratio")
        )

    credits = type_cost('cost = "credits"').group_by("url_class").agg(pl.col("ratio").unique())
    assert credits.height > 1
    for url_class, ratios in credits.iter_rows():
        assert ratios == pytest.approx([10.0 if url_class == "product" else 2.0]), url_class
    log = Warehouse(home).read("fetch_log").join(base, on="url")
    mean_bytes = log.group_by("url_class").agg(pl.col("bytes").mean()).sort("bytes")
    priced = type_cost('cost = "bytes"').group_by("url_class").agg(pl.col("ratio").mean())
    assert priced["ratio"].n_unique() > 1
    assert priced.sort("ratio")["url_class"].to_list() == mean_bytes["url_class"].to_list()
