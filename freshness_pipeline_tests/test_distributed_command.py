"""freshness_pipeline/distributed.py, the cron command of a distributed deployment
(``python -m freshness_pipeline.distributed --now ISO``): what it refuses before it starts a
single group run. A bad ``--now``, a home without host buckets, more groups than buckets (also
by ``FRESHNESS_BUCKET_GROUPS``, its default) and a home another process is writing each stop
it with the reason, and no run is launched. The runs themselves need a broker and
workers (benchmarks/distributed_cycle.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from freshness_pipeline.defs.distributed import GROUPS_ENV
from freshness_pipeline.distributed import main
from freshness_pipeline.warehouse.storage import HomeBusy

NOW = "2026-03-02T12:00:00+00:00"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv(GROUPS_ENV, raising=False)
    monkeypatch.setenv("FRESHNESS_CELERY_BROKER", "redis://127.0.0.1:1/0")  # never reached
    home = tmp_path / "home"
    home.mkdir()
    (home / "freshness.toml").write_text("[partitioning]\nhost_buckets = 2\n")
    return home


def nothing_started(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # at most the instance's configuration is written: no instance opened, no run made
    instance = home / "dagster"
    assert not instance.exists() or {p.name for p in instance.iterdir()} == {"dagster.yaml"}
    assert capsys.readouterr().out == ""


def test_a_bad_now_is_named(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="--now 'noon' is not an ISO 8601 time"):
        main(["--home", str(home), "--now", "noon"])
    nothing_started(home, capsys)
    assert not (home / "writer.lock").exists()


def test_a_home_without_host_buckets_is_refused(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "freshness.toml").write_text("")
    with pytest.raises(ValueError, match=r"set \[partitioning\] host_buckets in freshness.toml"):
        main(["--home", str(home), "--now", NOW])
    nothing_started(home, capsys)
    assert not (home / "writer.lock").exists()


def test_more_groups_than_buckets_are_refused(
    home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ValueError, match=r"groups must be 1..2 \(the bucket count\), not 3"):
        main(["--home", str(home), "--now", NOW, "--groups", "3"])
    # the default comes from FRESHNESS_BUCKET_GROUPS, as for the code location
    monkeypatch.setenv(GROUPS_ENV, "5")
    with pytest.raises(ValueError, match=r"groups must be 1..2 \(the bucket count\), not 5"):
        main(["--home", str(home), "--now", NOW])
    with pytest.raises(ValueError, match="not 0"):
        main(["--home", str(home), "--now", NOW, "--groups", "0"])
    nothing_started(home, capsys)


HOLD = textwrap.dedent(
    """
    import sys, time
    from freshness_pipeline.warehouse.storage import Warehouse
    with Warehouse(sys.argv[1]).exclusive("freshness cycle of a test"):
        print("held", flush=True)
        time.sleep(120)
    """
)


def test_a_home_another_process_writes_is_left_alone(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(HomeBusy, match=r"freshness cycle of a test \(pid \d+\) holds it"):
            main(["--home", str(home), "--now", NOW])
    finally:
        holder.kill()
        holder.wait()
    nothing_started(home, capsys)
