"""The code location loads as `dagster dev` would load it, and its schedule and sensor behave."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import dagster as dg
import polars as pl

from freshness_pipeline.definitions import defs
from freshness_pipeline.defs.partitions import RANGE_END_TAG, RANGE_START_TAG, register_hosts
from freshness_pipeline.defs.resources import parse_now
from freshness_pipeline.defs.sensors import new_hosts_sensor
from freshness_pipeline.warehouse.storage import Warehouse

ASSETS = ["url_inventory", "url_candidates", "revisit_plan", "fetch_results", "url_state"]


def test_definitions_have_the_five_host_partitioned_assets():
    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert set(ASSETS) <= keys
    for name in ASSETS:
        assets_def = defs.get_assets_def(name)
        partitions = assets_def.partitions_def
        assert isinstance(partitions, dg.DynamicPartitionsDefinition)
        assert partitions.name == "hosts"
        assert assets_def.backfill_policy == dg.BackfillPolicy.single_run()
    assert repo.get_schedule_def("freshness_cycle_schedule")
    assert repo.get_sensor_def("new_hosts_sensor")
    checks = {k.name for k in repo.asset_graph.asset_check_keys}
    assert {
        "candidates_have_unique_urls",
        "plan_within_budget",
        "results_account_for_plan",
    } <= checks


def test_dagster_cli_validates_the_code_location():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dagster",
            "definitions",
            "validate",
            "-m",
            "freshness_pipeline.definitions",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_schedule_asks_for_one_run_over_all_hosts_with_its_tick_as_now(tmp_path):
    instance = dg.DagsterInstance.local_temp(str(tmp_path))
    register_hosts(instance, [f"h{i}.example" for i in range(50)])
    tick = datetime(2026, 11, 30, 13, tzinfo=UTC)
    # As a context manager: an evaluated tick enters the instance, and only the context's exit
    # leaves it (else the instance's state storage outlives the test in a ContextVar and later
    # materializations in the same process fail on its dead weakref).
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=tick, repository_def=defs.get_repository_def()
    ) as context:
        data = (
            defs.get_repository_def()
            .get_schedule_def("freshness_cycle_schedule")
            .evaluate_tick(context)
        )
    assert len(data.run_requests) == 1
    request = data.run_requests[0]
    assert request.tags[RANGE_START_TAG] == "h0.example"
    assert request.tags[RANGE_END_TAG] == "h9.example"  # sorted order of registration
    assert request.run_config["resources"]["cycle"]["config"]["now"] == tick.isoformat()


def test_sensor_registers_seeded_hosts(tmp_path, monkeypatch):
    monkeypatch.setenv("FRESHNESS_HOME", str(tmp_path))
    Warehouse(tmp_path).write_partition(
        "seeds",
        "new.example",
        pl.DataFrame({"url": ["https://new.example/"], "host": ["new.example"]}),
    )
    instance = dg.DagsterInstance.local_temp(str(tmp_path))
    with dg.build_sensor_context(
        instance=instance, repository_def=defs.get_repository_def()
    ) as context:
        # Called directly: a tick's resolution validates keys the daemon adds in the same tick.
        before = datetime.now(UTC)
        result = new_hosts_sensor(context)
        after = datetime.now(UTC)
        (request,) = result.run_requests
        assert request.tags[RANGE_START_TAG] == request.tags[RANGE_END_TAG] == "new.example"
        # The run is told its cycle's time, as the schedule tells its tick.
        now = request.run_config["resources"]["cycle"]["config"]["now"]
        assert before <= parse_now(now) <= after
        added = result.dynamic_partitions_requests[0]
        assert list(added.partition_keys) == ["new.example"]
        register_hosts(instance, ["new.example"])
        assert isinstance(new_hosts_sensor(context), dg.SkipReason)


def test_cycle_runs_are_serialized_by_the_instance_config(tmp_path, monkeypatch):
    """Both instance configs (the one `freshness` writes and the checkout's dagster.yaml) load
    and limit cycle runs to one at a time through the job's own tag."""
    from pathlib import Path

    import yaml

    from freshness_pipeline.app.runner import open_instance
    from freshness_pipeline.defs.jobs import CYCLE_TAG, freshness_cycle_job

    assert freshness_cycle_job.tags[CYCLE_TAG] == "true"
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    instance = open_instance(tmp_path)
    coordinator = instance.run_coordinator
    assert type(coordinator).__name__ == "QueuedRunCoordinator"
    checkout = Path(__file__).resolve().parents[1] / "dagster.yaml"
    retention = []
    for config in (tmp_path / "dagster" / "dagster.yaml", checkout):
        loaded = yaml.safe_load(config.read_text())
        limits = loaded["concurrency"]["runs"]["tag_concurrency_limits"]
        assert {"key": CYCLE_TAG, "limit": 1} in limits, config
        retention.append(loaded["retention"])
    assert retention[0] == retention[1] and retention[0]["sensor"]["purge_after_days"]["skipped"]
    assert instance.get_settings("retention")  # the instance read it


def test_the_code_location_takes_its_home_from_the_homes_dagster_home(tmp_path):
    """Loaded with only `DAGSTER_HOME=<home>/dagster`, as the README's notification daemon
    runs, the location read ./data beside wherever it started, and the sensor skipped every
    tick for want of the home's [notify] (found by a newcomer). FRESHNESS_HOME still wins,
    and an instance folder that is no home's says nothing of one."""
    import os

    from freshness_pipeline_tests.support import run_freshness

    home = tmp_path / "crawl"
    seeds = tmp_path / "seeds.csv"
    seeds.write_text("url\nhttp://127.0.0.1:9/a\n")
    done = run_freshness("seed", str(seeds), home=home)
    assert done.returncode == 0, done.stderr
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "dagster").mkdir(parents=True)
    show = (
        "import freshness_pipeline.definitions as d; "
        "from freshness_pipeline.warehouse.storage import Warehouse; "
        "print(Warehouse().home)"
    )

    def home_seen(**env: str) -> str:
        full = {k: v for k, v in os.environ.items() if k not in ("FRESHNESS_HOME", "DAGSTER_HOME")}
        done = subprocess.run(
            [sys.executable, "-c", show],
            env={**full, **env},
            cwd=elsewhere,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert home_seen(DAGSTER_HOME=str(home / "dagster")) == str(home.resolve())
    other = tmp_path / "other"
    assert home_seen(DAGSTER_HOME=str(home / "dagster"), FRESHNESS_HOME=str(other)) == str(
        other.resolve()
    )
    assert home_seen(DAGSTER_HOME=str(elsewhere / "dagster")) == str((elsewhere / "data").resolve())
