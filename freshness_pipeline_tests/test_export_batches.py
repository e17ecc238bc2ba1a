"""`freshness export` a group of hosts at a time (app/export.py, _Window): whatever the grouping,
the same rows come out, one per URL of the window (its newest, a re-extraction over a row of the
same time, only a tombstone for a URL gone in the window), in every format. A hand-written home
through the warehouse's own writer, so every answer is known."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from freshness_pipeline.app import export as copy_export
from freshness_pipeline.app.export import export
from freshness_pipeline.synthweb import DEFAULT_START
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse

S = DEFAULT_START
HOUR = timedelta(hours=1)
HOSTS = [f"h{i}.example" for i in range(5)]


def _home(path: Path) -> Warehouse:
    wh = Warehouse(path)
    rows = []
    for h, host in enumerate(HOSTS):
        for page in range(3):
            url = f"https://{host}/p/{page}"
            for k in range(3):  # observed at 0, 6 and 12 hours
                rows.append(
                    {
                        "url": url,
                        "host": host,
                        "observed_at": S + 6 * k * HOUR,
                        "outcome": "new" if k == 0 else "changed",
                        "title": f"{url} v{k}",
                        "text": f"line {k}\nof {url}",
                        "fields": json.dumps({"title": f"{url} v{k}", "n": k}),
                        "fingerprint": f"{h}-{page}-{k}",
                    }
                )
        # an older home's re-extraction at the time of the row it re-read
        rows.append({**rows[-1], "outcome": "reextracted", "fingerprint": f"{h}-re"})
    versions = pl.DataFrame(rows, schema_overrides={"observed_at": tables.UTC_TIME})
    wh.write_partitions("page_versions", HOSTS, versions)
    state = (
        versions.group_by("url", "host")
        .agg(pl.col("observed_at").max().alias("last_seen_at"))
        .with_columns(
            gone=pl.col("url").str.ends_with("/p/0") & pl.col("host").is_in(HOSTS[:2]),
        )
        .with_columns(
            status=pl.when("gone").then(pl.lit("gone")).otherwise(pl.lit("active")),
            gone_at=pl.when("gone").then(pl.col("last_seen_at") + HOUR),
        )
    )
    wh.write_partitions("url_state", HOSTS, state)
    # the requests behind it, which tombstones are read from: each version's fetch, then the
    # gone pages' 410 an hour after their last version
    answers = pl.concat(
        [
            versions.filter(pl.col("outcome") != "reextracted").select(
                "url", "host", pl.col("observed_at").alias("fetched_at"), "outcome"
            ),
            state.filter("gone").select(
                "url",
                "host",
                pl.col("gone_at").alias("fetched_at"),
                pl.lit("gone").alias("outcome"),
            ),
        ]
    )
    wh.write_partitions("fetch_log", HOSTS, answers)
    return wh


def _export(wh: Warehouse, fmt: str, since=S, until=None) -> bytes:
    sink = io.BytesIO()
    export(wh, since, until, fmt, stream=sink)
    return sink.getvalue()


def _rows(data: bytes, fmt: str) -> list[dict]:
    if fmt == "jsonl":
        return sorted((json.loads(line) for line in data.decode().splitlines()), key=str)
    if fmt == "csv":
        frame = pl.read_csv(io.BytesIO(data), infer_schema=False)
    else:
        frame = pl.read_parquet(io.BytesIO(data)).with_columns(pl.all().cast(pl.String))
    return sorted(frame.to_dicts(), key=str)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_every_grouping_of_hosts_exports_the_same_rows(tmp_path, monkeypatch, fmt):
    wh = _home(tmp_path / "home")
    whole = _rows(_export(wh, fmt), fmt)
    monkeypatch.setattr(copy_export, "EXPORT_BATCH_BYTES", 1)  # every host a group of its own
    assert _rows(_export(wh, fmt), fmt) == whole
    monkeypatch.setattr(copy_export, "EXPORT_ROW_GROUP", 2)  # and a batch of two rows at a time
    assert _rows(_export(wh, fmt), fmt) == whole


def test_one_row_per_url_the_newest_reading_or_the_tombstone(tmp_path, monkeypatch):
    wh = _home(tmp_path / "home")
    monkeypatch.setattr(copy_export, "EXPORT_BATCH_BYTES", 1)
    rows = _rows(_export(wh, "jsonl"), "jsonl")
    by_url = {r["url"]: r for r in rows}
    assert len(by_url) == len(rows) == len(HOSTS) * 3
    for url, row in by_url.items():
        if url.endswith("/p/0") and any(h in url for h in HOSTS[:2]):
            assert row == {"url": url, "status": "gone", "gone_at": "2025-01-06T13:00:00Z"}
        elif url.endswith("/p/2"):  # the re-extraction of its 12-hour row wins the tie
            assert row["outcome"] == "reextracted" and row["observed_at"] == "2025-01-06T12:00:00Z"
        else:
            assert row["outcome"] == "changed" and row["observed_at"] == "2025-01-06T12:00:00Z"
            assert row["fields"] == {"title": f"{url} v2", "n": 2}
    # a window before the last cycle: the newest row in it, and nobody gone yet
    earlier = _rows(_export(wh, "jsonl", until=S + 7 * HOUR), "jsonl")
    assert {r["observed_at"] for r in earlier} == {"2025-01-06T06:00:00Z"}
    assert len(earlier) == len(HOSTS) * 3


def test_a_window_without_rows_writes_only_what_a_reader_expects(tmp_path):
    wh = _home(tmp_path / "home")
    later = S + 30 * HOUR
    assert _export(wh, "jsonl", since=later) == b""
    assert _export(wh, "csv", since=later).decode().splitlines() == [
        "url,observed_at,outcome,title,text,fields,fingerprint,status,gone_at"
    ]
    frame = pl.read_parquet(io.BytesIO(_export(wh, "parquet", since=later)))
    assert frame.height == 0 and frame.columns[-2:] == ["status", "gone_at"]


def test_a_page_gone_before_the_window_is_not_tombstoned_again_after_its_answers_were_pruned(
    tmp_path,
):
    """A confirmed gone page is checked again every 30 days; with ``--retention-days`` under
    that, the answers that said it went are pruned from fetch_log by the next check, whose
    gone answer made a second tombstone a month late. url_state still knows when the spell
    began."""
    wh = Warehouse(tmp_path / "home")
    host, url = "h.example", "https://h.example/gone"
    went, recheck = S + 6 * HOUR, S + timedelta(days=31)
    wh.write_partitions(
        "url_state",
        [host],
        pl.DataFrame(
            {"url": [url], "host": [host], "status": ["gone"], "gone_at": [went]},
            schema_overrides={"gone_at": tables.UTC_TIME},
        ),
    )
    wh.write_partitions(
        "fetch_log",
        [host],
        pl.DataFrame(  # the month's recheck; the answers before it were pruned
            {"url": [url], "host": [host], "fetched_at": [recheck], "outcome": ["gone"]},
            schema_overrides={"fetched_at": tables.UTC_TIME},
        ),
    )
    assert _rows(_export(wh, "jsonl", since=S + timedelta(days=2)), "jsonl") == []
    # the window it went in still has its tombstone where fetch_log kept that answer
    wh.write_partitions(
        "fetch_log",
        [host],
        pl.DataFrame(
            {"url": [url], "host": [host], "fetched_at": [went], "outcome": ["gone"]},
            schema_overrides={"fetched_at": tables.UTC_TIME},
        ),
    )
    (tombstone,) = _rows(_export(wh, "jsonl", since=S, until=S + HOUR * 12), "jsonl")
    assert (tombstone["url"], tombstone["status"]) == (url, "gone")
    assert tombstone["gone_at"].startswith(went.strftime("%Y-%m-%dT%H:%M"))


def test_a_page_that_went_gone_in_the_window_stays_tombstoned_after_its_answers_were_pruned(
    tmp_path,
):
    """``--retention-days`` prunes fetch_log, where tombstones are read from: a page gone since
    a time in the window lost its tombstone and its last version came out as live (found by an
    outside audit). url_state still knows when the page went."""
    wh = _home(tmp_path / "home")
    gone = {f"https://{host}/p/0" for host in HOSTS[:2]}
    before = {r["url"]: r for r in _rows(_export(wh, "jsonl"), "jsonl") if r["url"] in gone}
    assert {r["status"] for r in before.values()} == {"gone"}
    # the cycles that said these pages went pruned (--retention-days), the others kept
    log = pl.read_parquet(wh.files("fetch_log"))
    for path in wh.files("fetch_log"):
        path.unlink()
    wh.write_partitions("fetch_log", HOSTS, log.filter(pl.col("outcome") != "gone"))
    assert not pl.read_parquet(wh.files("fetch_log"))["outcome"].is_in(["gone"]).any()
    after = {r["url"]: r for r in _rows(_export(wh, "jsonl"), "jsonl") if r["url"] in gone}
    assert after == before
    # a window that ends before the page went hands out its version, as before
    (version,) = [
        r
        for r in _rows(_export(wh, "jsonl", until=S + 13 * HOUR), "jsonl")
        if r["url"] == f"https://{HOSTS[0]}/p/0"
    ]
    assert version.get("status") != "gone"
