"""app/demo.py: the demo's home is its own (a home with data the demo did not make is refused
and left alone, a demo home is reset), loopback is opened without dropping what was allowed,
and one in-process demo cycle over the synthetic web keeps to its budget, scores itself
against round robin, and prints the figures it returns."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from freshness_pipeline.app.demo import (
    LOOPBACK,
    MARKER,
    DemoError,
    allow_loopback,
    prepare_home,
    run_demo,
)
from freshness_pipeline.synthweb import DEFAULT_START
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.netguard import ALLOW_ENV


def test_a_home_with_data_the_demo_did_not_make_is_refused_and_left_alone(
    tmp_path: Path,
) -> None:
    table = tmp_path / "warehouse" / "url_state" / "host=a.test" / "data.parquet"
    table.parent.mkdir(parents=True)
    table.write_bytes(b"someone's crawl")
    with pytest.raises(DemoError, match="pass --home to an empty folder"):
        prepare_home(tmp_path)
    assert table.read_bytes() == b"someone's crawl"
    assert not (tmp_path / MARKER).exists()


def test_a_demo_home_is_reset_and_an_empty_one_made(tmp_path: Path) -> None:
    fresh = tmp_path / "new" / "home"
    prepare_home(fresh)
    assert (fresh / MARKER).is_file()

    home = tmp_path / "demo"
    prepare_home(home)
    (home / "warehouse" / "seeds").mkdir(parents=True)
    (home / "dagster").mkdir()
    (home / "dagster" / "runs.db").write_text("runs")
    (home / "freshness.duckdb").write_text("views")
    (home / "freshness.duckdb.wal").write_text("wal")
    # the last run's WARC files: a second demo once counted and indexed them beside its own
    (home / "archive").mkdir()
    (home / "archive" / "cycle-1.warc.gz").write_bytes(b"warc")
    (home / "notes.txt").write_text("mine")  # not the demo's to remove
    prepare_home(home)  # the marker says the demo made it: reset
    assert sorted(p.name for p in home.iterdir()) == sorted([MARKER, "notes.txt"])


def test_loopback_is_added_to_the_allow_list_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_ENV, "10.1.0.0/16")
    allow_loopback()
    allow_loopback()
    assert os.environ[ALLOW_ENV] == f"10.1.0.0/16,{LOOPBACK}"
    monkeypatch.delenv(ALLOW_ENV)
    allow_loopback()
    assert os.environ[ALLOW_ENV] == LOOPBACK


@pytest.mark.integration
def test_one_demo_cycle_keeps_its_budget_and_prints_what_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "elsewhere"))  # the demo uses its own
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    home = tmp_path / "demo"
    out = io.StringIO()
    summary = run_demo(
        home, cycles=1, budget_share=0.05, console=Console(file=out, width=240, color_system=None)
    )
    shown = out.getvalue()
    budget = int(re.search(r"budget (\d+) fetches per 6 h cycle, 1 cycles", shown)[1])  # type: ignore[index]
    crawlable = int(re.search(r"(\d+) crawlable pages", shown)[1])  # type: ignore[index]
    assert budget == max(1, round(0.05 * crawlable))

    log = Warehouse(home).read("fetch_log")
    assert 0 < log.height <= budget
    assert log["fetched_at"].unique().to_list() == [DEFAULT_START]
    assert re.search(rf"requests sent\s*│\s*{log.height}\s*│", shown)

    ours, uniform = summary["weighted_freshness"], summary["uniform_freshness"]
    assert 0.0 <= uniform <= 1.0 and 0.0 <= ours <= 1.0
    assert summary["ratio"] == pytest.approx(ours / uniform)
    assert re.search(rf"freshness-pipeline\s*│\s*{ours:.3f}\s*│", shown)
    assert re.search(rf"round robin \(same budget\)\s*│\s*{uniform:.3f}\s*│", shown)
    assert summary["cycle_max_s"] >= summary["cycle_mean_s"] > 0
    # one cycle from nothing: every fetch was new, none conditional
    assert log.filter(pl.col("outcome") != "new").height <= log.height // 10
    assert summary["share_304"] == 0.0
    # the demo's instance lives in its home; loopback was opened for the cycle
    assert "DAGSTER_HOME" not in os.environ and (home / "dagster").is_dir()
    assert LOOPBACK in os.environ[ALLOW_ENV].split(",")
    assert (home / MARKER).is_file()
    assert f"Report: freshness report --home {home}" in shown
    assert f"freshness export --since {DEFAULT_START.isoformat()} --home {home}" in shown


def test_seeding_the_demo_home_is_refused(tmp_path: Path) -> None:
    """A newcomer seeded their own URLs into the default home, which the demo had made; the
    next `freshness demo` reset it and their seeds were gone, without a word. `freshness seed`
    refuses a demo home, naming the way out."""
    from typer.testing import CliRunner

    from freshness_pipeline.app.cli import app

    home = tmp_path / "data"
    prepare_home(home)
    seeds = tmp_path / "mine.txt"
    seeds.write_text("https://mine.example/a\n")
    refused = CliRunner().invoke(app, ["seed", str(seeds), "--home", str(home)])
    assert refused.exit_code == 2, refused.output
    assert "is the demo's home" in refused.output and MARKER in refused.output
    assert not (home / "warehouse").exists()
    (home / MARKER).unlink()  # made theirs
    taken = CliRunner().invoke(app, ["seed", str(seeds), "--home", str(home)])
    assert taken.exit_code == 0, taken.output
    assert Warehouse(home).hosts_in("seeds") == ["mine.example"]
