"""`freshness report`: its `--now` is checked like `cycle --now`, and a user's read-write DuckDB
session on the views file does not stop it (it reads the Parquet tables instead and says so)."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
from rich.console import Console
from typer.testing import CliRunner

from freshness_pipeline.app.cli import app
from freshness_pipeline.app.report import print_report
from freshness_pipeline.science.fetch_totals import remember_fetches
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.support import run_freshness, run_into_closed_pipe

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)
HOSTS = ["a.example", "b.example"]


def _fetch_rows(host: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "url": [f"https://{host}/1", f"https://{host}/2"],
            "host": [host, host],
            "fetched_at": [T0, T0],
            "http_status": [200, 304],
            "outcome": ["changed", "not_modified"],
            "bytes": [1000, 0],
            "conditional": [False, True],
            "duration_ms": [12.0, 3.0],
        }
    )


def _state_rows(host: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "url": [f"https://{host}/1", f"https://{host}/2"],
            "host": [host, host],
            "status": ["active", "active"],
            "value": [1.0, 2.0],
            "url_class": ["article", "index"],
            "change_rate": [0.5, 0.1],
            "last_seen_at": [T0, T0],
            "last_fetched_at": [T0, T0],
        }
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A small warehouse written straight through storage: one cycle on two hosts."""
    warehouse = Warehouse(tmp_path)
    for host in HOSTS:
        seeds = _state_rows(host).select("url", "host", "value", "url_class")
        warehouse.write_partition("seeds", host, seeds.with_columns(added_at=pl.lit(T0)))
        warehouse.write_partition("url_state", host, _state_rows(host))
        warehouse.append_fetch_log(host, T0, _fetch_rows(host))
        # what the fetch stage keeps beside fetch_log, and the metrics sum
        requests = _fetch_rows(host).with_columns(
            url_class=pl.Series(["article", "index"]),
            plan_reason=pl.lit("due"),
            expected_change=pl.lit(None, pl.Float64),
        )
        totals = remember_fetches(tables.empty("fetch_totals"), requests, T0)
        warehouse.write_partition("fetch_totals", host, totals)
    assert warehouse.ensure_views() is None
    return tmp_path


def test_report_rejects_a_bad_now_the_way_cycle_does(home, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    runner = CliRunner()
    cycle = runner.invoke(app, ["cycle", "--now", "bad", "--home", str(home)])
    report = runner.invoke(app, ["report", "--now", "bad", "--home", str(home)])
    assert report.exit_code == cycle.exit_code == 2, report.output
    assert isinstance(report.exception, SystemExit)  # a message, not a traceback
    assert "--now 'bad' is not an ISO 8601 time" in report.output
    assert report.output == cycle.output


def test_report_accepts_a_good_now(home):
    runner = CliRunner()
    done = runner.invoke(app, ["report", "--now", "2026-12-01T00:00:00Z", "--home", str(home)])
    assert done.exit_code == 0, done.output
    assert "2026-12-01" in done.output and "By host" in done.output


def test_report_reads_the_parquet_tables_while_another_process_holds_the_duckdb_file(home):
    path = home / "freshness.duckdb"
    free = run_freshness("report", home=home)
    assert free.returncode == 0, free.stderr
    assert "a.example" in free.stdout and "b.example" in free.stdout
    holder = duckdb.connect(str(path))  # a user's read-write session: an exclusive file lock
    try:
        locked = run_freshness("report", home=home)
    finally:
        holder.close()
    assert locked.returncode == 0, locked.stderr
    assert "Traceback" not in locked.stderr
    notes = [line for line in locked.stderr.splitlines() if line.strip()]
    assert len(notes) == 1, locked.stderr
    assert str(path) in notes[0] and "locked by another process" in notes[0]
    assert locked.stdout == free.stdout  # the same views, the same answer


@pytest.mark.parametrize("width", [80, 120, 220])
def test_report_tables_fit_the_terminal_with_every_name_and_value_whole(home, width):
    """Twenty-odd metrics per host in one table left every cell blank at 80 columns: the tables
    come in parts that fit, each with the host or class, and no name or value is cut."""
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None)
    print_report(Warehouse(home), T0, console)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width
    for name in (
        "share_304",
        "unchanged_share",
        "requests_per_change",
        "verify_z",
        "expected_age_h",
    ):
        assert name in text, name
    for host in HOSTS:
        assert text.count(host) >= (2 if width < 220 else 1)
    # the per-host figures themselves: 2 requests each, one 304 out of one conditional
    assert "1.0" in text and " 2 " in text
    if width == 80:
        assert text.count("By host (") > 1


def test_every_column_of_the_report_is_explained_under_it(home):
    """A reader meets twenty-odd column names: each one the report shows is in its legend."""
    from freshness_pipeline.app.report import legend_columns, report_by, report_totals

    shown = set(report_totals(Warehouse(home), T0).columns)
    for key in ("host", "url_class"):
        shown |= set(report_by(Warehouse(home), key, T0).columns) - {key}
    assert shown - legend_columns() == set()
    out = io.StringIO()
    print_report(Warehouse(home), T0, Console(file=out, width=200, color_system=None))
    assert "Columns:\n  urls: URLs in the state\n" in out.getvalue()


def test_a_report_before_any_fetch_says_why_its_figures_are_zeros(tmp_path, home):
    """Right after seeding (or dry runs) the report was all zeros with no word of why (the
    fifth exploratory run); a home with fetches gets no such note."""
    seeded = Warehouse(tmp_path / "seeded")
    seeds = _state_rows("a.example").select("url", "host", "value", "url_class")
    seeded.write_partition("seeds", "a.example", seeds.with_columns(added_at=pl.lit(T0)))
    assert seeded.ensure_views() is None
    runner = CliRunner()
    fresh = runner.invoke(app, ["report", "--home", str(seeded.home)])
    assert fresh.exit_code == 0, fresh.output
    assert "no cycle has fetched anything yet" in " ".join(fresh.output.split())
    fetched = runner.invoke(app, ["report", "--home", str(home)])
    assert fetched.exit_code == 0 and "no cycle has fetched" not in fetched.output


def test_the_by_host_table_lists_the_biggest_hosts_and_names_the_rest(tmp_path):
    """A crawl of 10,000 hosts printed 10,000 by-host rows and `report --host` did not exist
    (the sixth exploratory run): the report lists the hosts with the most URLs, says how many
    it left out, and `--host` / `--all-hosts` choose."""
    warehouse = Warehouse(tmp_path)
    names = [f"h{i:02d}.example" for i in range(33)]
    for n, host in enumerate(names):
        rows = pl.concat([_state_rows(host)] * (1 + n % 3)).with_columns(
            url=pl.format("https://{}/{}", pl.lit(host), pl.int_range(pl.len()))
        )
        warehouse.write_partition("url_state", host, rows)
        seeds = rows.select("url", "host", "value", "url_class")
        warehouse.write_partition("seeds", host, seeds.with_columns(added_at=pl.lit(T0)))
    assert warehouse.ensure_views() is None
    runner = CliRunner()

    def hosts_shown(*args: str) -> tuple[set[str], str]:
        done = runner.invoke(app, ["report", "--home", str(tmp_path), *args])
        assert done.exit_code == 0, done.output
        return {h for h in names if h in done.output}, " ".join(done.output.split())

    shown, text = hosts_shown()
    # 11 hosts have 6 URLs, 11 have 4 and 11 have 2: the 30 listed leave out 3 of the smallest
    assert len(shown) == 30 and {names[i] for i in range(0, 33, 3)} - shown
    assert {names[i] for i in range(2, 33, 3)} | {names[i] for i in range(1, 33, 3)} <= shown
    assert "3 more hosts not shown" in text and "--host" in text
    assert hosts_shown("--all-hosts")[0] == set(names)
    one, text = hosts_shown("--host", "h00.example", "--host", "h05.example")
    assert one == {"h00.example", "h05.example"} and "not shown" not in text
    bad = runner.invoke(app, ["report", "--home", str(tmp_path), "--host", "nope.example"])
    assert bad.exit_code == 2
    assert "no such host in this home: nope.example" in " ".join(bad.output.split())
    # named as `freshness cycle --host` takes them: a URL, any case
    assert hosts_shown("--host", "HTTPS://H07.example/a/page")[0] == {"h07.example"}


def test_report_host_named_without_its_port_is_told_the_key(tmp_path: Path) -> None:
    """`freshness report --host 127.0.0.4` said only "no such host" where the home keys the
    host with its port; `freshness cycle --host` and `hosts --retire` name the likely key."""
    warehouse = Warehouse(tmp_path)
    host = "p.example:8080"
    rows = _state_rows(host).with_columns(url=pl.lit(f"http://{host}/a"))
    warehouse.write_partition("url_state", host, rows)
    seeds = rows.select("url", "host", "value", "url_class").with_columns(added_at=pl.lit(T0))
    warehouse.write_partition("seeds", host, seeds)
    assert warehouse.ensure_views() is None
    bad = CliRunner().invoke(app, ["report", "--home", str(tmp_path), "--host", "p.example"])
    assert bad.exit_code == 2
    said = " ".join(bad.output.split())
    assert "no such host in this home: p.example (did you mean p.example:8080?)" in said


_REPLACER = """
import random, sys, time
import polars as pl
from freshness_pipeline.warehouse.storage import Warehouse
warehouse = Warehouse(sys.argv[1])
hosts = [f"h{i}.example" for i in range(12)]
while True:  # a cycle's steps, one after another
    time.sleep(0.05)
    for host in hosts:
        n = random.randint(50, 400)
        warehouse.write_partition("url_state", host, pl.DataFrame({
            "url": [f"https://{host}/{k}" for k in range(n)], "host": [host] * n,
            "status": ["active"] * n, "value": [1.0] * n,
            "url_class": [f"c{k} " * random.randint(1, 6) for k in range(n)],
        }))
"""


def test_a_report_query_meeting_a_file_being_replaced_is_asked_again(tmp_path):
    """A cycle replaces each host's table files as it writes them, and DuckDB opens a file more
    than once per query: a report beside a cycle died now and then of "TProtocolException:
    Invalid data" (2 of 40, found by an exploratory run). Here another process replaces
    url_state's files, step after step, while the report's connection queries them; every
    answer is whole (each file's rows all have value 1, so a host's sum is its count)."""
    import subprocess
    import sys
    import time

    from freshness_pipeline.app.report import ConnectionViews

    warehouse = Warehouse(tmp_path)
    for i in range(12):
        host = f"h{i}.example"
        warehouse.write_partition("url_state", host, _state_rows(host).head(0))
    assert warehouse.ensure_views() is None
    writer = subprocess.Popen([sys.executable, "-c", _REPLACER, str(tmp_path)])
    try:
        answers = []
        with duckdb.connect(str(warehouse.duckdb_path), read_only=True) as con:
            views = ConnectionViews(con)
            end = time.monotonic() + 6
            while time.monotonic() < end:
                answers.append(
                    views.query(
                        "SELECT host, count(*) AS n, sum(value) AS total, "
                        "max(length(url_class)) AS longest FROM url_state GROUP BY host"
                    )
                )
    finally:
        writer.kill()
        writer.wait()
    assert len(answers) > 50
    for answer in answers:
        assert (answer["n"] == answer["total"]).all(), answer


def test_a_reader_that_stops_early_ends_the_report_quietly(home):
    """`freshness report | head -1`: rich's console exited 1 when the reader went away, which
    a caller under pipefail read as a failed report (a contract audit); the reader has what it
    asked for."""
    done = run_into_closed_pipe("report", "--home", str(home))
    assert (done.returncode, done.stderr) == (0, "")
