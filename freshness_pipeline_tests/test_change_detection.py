"""Change detection on real pages served as live sites serve them, and what a fingerprint
version bump does to the next cycle.

The real pages are newspaper4k's test fixtures, fetched into a cache (``real_pages.py``); the
tests that need them skip, saying how to fetch them, when they are absent. Every page is
fetched many times with fresh volatile noise on each response and content edits between some
(``page_mutations.py``): an unchanged fetch with another fingerprint is a false change, an
edited one with the same fingerprint a missed change. ``benchmarks/change_detection.py`` runs
the same with more fetches and writes docs/change_detection.md.
"""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta

import lxml.html
import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.science.fingerprint import FINGERPRINT_VERSION, content_fingerprint
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests import page_mutations, real_pages

FETCHES_PER_PAGE = 16  # a baseline, then 10 unchanged fetches and one edit of each kind


def _fingerprint(body: bytes) -> str:
    return content_fingerprint(body, content_type="text/html")


@pytest.fixture(scope="module")
def pages() -> list[real_pages.RealPage]:
    reason = real_pages.missing_reason()
    if reason is not None:
        pytest.skip(reason)
    return real_pages.load()


def _rates(pages: list[real_pages.RealPage], *, semantic: bool) -> page_mutations.Score:
    total = page_mutations.Score()
    for i, page in enumerate(pages):
        html = page.html if semantic else page_mutations.without_semantics(page.html)
        total.add(
            page_mutations.score_page(
                _fingerprint, html, page.article_text, seed=500 + i, count=FETCHES_PER_PAGE
            )
        )
    return total


@pytest.mark.parametrize("semantic", [True, False], ids=["as_served", "no_semantic_markup"])
def test_false_and_missed_change_rates_on_real_pages(pages, semantic: bool) -> None:
    score = _rates(pages, semantic=semantic)
    assert score.unchanged == 10 * len(pages) and score.edited == 5 * len(pages)
    assert score.false_change_rate <= 0.02, score
    assert score.missed_change_rate <= 0.02, score


def test_the_served_noise_changes_every_response_and_the_edits_change_the_text(pages) -> None:
    """The measurement above could pass by serving identical bytes: it does not."""
    page = next(p for p in pages if p.article_text)
    stream = list(page_mutations.fetches(page.html, page.article_text, seed=7, count=7))
    digests = [hashlib.sha256(f.body).hexdigest() for f in stream]
    assert len(set(digests)) == len(digests)
    texts = []
    for fetch in stream:
        root = lxml.html.document_fromstring(fetch.body)
        texts.append(root.text_content())
    assert [f.edit for f in stream] == [None, None, None, "sentence", None, None, "paragraph_added"]
    raw_false = page_mutations.score([hashlib.sha256(f.body).hexdigest() for f in stream], stream)
    assert raw_false.false_changes == raw_false.unchanged  # a digest of the bytes fails
    for kind in page_mutations.VOLATILE_KINDS:
        only = list(
            page_mutations.fetches(
                page.html, page.article_text, seed=3, count=3, volatile=(kind,), edit_kinds=()
            )
        )
        assert only[1].body != only[2].body, kind


def test_every_edit_of_a_number_in_the_text_is_seen(pages) -> None:
    """Prices, counts and the page's own numbers (not years, dates or times), one digit
    changed per fetch: each is a changed fingerprint."""
    score = page_mutations.Score()
    for i, page in enumerate(pages):
        score.add(
            page_mutations.score_page(
                _fingerprint,
                page.html,
                page.article_text,
                seed=100 + i,
                count=5,
                edits_every=1,
                volatile=(),
                edit_kinds=("number",),
            )
        )
    assert score.edited == 4 * len(pages)
    assert score.missed_changes == 0, score


# ------------------------------------------------------------------- a fingerprint version bump


def test_a_fingerprint_version_bump_re_extracts_instead_of_reporting_changes(tmp_path) -> None:
    """url_state written by the previous extractor (another FINGERPRINT_VERSION, so other
    fingerprints for the same pages): the next cycle compares each body with its archived
    body read again under the current extractor, so it reports exactly the changes a crawl
    that never changed extractor reports ('untouched'), not a wave of 'changed'; its
    unchanged pages are re-extractions ('new'). The control
    keeps the version and the same foreign fingerprints, and every body is then 'changed'."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    world = build_world(
        11, start=DEFAULT_START, horizon_days=1, sites=[SiteSpec("plain", "no_validators", 10)]
    )
    t1 = DEFAULT_START + timedelta(hours=6)
    outcomes: dict[str, dict[str, str]] = {}
    for label, stored_version in (
        ("bumped", FINGERPRINT_VERSION - 1),
        ("control", None),
        ("untouched", FINGERPRINT_VERSION),
    ):
        home = tmp_path / label
        with SyntheticWeb(world) as web:
            web.set_now(DEFAULT_START)
            seeds = web.seeds_csv(tmp_path / f"{label}.csv", variants=False).read_bytes()
            load_seeds(home, seeds, added_at=DEFAULT_START)
            run_cycle(home, DEFAULT_START)
            wh = Warehouse(home)
            state = wh.read("url_state")
            fetched = state.filter(pl.col("fingerprint").is_not_null())
            assert fetched.height > 0
            assert set(fetched["fingerprint_version"].to_list()) == {FINGERPRINT_VERSION}
            # what the previous release stored: its own fingerprints, its own version
            old = state.with_columns(
                fingerprint=pl.when(pl.col("fingerprint").is_not_null()).then(
                    pl.col("fingerprint").str.reverse()
                ),
                fingerprint_version=pl.when(pl.col("fingerprint").is_not_null())
                .then(pl.lit(stored_version or FINGERPRINT_VERSION, dtype=pl.Int64))
                .otherwise(pl.col("fingerprint_version")),
                # the control without its archived original: identical bytes are 'unchanged'
                # without extraction whatever fingerprint the state holds (the bumped state
                # keeps it: a version bump must re-extract even identical bytes)
                archived=pl.col("archived") if stored_version else pl.lit(None, dtype=pl.String),
            )
            if label != "untouched":
                wh.write_partitions("url_state", old["host"].unique().to_list(), old)
            web.set_now(t1)
            run_cycle(home, t1)
            log = wh.read("fetch_log").filter(
                (pl.col("fetched_at") == t1)
                & pl.col("url").is_in(fetched["url"].implode())
                & (pl.col("http_status") == 200)
            )
            assert log.height > 0
            paths = log["url"].str.replace(r"^https?://[^/]+", "")  # each web has its port
            outcomes[label] = dict(zip(paths, log["outcome"], strict=True))
            assert set(log["fingerprint_version"].to_list()) == {FINGERPRINT_VERSION}
            after = wh.read("url_state").filter(pl.col("url").is_in(log["url"].implode()))
            assert set(after["fingerprint_version"].to_list()) == {FINGERPRINT_VERSION}
    assert set(outcomes["control"].values()) == {"changed"}
    assert {"changed", "unchanged"} <= set(outcomes["untouched"].values())
    # the same pages under the same answers (the web is the same in each run): a change is
    # a change, and an unchanged page is a re-extraction ('new')
    same = {"unchanged": "new", "not_modified": "new"}
    assert outcomes["bumped"] == {p: same.get(o, o) for p, o in outcomes["untouched"].items()}
