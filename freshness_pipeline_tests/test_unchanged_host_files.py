"""A host file that already holds the rows a write would put there is left in place
(warehouse.host_parts): what it holds is decided by the digest in its own footer, never by a
record beside it, so a changed row, a reordered row, a file without a digest and a file that
is not Parquet are all written anew."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.host_parts import DIGEST_KEY, content_digests, stored_digest
from freshness_pipeline.warehouse.last_write import LAST_WRITE
from freshness_pipeline.warehouse.storage import Warehouse

HOSTS = ["a.example", "b.example", "c.example"]


def rows(urls: dict[str, list[str]], status: str = "new") -> pl.DataFrame:
    return pl.DataFrame(
        {
            "url": [u for host in urls for u in urls[host]],
            "host": [host for host in urls for _ in urls[host]],
            "status": status,
        }
    )


def inodes(wh: Warehouse, table: str) -> dict[str, int]:
    return {host: os.stat(wh.partition_file(table, host)).st_ino for host in HOSTS}


def on_disk(wh: Warehouse, table: str) -> pl.DataFrame:
    LAST_WRITE.forget(str(wh.root), {table})
    return wh.read(table, HOSTS).select("url", "host", "status")


def test_a_write_of_the_same_rows_leaves_every_file_in_place(tmp_path):
    wh = Warehouse(tmp_path)
    first = rows({"a.example": ["http://a.example/1", "http://a.example/2"], "b.example": []})
    wh.write_partitions("url_state", HOSTS, first)
    before = inodes(wh, "url_state")
    wh.write_partitions("url_state", HOSTS, first)
    assert inodes(wh, "url_state") == before
    assert on_disk(wh, "url_state").equals(
        tables.conform("url_state", first).select("url", "host", "status")
    )


def test_only_the_hosts_whose_rows_moved_are_written(tmp_path):
    wh = Warehouse(tmp_path)
    urls = {
        "a.example": ["http://a.example/1", "http://a.example/2"],
        "b.example": ["http://b.example/1"],
    }
    wh.write_partitions("url_state", HOSTS, rows(urls))
    before = inodes(wh, "url_state")
    # a: the same rows in another order; b: one value changed; c: still no rows
    moved = {
        "a.example": ["http://a.example/2", "http://a.example/1"],
        "b.example": ["http://b.example/1"],
    }
    second = rows(moved).with_columns(
        status=pl.when(pl.col("host") == "b.example").then(pl.lit("active")).otherwise("status")
    )
    wh.write_partitions("url_state", HOSTS, second)
    after = inodes(wh, "url_state")
    assert after["a.example"] != before["a.example"]  # order is content: the file's rows move
    assert after["b.example"] != before["b.example"]
    assert after["c.example"] == before["c.example"]
    assert on_disk(wh, "url_state").equals(
        tables.conform("url_state", second).select("url", "host", "status")
    )
    # the read straight after a write with a file left in place is still the rows written
    assert (
        wh.read("url_state", HOSTS)
        .select("url", "host", "status")
        .equals(tables.conform("url_state", second).select("url", "host", "status"))
    )


def test_a_file_with_no_digest_or_no_parquet_is_written_anew(tmp_path):
    wh = Warehouse(tmp_path)
    frame = rows({"a.example": ["http://a.example/1"], "b.example": ["http://b.example/1"]})
    # files as an older release or a single-host write left them: the same rows, no digest
    for host in ("a.example", "b.example"):
        wh.write_partition("url_state", host, frame.filter(pl.col("host") == host))
    wh.write_partition("url_state", "c.example", frame.clear())
    garbage = wh.partition_file("url_state", "b.example")
    garbage.write_bytes(b"PAR1 this is not a parquet file")
    assert stored_digest(wh.partition_file("url_state", "a.example")) is None
    assert stored_digest(garbage) is None
    assert stored_digest(Path(tmp_path) / "nowhere.parquet") is None
    before = inodes(wh, "url_state")
    wh.write_partitions("url_state", HOSTS, frame)
    after = inodes(wh, "url_state")
    assert all(after[h] != before[h] for h in HOSTS)
    digests = content_digests(tables.conform("url_state", frame), HOSTS)
    for host in HOSTS:
        footer = pl.read_parquet_metadata(wh.partition_file("url_state", host))
        assert footer[DIGEST_KEY] == digests[host]
    assert on_disk(wh, "url_state").height == 2


def test_the_digest_tells_rows_schema_and_hosts_apart():
    base = pl.DataFrame({"url": ["u1", "u2"], "host": ["a", "a"], "n": [1, 2]})
    same = content_digests(base, ["a", "b"])
    assert same == content_digests(base.clone(), ["a", "b"])
    assert same["a"] != same["b"]  # rows against none
    assert content_digests(base.reverse(), ["a"])["a"] != same["a"]
    assert content_digests(base.with_columns(n=pl.Series([1, 3])), ["a"])["a"] != same["a"]
    assert content_digests(base.with_columns(pl.col("n").cast(pl.Float64)), ["a"])["a"] != same["a"]
    assert content_digests(base.with_columns(m=pl.lit(None)), ["a"])["a"] != same["a"]
    nulls = pl.DataFrame(
        {"url": ["u1"], "host": ["a"], "s": [None]}, schema_overrides={"s": pl.String}
    )
    empty = pl.DataFrame({"url": ["u1"], "host": ["a"], "s": [""]})
    assert content_digests(nulls, ["a"])["a"] != content_digests(empty, ["a"])["a"]
    lists = pl.DataFrame({"url": ["u1"], "host": ["a"], "x": [[1, 2]]})
    joined = pl.DataFrame({"url": ["u1"], "host": ["a"], "x": [[12]]})
    assert content_digests(lists, ["a"])["a"] != content_digests(joined, ["a"])["a"]
