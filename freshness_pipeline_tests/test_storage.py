from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone

import duckdb
import polars as pl
import pytest

from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.last_write import LAST_WRITE
from freshness_pipeline.warehouse.layout import escape_host_key
from freshness_pipeline.warehouse.storage import Warehouse, resolve_home

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def state_rows(host: str, n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {"url": [f"http://{host}/{i}" for i in range(n)], "host": host, "status": "new"}
    )


@pytest.mark.parametrize(
    "host",
    ["..", ".", "a/../../b", "a\\b", "x\x00y", "%2E%2E", "", "h" * 5000, "[::1]:8080", "/etc"],
)
def test_escaped_host_keys_stay_in_their_folder(tmp_path, host):
    wh = Warehouse(tmp_path)
    key = escape_host_key(host)
    assert "/" not in key and "\\" not in key and "\x00" not in key
    assert key not in (".", "..") and not key.startswith(".")
    assert len(f"host={key}".encode()) <= 255  # one folder name
    path = wh.partition_file("url_state", host).resolve()
    assert path.parent.parent == (tmp_path / "warehouse" / "url_state").resolve()


def test_distinct_hosts_get_distinct_keys():
    hosts = ["a.example", "A.example:80", "a.example:8080", "a%2Fb", "a/b", "h" * 300, "h" * 301]
    keys = {escape_host_key(h.lower()) for h in hosts}
    assert len(keys) == len({h.lower() for h in hosts})


def test_the_views_show_long_host_keys_whole(tmp_path):
    """The views take ``host`` from the folder name (hive partitioning), so a valid host key
    must never be cut or escaped on its way there."""
    label = "a" * 63
    hosts = [f"{label}.{label}.{label}.{'b' * 58}", f"{label}.{label}.{label}.{'c' * 53}:8080"]
    assert [len(h) for h in hosts] == [250, 250]
    wh = Warehouse(tmp_path)
    for host in hosts:
        wh.write_partitions("url_state", [host], state_rows(host, 1))
    wh.ensure_views()
    assert sorted(wh.query("SELECT DISTINCT host FROM url_state")["host"]) == sorted(hosts)


def test_a_read_takes_each_asked_hosts_file_and_nothing_else(tmp_path):
    """Hosts are found by their folder: a host without one, one whose folder holds only a
    killed writer's temp file, and one not asked for are all left out; a history table reads
    every cycle file of a host's folder."""
    wh = Warehouse(tmp_path)
    for host in ("a.example", "b.example:8080", "[::1]:81"):
        wh.write_partitions("url_state", [host], state_rows(host, 2))
    stray = wh.partition_dir("url_state", "c.example")
    stray.mkdir(parents=True)
    (stray / "data.parquet.tmp-0123").write_bytes(b"half a file")
    asked = ["[::1]:81", "c.example", "d.example", "a.example"]
    got = wh.read("url_state", asked, columns=["host"])
    assert sorted(set(got["host"])) == ["[::1]:81", "a.example"]
    assert got.height == 4
    for hours in (0, 6):
        wh.append_fetch_log(
            "a.example",
            NOW + timedelta(hours=hours),
            pl.DataFrame({"url": ["http://a.example/0"], "host": "a.example"}),
        )
    assert wh.read("fetch_log", ["a.example", "b.example:8080"]).height == 2
    assert [
        f.name for f in wh.files("fetch_log", ["a.example"], since=NOW + timedelta(hours=1))
    ] == [f"cycle-{(NOW + timedelta(hours=6)).strftime('%Y%m%dT%H%M%S%fZ')}.parquet"]


def test_a_table_read_back_after_its_write_is_what_the_files_hold(tmp_path):
    """The frame a write leaves for the next read gives exactly what reading the files gives:
    the same rows in the same order (host by host in the order asked, each host's rows as
    written), the same schema, any subset of hosts and columns; and a file replaced since, by
    this process or another, is read from disk."""
    wh = Warehouse(tmp_path)
    hosts = ["b.example", "a.example:8080", "[::1]:81", "c.example"]  # c.example: no rows
    rows = pl.DataFrame(
        {
            "url": [f"http://{h}/{i}" for i in range(9) for h in hosts[:3]],
            "host": [h for _ in range(9) for h in hosts[:3]],
            "status": "active",
            "obs_interval_days": [[0.5 * i, 1.0] for i in range(27)],
            "change_rate": [None if i % 4 else 0.1 * i for i in range(27)],
        }
    )
    wh.write_partitions("url_state", hosts, rows)

    def from_disk(asked, columns=None):
        LAST_WRITE.forget(str(wh.root), {"url_state"})
        try:
            return wh.read("url_state", asked, columns=columns)
        finally:
            wh.write_partitions("url_state", hosts, rows)  # remembered again

    for asked, columns in [
        (hosts, None),
        (list(reversed(hosts)), None),
        (["[::1]:81", "b.example"], ["url", "obs_interval_days"]),
        (["c.example"], None),
    ]:
        kept = wh.read("url_state", asked, columns=columns)
        assert LAST_WRITE.recall(str(wh.root), "url_state", asked) is not None
        disk = from_disk(asked, columns)
        assert kept.schema == disk.schema
        assert kept.equals(disk, null_equal=True), asked
    with pytest.raises(KeyError):
        wh.read("url_state", hosts, columns=["no_such_column"])
    # a host the write did not cover is read from disk, and so is every host with it
    assert LAST_WRITE.recall(str(wh.root), "url_state", [*hosts, "d.example"]) is None

    # another process replaces one host's file: the read sees the new file
    script = (
        "import sys, polars as pl\n"
        "from freshness_pipeline.warehouse.storage import Warehouse\n"
        "Warehouse(sys.argv[1]).write_partition('url_state', 'b.example', "
        "pl.DataFrame({'url': ['http://b.example/new'], 'host': ['b.example']}))\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)
    after = wh.read("url_state", hosts, columns=["url"])
    assert "http://b.example/new" in after["url"].to_list()
    assert "http://b.example/0" not in after["url"].to_list()
    # and a write in this process of the same table drops what it kept
    wh.write_partitions("url_state", hosts, rows)
    wh.write_partition("url_state", "a.example:8080", state_rows("a.example:8080", 1))
    assert LAST_WRITE.recall(str(wh.root), "url_state", hosts) is None
    assert wh.read("url_state", ["a.example:8080"]).height == 1


def test_a_cycle_keeps_the_whole_fetch_log_unless_asked_to_prune(tmp_path, monkeypatch):
    from freshness_pipeline.app.runner import load_seeds, run_cycle

    monkeypatch.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    # a closed loopback port: robots.txt is unreachable, so the cycle fetches no page
    load_seeds(tmp_path, b"url\nhttp://127.0.0.1:9/a\n", added_at=NOW)
    wh = Warehouse(tmp_path)
    old = NOW.replace(year=2023)
    rows = pl.DataFrame({"url": ["http://127.0.0.1:9/a"], "host": "127.0.0.1:9"})
    wh.append_fetch_log("127.0.0.1:9", old, rows.with_columns(fetched_at=pl.lit(old)))
    run_cycle(tmp_path, NOW)
    assert wh.read("fetch_log")["fetched_at"].to_list() == [old]  # append-only history
    run_cycle(tmp_path, NOW.replace(hour=18), retention_days=365)
    assert wh.read("fetch_log").filter(pl.col("fetched_at") == old).is_empty()


def test_home_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setenv("FRESHNESS_HOME", str(tmp_path / "env"))
    assert resolve_home(tmp_path / "flag") == (tmp_path / "flag").resolve()
    assert resolve_home(None) == (tmp_path / "env").resolve()
    monkeypatch.delenv("FRESHNESS_HOME")
    monkeypatch.chdir(tmp_path)
    assert resolve_home(None) == (tmp_path / "data").resolve()


def test_write_read_roundtrip_and_empty_hosts_get_empty_files(tmp_path):
    wh = Warehouse(tmp_path)
    wh.write_partitions("url_state", ["a.example", "b.example"], state_rows("a.example", 3))
    assert wh.read("url_state", ["a.example"]).height == 3
    assert wh.read("url_state", ["b.example"]).height == 0
    assert wh.partition_file("url_state", "b.example").exists()
    assert wh.read("url_state").schema == pl.Schema(tables.URL_STATE)


def test_rows_for_hosts_outside_the_run_are_refused(tmp_path):
    with pytest.raises(ValueError, match="outside the run"):
        Warehouse(tmp_path).write_partitions("url_state", ["b.example"], state_rows("a.example", 1))


def test_failed_write_leaves_previous_file_and_no_temp(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path)
    wh.write_partition("url_state", "a.example", state_rows("a.example", 2))

    def broken(self, path, **kwargs):
        with open(path, "wb") as handle:
            handle.write(b"PAR1 half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", broken)
    with pytest.raises(OSError, match="No space"):
        wh.write_partition("url_state", "a.example", state_rows("a.example", 5))
    monkeypatch.undo()
    folder = wh.partition_dir("url_state", "a.example")
    assert os.listdir(folder) == ["data.parquet"]
    assert wh.read("url_state", ["a.example"]).height == 2


def test_fetch_log_rerun_of_a_cycle_replaces_its_rows_and_keeps_the_others(tmp_path):
    wh = Warehouse(tmp_path)
    first = pl.DataFrame(
        {
            "url": ["http://a.example/1", "http://a.example/2"],
            "host": "a.example",
            "fetched_at": NOW,
            "bytes": [1, 2],
        }
    )
    wh.append_fetch_log("a.example", NOW, first)
    again = pl.DataFrame(
        {"url": ["http://a.example/2"], "host": "a.example", "fetched_at": NOW, "bytes": [5]}
    )
    wh.append_fetch_log("a.example", NOW, again)
    log = wh.read("fetch_log", ["a.example"]).sort("url")
    assert log["bytes"].to_list() == [1, 5]
    later = NOW.replace(hour=18)
    wh.append_fetch_log("a.example", later, again.with_columns(fetched_at=pl.lit(later)))
    assert wh.read("fetch_log", ["a.example"]).height == 3


def test_a_history_window_chooses_the_files_of_its_cycles(tmp_path):
    """since inclusive, until exclusive, by the cycle a file is named after, in UTC whatever
    zone the bounds are given in; a table that is not history has no cycles to choose."""
    wh = Warehouse(tmp_path)
    cycles = [NOW + timedelta(hours=6 * k) for k in range(4)]
    for host in ("a.example", "b.example"):
        for moment in cycles:
            rows = pl.DataFrame({"url": [f"http://{host}/1"], "host": host, "observed_at": moment})
            wh.append_cycle("page_versions", host, moment, rows)
    wh.write_partition("url_state", "a.example", state_rows("a.example", 1))

    def chosen(**window: datetime) -> list[tuple[str, str]]:
        return sorted((f.parent.name, f.name) for f in wh.files("page_versions", **window))

    assert len(chosen()) == 8
    got = chosen(since=cycles[1], until=cycles[3])
    assert got == sorted(
        (f"host={h}", wh.cycle_file("page_versions", h, c).name)
        for h in ("a.example", "b.example")
        for c in cycles[1:3]
    )
    east = timezone(timedelta(hours=5))
    assert chosen(since=cycles[1].astimezone(east), until=cycles[3].astimezone(east)) == got
    assert len(chosen(since=cycles[3])) == 2 and chosen(until=cycles[0]) == []
    only_a = wh.files("page_versions", ["a.example"], since=cycles[2])
    assert [f.parent.name for f in only_a] == ["host=a.example"] * 2
    assert [f.name for f in wh.files("url_state")] == ["data.parquet"]
    with pytest.raises(ValueError, match="not a history table"):
        wh.files("url_state", since=NOW)


def test_views_cover_all_tables_and_use_parameters(tmp_path):
    wh = Warehouse(tmp_path)
    assert wh.ensure_views() is None
    con = duckdb.connect(str(wh.duckdb_path), read_only=True)
    views = {
        r[0] for r in con.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    }
    con.close()
    assert set(tables.VIEW_TABLES) <= views
    assert wh.query("SELECT count(*) AS n FROM url_state")["n"][0] == 0
    wh.write_partitions("url_state", ["a.example"], state_rows("a.example", 2))
    hostile = "a.example' OR '1'='1"
    assert wh.query("SELECT count(*) AS n FROM url_state WHERE host = ?", [hostile])["n"][0] == 0
    assert (
        wh.query("SELECT count(*) AS n FROM url_state WHERE host = ?", ["a.example"])["n"][0] == 2
    )


def test_an_upgrade_that_adds_a_column_shows_it_on_a_home_made_before(tmp_path):
    """The views take every column from each table's 0-row schema file, which was written
    only when missing: on a home made before a column was added, all of whose files lack it,
    the upgraded views had no such column and SQL naming it failed (a contract audit met it
    as `freshness report` exiting 1)."""
    wh = Warehouse(tmp_path)
    assert wh.ensure_views() is None
    older = tables.empty("url_state").drop("version_observed_at")
    seed = wh.table_dir("url_state") / "host=%schema" / "data.parquet"
    older.write_parquet(seed)
    wh.partition_dir("url_state", "a.example").mkdir(parents=True)
    state_rows("a.example", 2).write_parquet(wh.partition_file("url_state", "a.example"))
    (wh.root / "_views.json").write_text("the signature of the release before")
    assert wh.ensure_views() is None
    rows = wh.query("SELECT url, version_observed_at FROM url_state ORDER BY url")
    assert rows.height == 2 and rows["version_observed_at"].is_null().all()


def test_views_refresh_reports_a_lock_held_by_another_process(tmp_path):
    wh = Warehouse(tmp_path)
    wh.ensure_views()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_READ_WRITE, str(wh.duckdb_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        note = wh.ensure_views(force=True)
        assert note is not None and "not refreshed" in note
        wh.write_partition("url_state", "a.example", state_rows("a.example", 1))
        assert wh.read("url_state").height == 1
    finally:
        holder.kill()
        holder.wait()
    assert wh.ensure_views(force=True) is None


HOLD_READ_WRITE = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("holding", flush=True)
time.sleep(60)
"""


def test_schema_drift_new_column_shows_with_nulls(tmp_path):
    wh = Warehouse(tmp_path)
    wh.ensure_views()
    wh.write_partition("url_state", "a.example", state_rows("a.example", 1))
    newer = wh.partition_file("url_state", "b.example")  # a file from a newer release
    newer.parent.mkdir(parents=True)
    state_rows("b.example", 1).with_columns(extra=pl.lit(7)).write_parquet(newer)
    frame = wh.query("SELECT host, extra FROM url_state ORDER BY host")
    assert frame["extra"].to_list() == [None, 7]


def test_retention_prunes_only_old_fetch_log_cycles(tmp_path):
    wh = Warehouse(tmp_path)
    rows = pl.DataFrame({"url": ["http://a.example/"], "host": "a.example"})
    for day in (1, 10, 20):
        moment = NOW.replace(day=day)
        wh.append_fetch_log("a.example", moment, rows.with_columns(fetched_at=pl.lit(moment)))
    assert wh.prune_fetch_log(NOW.replace(day=10)) == 1
    kept = wh.read("fetch_log")["fetched_at"].dt.day().sort().to_list()
    assert kept == [10, 20]


def test_a_read_of_some_columns_reads_only_those(tmp_path):
    """The state update loads eight of the plan's thirty-one columns: read off the files, in
    the table's types, empty or not; a column the table does not have is an error, not a
    silently missing figure."""
    import polars as pl
    import pytest

    from freshness_pipeline.defs.assets.state import url_state
    from freshness_pipeline.stages.state import PLAN_COLUMNS, RESULT_COLUMNS
    from freshness_pipeline.warehouse import tables
    from freshness_pipeline.warehouse.storage import Warehouse

    wh = Warehouse(tmp_path)
    assert wh.read("revisit_plan", ["a.example"], columns=PLAN_COLUMNS).columns == list(
        PLAN_COLUMNS
    )
    plan = tables.conform(
        "revisit_plan",
        pl.DataFrame({"url": ["https://a.example/1"], "host": ["a.example"], "cost": [2.0]}),
    )
    wh.write_partitions("revisit_plan", ["a.example"], plan)
    got = wh.read("revisit_plan", ["a.example"], columns=PLAN_COLUMNS)
    assert got.columns == list(PLAN_COLUMNS) and got["cost"].to_list() == [2.0]
    assert got.schema["selected"] == tables.SCHEMAS["revisit_plan"]["selected"]
    with pytest.raises(KeyError, match="no column"):
        wh.read("revisit_plan", columns=["url", "nope"])
    # the asset asks its IO manager for exactly those columns
    columns = {d.name: (d.metadata or {}).get("columns") for d in url_state.node_def.input_defs}
    assert columns["revisit_plan"] == list(PLAN_COLUMNS)
    assert columns["fetch_results"] == list(RESULT_COLUMNS)


def test_the_temp_file_sweep_takes_what_a_killed_writer_leaves_and_nothing_else(tmp_path):
    """A writer's temp files sit in a host folder (or at the warehouse's top, for its own
    files); the sweep lists the folders itself, and must find exactly what the glob
    ``*/host=*/*.tmp-*`` finds."""
    from freshness_pipeline.warehouse.storage import _temp_files

    wh = Warehouse(tmp_path)
    wh.write_partitions("seeds", ["a.example"], pl.DataFrame({"url": ["u"], "host": ["a.example"]}))
    root = wh.root
    left = [
        root / "seeds" / "host=a.example" / "data.parquet.tmp-1-ab",
        root / "url_state" / "host=b.example" / "data.parquet.tmp-2-cd",
        root / "url_state" / "host=%schema" / "data.parquet.tmp-3-ef",
        root / "_cycles.json.tmp-4-01",
    ]
    kept = [
        root / "seeds" / "host=a.example" / "data.parquet",
        root / "seeds" / "notes" / "x.tmp-5",  # not a host folder
        root / "seeds" / "host=a.example" / "deeper" / "x.tmp-6",  # below one
        root / "seeds" / "loose.tmp-7",  # beside the host folders
    ]
    for path in [*left, *kept[1:]]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    (root / "url_state" / "host=c.example.tmp-8").write_bytes(b"")  # a file, not a folder
    assert sorted(_temp_files(root)) == sorted(root.glob("*/host=*/*.tmp-*"))
    assert wh.sweep_temp_files() == len(left)
    assert not any(p.exists() for p in left) and all(p.exists() for p in kept)
