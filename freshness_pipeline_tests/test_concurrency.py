"""Two writers on one home: the second refuses with a clear message, and a holder killed with
SIGKILL leaves no stale lock behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from freshness_pipeline.warehouse.storage import HomeBusy, Warehouse
from freshness_pipeline_tests.support import run_freshness

HOLD = """
import sys, time
from freshness_pipeline.warehouse.storage import Warehouse
with Warehouse(sys.argv[1]).exclusive("cycle 2026-11-30T12:00:00+00:00"):
    print("holding", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "holding"
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_second_writer_is_refused_naming_the_holder(tmp_path, holder):
    expected = rf"cycle 2026-11-30T12:00:00\+00:00 \(pid {holder.pid}\)"
    with pytest.raises(HomeBusy, match=expected), Warehouse(tmp_path).exclusive("cycle B"):
        pass


def test_cli_cycle_refuses_with_exit_75_and_kill_9_frees_the_home(tmp_path, holder):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("https://a.example/\n")
    plan = ("cycle", "--dry-run", "--now", "2026-11-30T12:00:00Z")
    refused = run_freshness(*plan, home=tmp_path)
    assert refused.returncode == 75, refused.stderr
    assert "busy" in refused.stderr and str(holder.pid) in refused.stderr
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    seeded = run_freshness("seed", str(seeds), home=tmp_path)
    assert seeded.returncode == 0, seeded.stderr
    planned = run_freshness(*plan, home=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert "1 planned" in planned.stdout


USER_SESSION = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
print(con.execute("SELECT count(*) FROM url_state").fetchall()[0][0], flush=True)
time.sleep(120)
"""


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> Path:
    """A home seeded through the CLI with two pages of one host, once for the module: each test
    works on a copy of it (a home's copy is a home)."""
    home = tmp_path_factory.mktemp("seeded") / "home"
    seeds = home.parent / "seeds.txt"
    seeds.write_text("https://a.example/\nhttps://a.example/2\n")
    assert run_freshness("seed", str(seeds), home=home).returncode == 0
    return home


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_a_users_duckdb_session_does_not_fail_the_cycle(tmp_path, seeded, mode):
    """A user querying freshness.duckdb (read-only or read-write) while cycles run: the cycle
    completes, and where the views needed refreshing it says so instead of failing."""
    shutil.copytree(seeded, tmp_path, dirs_exist_ok=True)
    session = subprocess.Popen(
        [sys.executable, "-c", USER_SESSION, str(tmp_path / "freshness.duckdb"), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert session.stdout.readline().strip() == "0"
        (
            tmp_path / "warehouse" / "_views.json"
        ).unlink()  # as after an upgrade: views must be redone
        done = run_freshness("cycle", "--dry-run", "--now", "2026-11-30T12:00:00Z", home=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "2 planned" in done.stdout
        assert "not refreshed" in done.stderr
    finally:
        session.kill()
        session.wait()
    again = run_freshness("cycle", "--dry-run", "--now", "2026-11-30T18:00:00Z", home=tmp_path)
    assert again.returncode == 0 and "not refreshed" not in again.stderr
