import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from freshness_pipeline.science.hints import (
    LASTMOD_TRUST_SCHEMA,
    changed_hint_odds,
    hint_evidence,
    lastmod_age_days,
    lastmod_hints,
    lastmod_says,
    lastmod_trust,
    listing_of,
)
from freshness_pipeline.science.schedule import PlanConfig, build_plan

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def _on_one_page(claim, lastmod, since):
    """``claim`` (lastmod_says or lastmod_age_days) for one page, as of NOW."""
    df = pl.DataFrame(
        {"lastmod": [lastmod], "since": [since]},
        schema={"lastmod": pl.Datetime("us", "UTC"), "since": pl.Datetime("us", "UTC")},
    )
    return df.select(claim(pl.col("lastmod"), pl.col("since"), pl.lit(NOW))).item()


def _says(lastmod, since) -> str | None:
    return _on_one_page(lastmod_says, lastmod, since)


def test_lastmod_says() -> None:
    fetched = NOW - 2 * DAY
    assert _says(NOW - DAY, fetched) == "changed"
    assert _says(NOW - 3 * DAY, fetched) == "unchanged"
    assert _says(None, fetched) is None
    assert _says(NOW - DAY, None) is None
    assert _says(NOW + DAY, fetched) is None  # future lastmod: clock skew or placeholder
    # a date-only lastmod on the day of our fetch cannot be ordered against it
    midnight = datetime(2026, 2, 27, tzinfo=UTC)
    assert _says(midnight, midnight + timedelta(hours=10)) is None
    assert _says(midnight, midnight + timedelta(hours=30)) == "unchanged"
    assert _says(midnight, midnight - timedelta(hours=1)) == "changed"


def _history(host: str, kind: str, n: int = 40, start: datetime = NOW - 60 * DAY) -> list[dict]:
    """Fetches every day; the page changes every other day. ``kind`` says what lastmod does."""
    rows = []
    for i in range(1, n + 1):
        prev, at = start + (i - 1) * DAY, start + i * DAY
        changed = i % 2 == 0
        change_at = prev + timedelta(hours=5)
        if kind == "accurate":
            lastmod = change_at if changed else prev - timedelta(hours=20)
        elif kind == "build-time":  # every URL stamped with the sitemap build time
            lastmod = at - timedelta(hours=1)
        elif kind == "frozen":  # never updated
            lastmod = start - 100 * DAY
        elif kind == "noisy":  # every change, and a stock-count save on half the quiet days
            lastmod = change_at if changed or i % 4 == 1 else prev - timedelta(hours=20)
        else:
            raise ValueError(kind)
        rows.append(
            {
                "url": f"http://{host}/p",
                "host": host,
                "fetched_at": at,
                "prev_fetched_at": prev,
                "changed": changed,
                "lastmod": lastmod,
            }
        )
    return rows


def _evidence(*histories: list[dict]) -> pl.DataFrame:
    rows = [r for h in histories for r in h]
    return hint_evidence(pl.DataFrame(rows))


def test_host_trust_separates_accurate_from_lying_hosts() -> None:
    ev = _evidence(
        _history("good.example", "accurate"),
        _history("stamp.example", "build-time"),
        _history("frozen.example", "frozen"),
    )
    trust = {r["host"]: r for r in lastmod_trust(ev, now=NOW).iter_rows(named=True)}
    good, stamp, frozen = trust["good.example"], trust["stamp.example"], trust["frozen.example"]
    assert good["precision"] > 0.9 and good["recall"] > 0.9 and good["trust"] > 0.9
    # "changed" every time: right only half the time
    assert stamp["precision"] == pytest.approx(0.5, abs=0.05) and stamp["recall"] > 0.9
    # never moves: misses every change
    assert frozen["recall"] < 0.1 and frozen["trust"] < 0.1


def test_trust_decays_when_a_host_starts_lying() -> None:
    old_good = _history("h.example", "accurate", n=40, start=NOW - 200 * DAY)
    recent_bad = _history("h.example", "build-time", n=30, start=NOW - 31 * DAY)
    trust = lastmod_trust(_evidence(old_good, recent_bad), now=NOW, half_life_days=14.0)
    assert trust["precision"].item() < 0.6
    # without forgetting the old record would still carry it
    long_memory = lastmod_trust(_evidence(old_good, recent_bad), now=NOW, half_life_days=1e6)
    assert long_memory["precision"].item() > trust["precision"].item()


def test_empty_evidence_and_validation() -> None:
    empty = lastmod_trust(hint_evidence(pl.DataFrame(_history("x", "accurate")).head(0)), now=NOW)
    assert empty.schema == pl.Schema(LASTMOD_TRUST_SCHEMA)
    with pytest.raises(ValueError):
        lastmod_trust(empty, now=NOW, half_life_days=0)
    with pytest.raises(ValueError):
        lastmod_hints(pl.DataFrame(), empty, now=NOW, min_precision=2.0)


def _pages() -> pl.DataFrame:
    fetched = NOW - 2 * DAY
    rows = [
        ("http://good.example/a", "good.example", NOW - DAY, fetched),  # changed since
        ("http://good.example/b", "good.example", NOW - 5 * DAY, fetched),  # unchanged
        ("http://good.example/c", "good.example", None, fetched),  # no lastmod
        ("http://stamp.example/a", "stamp.example", NOW - DAY, fetched),
        ("http://stamp.example/b", "stamp.example", NOW - 5 * DAY, fetched),
        ("http://frozen.example/a", "frozen.example", NOW - 5 * DAY, fetched),
        ("http://new.example/a", "new.example", NOW - DAY, fetched),  # no evidence yet
        ("http://good.example/d", "good.example", NOW - DAY, None),  # never fetched
    ]
    return pl.DataFrame(
        rows,
        schema={
            "url": pl.String,
            "host": pl.String,
            "lastmod": pl.Datetime("us", "UTC"),
            "last_fetched_at": pl.Datetime("us", "UTC"),
        },
        orient="row",
    )


def test_lastmod_hints_trusts_only_proven_hosts() -> None:
    ev = _evidence(
        _history("good.example", "accurate"),
        _history("stamp.example", "build-time"),
        _history("frozen.example", "frozen"),
    )
    trust = lastmod_trust(ev, now=NOW)
    out = lastmod_hints(_pages(), trust, now=NOW)
    got = dict(zip(out["url"], out["hinted_change"], strict=True))
    assert got["http://good.example/a"] is True
    assert got["http://good.example/b"] is False
    assert got["http://good.example/c"] is None
    assert got["http://stamp.example/a"] is None  # its "changed" is right half the time
    # ... but it never missed a change, so a lastmod that did not move is believable
    assert got["http://stamp.example/b"] is False
    assert got["http://frozen.example/a"] is None  # its "unchanged" hides changes
    assert got["http://new.example/a"] is None
    assert got["http://good.example/d"] is None
    assert out.columns[:4] == _pages().columns
    assert out["lastmod_trust"].null_count() == 1  # new.example: no evidence yet
    # too little evidence: nothing trusted
    few = lastmod_hints(_pages(), trust, now=NOW, min_evidence=1e9)
    assert few["hinted_change"].null_count() == few.height


def _quiet(lastmod, since) -> float | None:
    return _on_one_page(lastmod_age_days, lastmod, since)


def test_a_lastmod_dates_only_the_quiet_time_it_proves() -> None:
    fetched = NOW - 2 * DAY
    assert _quiet(NOW - DAY, fetched) == pytest.approx(1.0)
    assert _quiet(NOW - 3 * DAY, fetched) is None  # "unchanged": no change to date
    assert _quiet(NOW + DAY, fetched) is None
    assert _quiet(None, fetched) is None
    assert _quiet(NOW - DAY, None) is None
    # date-only: changed some time that day, so quiet only from the day's end (NOW is noon)
    midnight = datetime(2026, 2, 27, tzinfo=UTC)
    assert _quiet(midnight, midnight - timedelta(hours=1)) == pytest.approx(1.5)
    today = datetime(2026, 3, 1, tzinfo=UTC)
    assert _says(today, today - timedelta(hours=30)) == "changed"
    assert _quiet(today, today - timedelta(hours=30)) is None  # its day has not ended


def test_only_a_host_trusted_both_ways_dates_changes() -> None:
    ev = _evidence(
        _history("good.example", "accurate"),
        _history("stamp.example", "build-time"),
        _history("frozen.example", "frozen"),
    )
    out = lastmod_hints(_pages(), lastmod_trust(ev, now=NOW), now=NOW)
    dates = dict(zip(out["url"], out["lastmod_dates"], strict=True))
    ages = dict(zip(out["url"], out["lastmod_age_days"], strict=True))
    assert ages.pop("http://good.example/a") == pytest.approx(1.0)
    assert set(ages.values()) == {None}  # unchanged, no lastmod, never fetched, untrusted
    assert {u for u, d in dates.items() if d} == {f"http://good.example/{p}" for p in "abcd"}
    # a host right about changes but hiding some (frozen) or crying wolf (stamp) dates nothing
    assert dates["http://stamp.example/a"] is False and dates["http://frozen.example/a"] is False
    assert dates["http://new.example/a"] is False
    strict = lastmod_hints(_pages(), lastmod_trust(ev, now=NOW), now=NOW, min_recall=1.0)
    assert strict["lastmod_age_days"].null_count() == strict.height


def test_planner_acts_on_hints() -> None:
    cands = pl.DataFrame(
        {
            "url": ["u1", "u2", "u3"],
            "host": ["h"] * 3,
            "status": ["active"] * 3,
            "last_fetched_at": [NOW - timedelta(hours=6)] * 3,
            "change_rate": [0.1] * 3,
            "hinted_change": [True, False, None],
        }
    )
    caps = pl.DataFrame({"host": ["h"], "capacity": [10]})
    plan = build_plan(cands, caps, now=NOW, budget=1)
    assert plan.filter("selected")["url"].to_list() == ["u1"]
    gain = dict(zip(plan["url"], plan["expected_gain"], strict=True))
    assert gain["u1"] == pytest.approx(1 / 0.1)  # certainly stale: the whole index
    assert gain["u2"] == 0.0
    assert 0 < gain["u3"] < gain["u1"]


def test_an_unchanged_hint_leaves_the_chance_its_host_missed_a_change() -> None:
    """Taken as certain, a trusted "unchanged" zeroed a page's gain, and a host that froze its
    lastmods after earning trust hid its changes for days: the wronged pages were never fetched,
    and only their fetches could lower the host's recall. By Bayes, an unchanged hint of a host
    with recall r leaves (1 - r) / ((1 - r) p + 1 - p) of the gain: little for a page the model
    gives even odds, most of it for one it is all but sure changed."""
    cands = pl.DataFrame(
        {
            "url": ["even", "even-unhinted", "sure", "strict"],
            "host": ["h"] * 4,
            "status": ["active"] * 4,
            "last_fetched_at": [NOW - timedelta(hours=6)] * 4,
            "change_rate": [2.77, 2.77, 40.0, 2.77],  # p = 0.5 over 6 hours, and 1 - e^-10
            "hinted_change": [False, None, False, False],
            "hint_recall": [0.95, None, 0.95, 1.0],
        }
    )
    caps = pl.DataFrame({"host": ["h"], "capacity": [10]})
    plan = build_plan(cands, caps, now=NOW, budget=4, config=PlanConfig(posterior_index=False))
    gain = dict(zip(plan["url"], plan["expected_gain"], strict=True))
    p = 1 - math.exp(-2.77 / 4)
    assert gain["even"] == pytest.approx(gain["even-unhinted"] * 0.05 / (0.05 * p + 1 - p))
    sure = build_plan(
        cands.with_columns(hinted_change=pl.lit(None, dtype=pl.Boolean)),
        caps,
        now=NOW,
        budget=4,
        config=PlanConfig(posterior_index=False),
    ).filter(pl.col("url") == "sure")["expected_gain"][0]
    assert gain["sure"] > 0.99 * sure  # all but sure of a change: the hint says little
    assert gain["strict"] == 0.0  # a host whose lastmod never missed a change


def test_a_listing_is_the_series_of_sitemap_files_a_page_was_listed_in() -> None:
    files = {
        "http://h.example/post-sitemap.xml": "/post-sitemap.xml",
        "https://h.example/post-sitemap2.xml": "/post-sitemap.xml",
        "http://h.example:8080/sitemap-2026-11.xml": "/sitemap--.xml",
        "http://h.example/sitemap_products_1.xml?from=1&to=99": "/sitemap_products_.xml",
        "http://h.example/feed/": "/feed/",
        "http://h.example/sitemaps/pages-1.xml.gz": "/sitemaps/pages-.xml",
        "http://h.example/sitemaps/pages-2.xml": "/sitemaps/pages-.xml",
    }
    got = pl.DataFrame({"f": [*files, None]}).select(listing_of(pl.col("f")))["f"].to_list()
    assert got == [*files.values(), None]


def _listed(file: str, rows: list[dict]) -> list[dict]:
    return [{**r, "listed_in": f"http://{r['host']}{file}"} for r in rows]


def test_each_series_of_sitemap_files_earns_trust_of_its_own() -> None:
    """A news site's home page carries a fixed lastmod while its article files date every
    edit: graded as one host, the home page's misses kept the articles' dates unused."""
    host = "news.example"
    front = _listed("/page-sitemap.xml", _history(host, "frozen"))
    posts = _listed("/post-sitemap.xml", _history(host, "accurate", n=25))
    posts += _listed("/post-sitemap3.xml", _history(host, "accurate", n=25))
    trust = lastmod_trust(_evidence(front, posts), now=NOW)
    figures = {r["listing"]: r for r in trust.iter_rows(named=True)}
    assert set(figures) == {None, "/page-sitemap.xml", "/post-sitemap.xml"}
    assert figures[None]["recall"] < 0.9  # the host as a whole hides changes
    assert figures["/post-sitemap.xml"]["trust"] > 0.9
    assert figures["/page-sitemap.xml"]["recall"] < 0.1
    assert {r["host_evidence"] for r in figures.values()} == {figures[None]["evidence"]}

    fetched = NOW - 2 * DAY
    pages = pl.DataFrame(
        {
            "url": [f"http://{host}/{p}" for p in ("old", "edited", "home", "tag", "seed")],
            "host": host,
            "lastmod": [NOW - 5 * DAY, NOW - DAY, NOW - 5 * DAY, NOW - 5 * DAY, NOW - 5 * DAY],
            "last_fetched_at": fetched,
            "listed_in": [
                f"http://{host}/post-sitemap4.xml",  # a new month's file of a trusted series
                f"http://{host}/post-sitemap.xml",
                f"http://{host}/page-sitemap.xml",
                f"http://{host}/post_tag-sitemap.xml",  # no evidence of its own: the host's
                None,
            ],
        },
        schema_overrides={
            "lastmod": pl.Datetime("us", "UTC"),
            "last_fetched_at": pl.Datetime("us", "UTC"),
        },
    )
    out = lastmod_hints(pages, trust, now=NOW)
    got = dict(zip(out["url"].str.split("/").list.last(), out["hinted_change"], strict=True))
    assert got == {"old": False, "edited": True, "home": None, "tag": None, "seed": None}
    ages = dict(zip(out["url"].str.split("/").list.last(), out["lastmod_age_days"], strict=True))
    assert ages["edited"] == pytest.approx(1.0)


def test_a_few_wrong_checks_of_a_series_outweigh_its_hosts_record() -> None:
    host = "good.example"
    posts = _listed("/post-sitemap.xml", _history(host, "accurate", n=40))
    feed = _listed("/feed/", _history(host, "frozen", n=4, start=NOW - 5 * DAY))
    trust = lastmod_trust(_evidence(posts, feed), now=NOW)
    figures = {r["listing"]: r for r in trust.iter_rows(named=True)}
    assert figures["/post-sitemap.xml"]["trust"] > 0.9
    # two of its four checks missed a change
    assert figures["/feed/"]["recall"] < 0.6
    with pytest.raises(ValueError):
        lastmod_trust(_evidence(posts), now=NOW, pooling=-1.0)


def test_a_moved_lastmod_below_the_precision_gate_is_weighed_not_ignored() -> None:
    """A shop whose lastmod moves on every change and on stock-count saves as well is right
    about a change two times in three: below the gate for taking it at its word, yet a moved
    lastmod there is twice as likely on a changed page as on a quiet one. Ignored, the
    sale's price changes went to fetches the model chose blind. A build-time stamp moves on
    every page alike and weighs nothing."""
    ev = _evidence(
        _history("noisy.example", "noisy"),
        _history("stamp.example", "build-time"),
        _history("good.example", "accurate"),
    )
    trust = {r["host"]: r for r in lastmod_trust(ev, now=NOW).iter_rows(named=True)}
    noisy = trust["noisy.example"]
    assert 0.6 < noisy["precision"] < 0.8 and noisy["recall"] > 0.9
    assert noisy["false_alarm"] == pytest.approx(0.5, abs=0.05)
    assert trust["stamp.example"]["false_alarm"] > 0.9
    assert trust["good.example"]["false_alarm"] < 0.1
    fetched = NOW - 2 * DAY
    pages = pl.DataFrame(
        {
            "url": ["noisy/moved", "noisy/still", "stamp/moved", "good/moved"],
            "host": ["noisy.example", "noisy.example", "stamp.example", "good.example"],
            "lastmod": [NOW - DAY, NOW - 5 * DAY, NOW - DAY, NOW - DAY],
            "last_fetched_at": [fetched] * 4,
        }
    )
    out = lastmod_hints(pages, lastmod_trust(ev, now=NOW), now=NOW)
    hinted = dict(zip(out["url"], out["hinted_change"], strict=True))
    likelihood = dict(zip(out["url"], out["hint_likelihood"], strict=True))
    assert hinted["noisy/moved"] is None  # not taken at its word ...
    assert likelihood["noisy/moved"] == pytest.approx(noisy["recall"] / noisy["false_alarm"])
    assert likelihood["noisy/moved"] > 1.7  # ... but weighed
    assert hinted["noisy/still"] is False and likelihood["noisy/still"] is None
    assert likelihood["stamp/moved"] == pytest.approx(1.0, abs=0.1)
    assert hinted["good/moved"] is True and likelihood["good/moved"] is None
    few = lastmod_hints(pages, lastmod_trust(ev, now=NOW), now=NOW, min_evidence=1e9)
    assert few["hint_likelihood"].null_count() == few.height


def test_the_planner_raises_a_gain_by_the_chance_a_moved_lastmod_adds() -> None:
    """By Bayes a moved lastmod with likelihood ratio L makes a change L / (L p + 1 - p) times
    as likely as the model's p: about L for a page the model thought quiet, nothing for one it
    was sure of; the capture objective's gain is that chance itself."""
    cands = pl.DataFrame(
        {
            "url": ["quiet-moved", "quiet", "sure-moved", "sure"],
            "host": ["h"] * 4,
            "status": ["active"] * 4,
            "last_fetched_at": [NOW - timedelta(hours=6)] * 4,
            "change_rate": [0.4, 0.4, 40.0, 40.0],  # p = 0.095 over 6 hours, and 1 - e^-10
            "hint_likelihood": [3.0, None, 3.0, None],
        }
    )
    caps = pl.DataFrame({"host": ["h"], "capacity": [10]})
    config = PlanConfig(posterior_index=False, objective="capture")
    plan = build_plan(cands, caps, now=NOW, budget=1, config=config)
    gain = dict(zip(plan["url"], plan["expected_gain"], strict=True))
    p = 1 - math.exp(-0.4 / 4)
    assert gain["quiet"] == pytest.approx(p)
    assert gain["quiet-moved"] == pytest.approx(3 * p / (3 * p + 1 - p))
    assert gain["sure-moved"] == pytest.approx(gain["sure"], rel=1e-3)
    fresh = build_plan(cands, caps, now=NOW, budget=1, config=PlanConfig(posterior_index=False))
    index = dict(zip(fresh["url"], fresh["expected_gain"], strict=True))
    assert index["quiet"] < index["quiet-moved"] < 1 / 0.4  # below a page known changed
    assert fresh.filter("selected")["url"].to_list() == ["quiet-moved"]
    odds = pl.DataFrame({"L": [None, 0.5, 2.0]}).select(
        changed_hint_odds(pl.col("L"), pl.lit(1.0), pl.lit(1.0))
    )
    assert odds.to_series().to_list()[:2] == [1.0, 1.0]  # no ratio, or one below 1: unchanged
