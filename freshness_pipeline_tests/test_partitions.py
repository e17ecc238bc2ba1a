from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from freshness_pipeline.defs.partitions import contiguous_ranges, register_hosts, registered_hosts


def test_contiguous_ranges_cover_exactly_the_wanted_hosts():
    hosts = ["h1", "h2", "h3", "h4", "h5"]
    assert contiguous_ranges(hosts, hosts) == [("h1", "h5")]
    assert contiguous_ranges(hosts, ["h1", "h3", "h4"]) == [("h1", "h1"), ("h3", "h4")]
    assert contiguous_ranges(hosts, []) == []


def test_register_hosts_is_idempotent_and_keeps_order():
    instance = dg.DagsterInstance.ephemeral()
    assert register_hosts(instance, ["b.example", "a.example"]) == ["a.example", "b.example"]
    assert register_hosts(instance, ["a.example", "c.example"]) == ["c.example"]
    assert registered_hosts(instance) == ["a.example", "b.example", "c.example"]


def test_host_files_written_over_threads_are_every_hosts_and_refuse_strangers(tmp_path):
    import polars as pl
    import pytest

    from freshness_pipeline.warehouse.storage import WRITERS, Warehouse

    wh = Warehouse(tmp_path)
    hosts = [f"h{i:03d}.example" for i in range(5 * WRITERS)]
    rows = pl.DataFrame(
        {"url": [f"https://{h}/{k}" for h in hosts[1:] for k in range(3)]}
    ).with_columns(host=pl.col("url").str.split("/").list.get(2))
    assert wh.write_partitions("seeds", hosts, rows) == len(hosts)
    assert wh.read("seeds").sort("url")["url"].to_list() == sorted(rows["url"].to_list())
    assert wh.has_partition("seeds", hosts[0])  # no rows: a 0-row file, the run's answer
    stranger = pl.DataFrame({"url": ["https://x.example/"], "host": ["x.example"]})
    with pytest.raises(ValueError, match="rows for hosts outside the run"):
        wh.write_partitions("seeds", hosts, pl.concat([rows, stranger]))
    # a history table, appended per host and cycle over the same threads
    fetched = datetime(2026, 3, 2, tzinfo=UTC)
    log = rows.select("url", "host", pl.lit(fetched).alias("fetched_at"))
    assert wh.write_partitions("fetch_log", hosts, log) == len(hosts) - 1
    assert sorted(wh.read("fetch_log")["url"].to_list()) == sorted(rows["url"].to_list())


def test_replacing_many_host_files_frees_the_old_ones_and_leaves_no_temp_names(tmp_path):
    """The old files of a many-host replace are freed behind the writer: after the wait, each
    host holds only its new file; a kill's leftover old name is swept as a temp file."""
    import polars as pl

    from freshness_pipeline.warehouse.storage import WRITERS, Warehouse, wait_for_freed_files

    wh = Warehouse(tmp_path)
    hosts = [f"h{i:03d}.example" for i in range(3 * WRITERS)]

    def rows(tag: str) -> pl.DataFrame:
        return pl.DataFrame({"url": [f"https://{h}/{tag}" for h in hosts], "host": hosts})

    wh.write_partitions("seeds", hosts, rows("old"))
    wh.write_partitions("seeds", hosts, rows("new"))
    assert sorted(wh.read("seeds")["url"]) == sorted(rows("new")["url"])
    wait_for_freed_files()
    names = sorted(p.name for p in (tmp_path / "warehouse" / "seeds").glob("host=*/*"))
    assert names == ["data.parquet"] * len(hosts)
    # what a kill between the second name and the free leaves: swept, the table untouched
    folder = wh.partition_file("seeds", hosts[0]).parent
    (folder / "data.parquet.tmp-old-deadbeef").write_bytes(b"stale")
    assert wh.sweep_temp_files() == 1
    assert sorted(wh.read("seeds")["url"]) == sorted(rows("new")["url"])
