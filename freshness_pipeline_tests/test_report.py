"""`freshness report`: its `--now` is checked like `cycle --now`, and a user's read-write DuckDB
session on the views file does not stop it (it reads the Parquet tables instead and says so)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest
from typer.testing import CliRunner

from freshness_pipeline.cli import app
from freshness_pipeline.storage import Warehouse
from freshness_pipeline_tests.support import run_freshness

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
