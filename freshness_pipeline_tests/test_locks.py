"""One writer per home, whoever started it (warehouse/locks.py): a Dagster run the schedule,
the UI or `dagster asset materialize` started and a `freshness` writer never run side by side.
Found by an exploratory run: a Dagster run and `freshness cycle` at once fetched every page
twice (a host's Crawl-delay broken) and recorded each change twice; `hosts --retire` during a
run left the host in four tables. The other side of each lock is a real process."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from freshness_pipeline.app.runner import execute_cycle_run, load_seeds, open_instance
from freshness_pipeline.defs.partitions import choose_partitioning
from freshness_pipeline.warehouse.locks import dagster_run_at_work, dagster_run_hold
from freshness_pipeline.warehouse.storage import HomeBusy, Warehouse
from freshness_pipeline_tests.support import run_freshness

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)

_HOLD = """
import sys, time
from pathlib import Path
from freshness_pipeline.warehouse.{module} import {what}
home = Path(sys.argv[1])
with {call}:
    (home / "held").write_text("yes")
    time.sleep(60)
"""


def _seeded(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    load_seeds(home, b"url\nhttps://a.example/p\nhttps://b.example/p\n", added_at=T0)
    return home


def _holding(home: Path, module: str, what: str, call: str) -> subprocess.Popen:
    """A process holding one of ``home``'s locks until it is killed."""
    code = _HOLD.format(module=module, what=what, call=call)
    proc = subprocess.Popen([sys.executable, "-c", code, str(home)])
    deadline = time.monotonic() + 60
    while not (home / "held").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the holder did not start"
        time.sleep(0.05)
    return proc


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return _seeded(tmp_path)


def test_a_freshness_writer_refuses_while_a_dagster_run_holds_the_home(home: Path) -> None:
    run = _holding(home, "locks", "dagster_run_hold", "dagster_run_hold(home)")
    try:
        assert dagster_run_at_work(home)
        with pytest.raises(HomeBusy, match="a Dagster run"), Warehouse(home).exclusive("cycle"):
            pass
        done = run_freshness("cycle", "--dry-run", "--now", "2026-03-02T18:00:00Z", home=home)
        assert done.returncode == 75 and "a Dagster run" in done.stderr, done.stderr
        retire = run_freshness("hosts", "--retire", "a.example", "--yes", home=home)
        assert retire.returncode == 75, retire.stderr
        # runs share it among themselves (a distributed cycle's groups run side by side)
        with dagster_run_hold(home):
            assert not dagster_run_at_work(home)  # this process's own run does not count
    finally:
        run.kill()
        run.wait()
    assert not dagster_run_at_work(home)
    with Warehouse(home).exclusive("cycle"):
        pass


def test_a_dagster_run_refuses_to_start_beside_a_freshness_writer(home: Path) -> None:
    writer = _holding(
        home, "storage", "Warehouse", 'Warehouse(home).exclusive("cycle 2026-03-02T18:00:00")'
    )
    instance = open_instance(home)
    try:
        result = execute_cycle_run(  # as the UI or the schedule starts one
            home,
            choose_partitioning(0, 0),
            instance,
            run_config={
                "resources": {"cycle": {"config": {"now": T0.isoformat(), "dry_run": True}}}
            },
            tags={},
            planning_only=True,
        )
    finally:
        writer.kill()
        writer.wait()
    assert not result.success
    failure = next(e for e in result.all_events if e.is_failure)
    assert "is busy: cycle 2026-03-02T18:00:00" in str(failure.event_specific_data)
    assert not Warehouse(home).read("revisit_plan").height  # it wrote nothing
