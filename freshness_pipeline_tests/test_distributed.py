"""The distributed deployment's pieces that need no broker: bucket groups, the group schedule,
the instance configuration, and that the base install never imports Celery. The full run on
Redis and two workers is benchmarks/distributed_cycle.py, not a test."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import dagster as dg
import pytest
import yaml

from freshness_pipeline.defs.checks import ALL_CHECKS
from freshness_pipeline.defs.distributed import (
    CYCLE_ID_TAG,
    GROUP_RUN_TAG,
    JOB_NAME,
    SCHEDULE_NAME,
    bucket_groups,
    build_group_schedule,
    group_run_tags,
)
from freshness_pipeline.defs.instance import distributed_dagster_yaml
from freshness_pipeline.defs.jobs import CYCLE_TAG
from freshness_pipeline.defs.partitions import (
    HOST_BUCKET_TAG,
    RANGE_END_TAG,
    RANGE_START_TAG,
    bucket_keys,
)


@pytest.mark.parametrize(("n_buckets", "n_groups"), [(8, 2), (8, 3), (64, 5), (7, 7), (5, 1)])
def test_groups_cover_every_bucket_once_in_near_equal_contiguous_slices(n_buckets, n_groups):
    keys = bucket_keys(n_buckets)
    groups = bucket_groups(n_buckets, n_groups)
    assert len(groups) == n_groups
    slices = [keys[keys.index(first) : keys.index(last) + 1] for first, last in groups]
    assert [k for s in slices for k in s] == keys
    assert max(map(len, slices)) - min(map(len, slices)) <= 1


def test_groups_refuse_per_host_partitions_and_more_groups_than_buckets():
    with pytest.raises(ValueError, match="host_buckets"):
        bucket_groups(0, 2)
    with pytest.raises(ValueError, match="1..4"):
        bucket_groups(4, 5)


def test_group_runs_are_range_runs_without_the_one_cycle_tag():
    tags = group_run_tags("bucket-0", "bucket-3", cycle_id="2026-11-30T12:00:00+00:00")
    assert (tags[RANGE_START_TAG], tags[RANGE_END_TAG]) == ("bucket-0", "bucket-3")
    assert tags[HOST_BUCKET_TAG] == "bucket-0...bucket-3"  # the per-group run limit's key
    assert tags[CYCLE_ID_TAG] == "2026-11-30T12:00:00+00:00"
    assert tags[GROUP_RUN_TAG] == "true"
    assert CYCLE_TAG not in tags  # limit 1 in the single-machine dagster.yaml: would serialize


def test_schedule_asks_for_one_run_per_group_with_the_tick_as_now(tmp_path):
    schedule = build_group_schedule(8, 2)
    assert schedule.name == SCHEDULE_NAME and schedule.job_name == JOB_NAME
    tick = datetime(2026, 11, 30, 13, tzinfo=UTC)
    with (
        dg.instance_for_test(temp_dir=str(tmp_path)) as instance,
        dg.build_schedule_context(instance=instance, scheduled_execution_time=tick) as context,
    ):
        requests = schedule.evaluate_tick(context).run_requests
    assert [(r.tags[RANGE_START_TAG], r.tags[RANGE_END_TAG]) for r in requests] == [
        ("bucket-0", "bucket-3"),
        ("bucket-4", "bucket-7"),
    ]
    assert len({r.run_key for r in requests}) == 2
    for request in requests:
        assert request.run_config["resources"]["cycle"]["config"]["now"] == tick.isoformat()
        assert request.tags[CYCLE_ID_TAG] == tick.isoformat()


def test_deployment_instance_limits_runs_per_group_not_per_cycle(tmp_path):
    (tmp_path / "dagster.yaml").write_text(distributed_dagster_yaml(tmp_path, n_groups=4))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    runs = yaml.safe_load((tmp_path / "dagster.yaml").read_text())["concurrency"]["runs"]
    assert runs["max_concurrent_runs"] == 4
    assert runs["tag_concurrency_limits"] == [
        {"key": HOST_BUCKET_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    ]


def test_base_install_never_imports_celery():
    code = (
        "import sys, freshness_pipeline.definitions, freshness_pipeline.app.cli, "
        "freshness_pipeline.app.distributed, freshness_pipeline.defs.distributed, "
        "freshness_pipeline.distributed; "
        "assert not [m for m in sys.modules if m.split('.')[0] in ('celery', 'dagster_celery')]"
    )
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_cron_command_answers_help():
    """`python -m freshness_pipeline.distributed` is the documented cron command."""
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "freshness_pipeline.distributed", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--budget-per-group" in done.stdout


def test_celery_job_builds_over_buckets_with_the_celery_executor(tmp_path, monkeypatch):
    pytest.importorskip("dagster_celery", reason="the `distributed` extra is not installed")
    from freshness_pipeline.defs.distributed import BROKER_ENV, build_distributed_definitions

    monkeypatch.setenv(BROKER_ENV, "redis://127.0.0.1:1/0")  # never contacted
    defs = build_distributed_definitions(str(tmp_path), host_buckets=8, n_groups=2)
    # A live instance: resolving definitions reads state storage through the current one, and
    # an earlier test's instance may be gone by now (dagster keeps only a weak reference).
    with dg.instance_for_test():
        job = defs.resolve_job_def(JOB_NAME)
    assert job.executor_def.name == "celery_from_env"
    assert job.partitions_def is not None
    assert job.partitions_def.get_partition_keys() == bucket_keys(8)
    assert defs.resolve_schedule_def(SCHEDULE_NAME).job_name == JOB_NAME
    assert len(defs.resolve_asset_graph().asset_check_keys) == len(ALL_CHECKS)


def test_a_group_run_is_the_documented_dagster_command(tmp_path):
    """run_distributed_cycle starts each group as `dagster job execute` on the distributed code
    location, with the group's tags, in the interpreter that runs it."""
    import json

    from freshness_pipeline.app.distributed import LAUNCH_TAG, group_run_command

    tags = {**group_run_tags("b00", "b07", cycle_id="c1"), LAUNCH_TAG: "L"}
    argv = group_run_command(tmp_path / "run.yaml", tags)
    assert argv[:5] == [sys.executable, "-m", "dagster", "job", "execute"]
    assert argv[argv.index("-m", 2) + 1] == "freshness_pipeline.distributed_definitions"
    assert argv[argv.index("-j") + 1] == JOB_NAME
    assert argv[argv.index("-c") + 1] == str(tmp_path / "run.yaml")
    assert json.loads(argv[argv.index("--tags") + 1]) == tags
