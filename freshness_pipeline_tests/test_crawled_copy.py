"""The crawled copy through the CLI against the synthetic web: every request in the WARC archive
(revisit records for 304s and identical bodies), fetch_log pointing at each record, and
page_versions and changes saying what the pages said and what changed."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from freshness_pipeline.science.fingerprint import content_fingerprint
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.archive import (
    FETCH_KIND_FIELD,
    PROFILE_IDENTICAL_PAYLOAD,
    PROFILE_SERVER_NOT_MODIFIED,
    ArchiveReader,
    archive_dir_for,
    iter_records,
)
from freshness_pipeline_tests.support import run_freshness

# Four cycles 8 hours apart, not five 6 hours apart: the same kinds of rows still come, on
# every site (304s, identical payloads, changes, some twice, a 304 after a change and a change
# after a 304), and the last cycle, a day after the first, fetches robots.txt again.
CYCLES = 4
STEP = timedelta(hours=8)
SITES = [
    SiteSpec("honest", "honest", 12),  # ETag and Last-Modified: 304s
    SiteSpec("novalid", "no_validators", 12),  # the same bytes again: identical payloads
    SiteSpec("volatile", "volatile", 12),  # new bytes every time, content mostly the same
]


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    world = build_world(
        11, start=DEFAULT_START, horizon_days=CYCLES * STEP / timedelta(days=1), sites=SITES
    )
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        seeds = web.seeds_csv(home / "seeds.csv", variants=False)
        assert run_freshness("seed", str(seeds), home=home).returncode == 0
        for i in range(CYCLES):
            now = DEFAULT_START + i * STEP
            web.set_now(now)
            done = run_freshness("cycle", "--now", now.isoformat(), home=home)
            assert done.returncode == 0, done.stderr
    return home


def sql(home: Path, query: str) -> pl.DataFrame:
    con = duckdb.connect(str(home / "freshness.duckdb"), read_only=True)
    try:
        return con.sql(query).pl()
    finally:
        con.close()


def test_the_archive_holds_only_complete_warc_files_that_warcio_reads(copy):
    archive = archive_dir_for(copy)
    files = sorted(archive.glob("*.warc.gz"))
    assert files and not list(archive.glob("*.open"))
    assert all(f.with_name(f.name.removesuffix(".warc.gz") + ".cdxj").exists() for f in files)
    records = [record for f in files for record in iter_records(f, payloads=False)]
    assert {"warcinfo", "request", "response", "revisit"} <= {r.record_type for r in records}
    # robots.txt and sitemap fetches are archived too, told apart from pages
    kinds = {r.header(FETCH_KIND_FIELD) for r in records if r.record_type == "response"}
    assert {"page", "robots", "sitemap"} <= kinds
    robots = [r for r in records if r.header(FETCH_KIND_FIELD) == "robots"]
    assert all((r.target_uri or "").endswith("/robots.txt") for r in robots)


def test_every_request_with_an_answer_points_at_its_record(copy):
    log = sql(
        copy,
        "SELECT url, fetched_at, http_status, outcome, fingerprint, warc_filename, warc_offset,"
        " warc_length, payload_digest FROM fetch_log",
    )
    answered = log.filter(pl.col("http_status").is_not_null())
    assert answered.height > 0 and answered["warc_filename"].is_not_null().all()
    reader = ArchiveReader(archive_dir_for(copy))
    profiles: dict[str, set[str]] = {}
    for row in answered.iter_rows(named=True):
        stored = reader.read_response(row["warc_filename"], row["warc_offset"], row["warc_length"])
        assert stored.url == row["url"]
        profiles.setdefault(row["outcome"], set()).add(stored.profile or stored.record_type)
        if row["outcome"] in ("new", "changed", "unchanged"):
            # the archived body is what the fingerprint was taken of
            body = stored.decoded_body()
            content_type = stored.header("Content-Type")
            assert content_fingerprint(body, content_type=content_type) == row["fingerprint"]
    assert profiles["not_modified"] == {PROFILE_SERVER_NOT_MODIFIED}
    assert PROFILE_IDENTICAL_PAYLOAD in profiles["unchanged"]  # the same bytes: no body again
    assert profiles["new"] == {"response"}


def test_page_versions_keep_every_new_and_changed_version_with_its_text(copy):
    versions = sql(copy, "SELECT * FROM page_versions")
    log = sql(copy, "SELECT url, fetched_at, outcome FROM fetch_log")
    kept = log.filter(pl.col("outcome").is_in(["new", "changed"]))
    assert versions.height == kept.height > 0
    assert set(versions["outcome"]) <= {"new", "changed"}
    assert versions["text"].is_not_null().all() and (versions["text"].str.len_chars() > 0).all()
    assert versions["warc_filename"].is_not_null().all()
    names = {name for text in versions["fields"] for name in json.loads(text)}
    assert names == {"title", "text"}  # the default fields


def test_changes_say_what_differs_from_the_version_before(copy):
    changes = sql(copy, "SELECT * FROM changes")
    changed = sql(copy, "SELECT url, observed_at FROM page_versions WHERE outcome = 'changed'")
    assert changes.height == changed.height > 0
    assert (changes["previous_observed_at"] < changes["changed_at"]).all()
    assert changes["changed_fields"].list.len().min() >= 1
    assert (changes["text_lines_added"] + changes["text_lines_removed"] > 0).any()
    state = sql(copy, "SELECT url, last_changed_at, version_observed_at FROM url_state")
    newest = changes.group_by("url").agg(pl.col("changed_at").max())
    joined = newest.join(state, on="url")
    assert (joined["changed_at"] == joined["version_observed_at"]).all()
