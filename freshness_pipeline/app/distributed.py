"""The cycle past one process: host-bucket groups as concurrent runs, steps on Celery workers.

One cycle is one run per group of host buckets (contiguous slices of the bucket keys, carried by
the ``dagster/asset_partition_range_start/_end`` tags), all launched at once. Their steps go to
``dagster_celery.celery_executor``, so any worker on the broker may run any asset of any group.
Groups own disjoint hosts, so concurrent runs never write the same host's files (except for
redirect hand-overs, see docs/distributed.md), and two groups never plan from the same url_state.

Nothing in the base package imports this module, and this module imports ``dagster_celery`` only
where a job is built, so ``pip install freshness-pipeline`` without the ``distributed`` extra
never needs Celery. Deployment pieces:

- ``freshness_pipeline.distributed_definitions``: the code location (``dagster dev -m ...``);
- ``freshness_pipeline.celery_app``: what the workers start (``celery -A ... worker``);
- :func:`run_distributed_cycle`: one cycle from a script or a cron job, one
  ``dagster job execute`` process per group, bypassing the run queue as ``freshness cycle`` does
  (``python -m freshness_pipeline.distributed`` from cron).

The broker and result backend come from ``FRESHNESS_CELERY_BROKER`` and
``FRESHNESS_CELERY_BACKEND`` (default: the broker), read by every process that submits or runs
steps, so one environment configures the run processes and the workers alike.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg

from freshness_pipeline.app.runner import INSTANCE_STORAGE_YAML, dagster_home
from freshness_pipeline.config import load_config
from freshness_pipeline.defs.assets.common import GROUP
from freshness_pipeline.defs.assets.retention import NAME as RETENTION
from freshness_pipeline.defs.graph import build_resources, cycle_graph
from freshness_pipeline.defs.partitions import HOST_BUCKET_TAG, bucket_keys, range_tags
from freshness_pipeline.defs.schedules import CRON_ENV, DEFAULT_CRON, cycle_run_config
from freshness_pipeline.warehouse.storage import DEFAULT_RETENTION_DAYS, Warehouse

BROKER_ENV = "FRESHNESS_CELERY_BROKER"
BACKEND_ENV = "FRESHNESS_CELERY_BACKEND"
GROUPS_ENV = "FRESHNESS_BUCKET_GROUPS"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
DEFAULT_GROUPS = 2

JOB_NAME = "freshness_cycle_celery"
SCHEDULE_NAME = "freshness_cycle_groups_schedule"
# Every group run of one cycle carries the same value: how a cycle's runs are found again.
CYCLE_ID_TAG = "freshness/cycle_id"
# Not freshness/cycle: the single-machine dagster.yaml allows one run with that tag at a time,
# which would queue a cycle's group runs one after the other. Group runs are limited per group
# instead (freshness/host_bucket, one run per unique value; see docs/distributed.md).
GROUP_RUN_TAG = "freshness/group_run"
# One value per run_distributed_cycle call, to find its runs again.
LAUNCH_TAG = "freshness/launch_id"

# The instance of a deployment that launches group runs through the daemon (the schedule, the
# UI): one run per bucket group at a time, however many groups run side by side. The
# single-machine file's `freshness/cycle` limit of 1 would queue a cycle's groups one after the
# other, and this job does not carry that tag. Across machines, `storage` becomes postgres
# (docs/distributed.md); the limits stay.
DISTRIBUTED_DAGSTER_YAML = (
    INSTANCE_STORAGE_YAML
    + """\
concurrency:
  runs:
    max_concurrent_runs: {max_runs}
    tag_concurrency_limits:
      - key: "freshness/host_bucket"
        value: {{applyLimitPerUniqueValue: true}}
        limit: 1
telemetry:
  enabled: false
"""
)


def distributed_dagster_yaml(folder: Path, n_groups: int = DEFAULT_GROUPS) -> str:
    """The instance configuration above for an instance folder, room for every group's run."""
    return DISTRIBUTED_DAGSTER_YAML.format(
        storage=folder / "storage", artifacts=folder / "artifacts", max_runs=max(1, n_groups)
    )


# Settings the executor passes to the Celery app it submits through. A worker app must agree on
# queues and priorities, which make_app fixes for both sides.
CELERY_CONFIG_SOURCE: dict[str, object] = {"broker_connection_retry_on_startup": True}


def broker_urls(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(broker, backend) for the worker app, from the same variables as the executor."""
    env = os.environ if env is None else env
    broker = env.get(BROKER_ENV) or DEFAULT_BROKER
    return broker, env.get(BACKEND_ENV) or broker


def bucket_groups(n_buckets: int, n_groups: int) -> list[tuple[str, str]]:
    """``n_groups`` contiguous (first, last) slices of the bucket keys, sizes differing by at
    most one. Contiguous because a run selects its partitions as one key range."""
    if n_buckets < 1:
        raise ValueError("bucket groups need host_buckets >= 1 in freshness.toml")
    if not 1 <= n_groups <= n_buckets:
        raise ValueError(f"groups must be 1..{n_buckets} (the bucket count), not {n_groups}")
    keys = bucket_keys(n_buckets)
    size, extra = divmod(n_buckets, n_groups)
    groups: list[tuple[str, str]] = []
    start = 0
    for i in range(n_groups):
        end = start + size + (1 if i < extra else 0)
        groups.append((keys[start], keys[end - 1]))
        start = end
    return groups


def group_label(first: str, last: str) -> str:
    return first if first == last else f"{first}...{last}"


def group_run_tags(first: str, last: str, cycle_id: str) -> dict[str, str]:
    """A group run's tags: its bucket range, its group (the per-group run limit keys on
    ``freshness/host_bucket``) and its cycle."""
    return {
        **range_tags(first, last, bucket=group_label(first, last)),
        CYCLE_ID_TAG: cycle_id,
        GROUP_RUN_TAG: "true",
    }


def celery_executor_def() -> dg.ExecutorDefinition:
    """The stock celery executor with broker and backend read from the environment when a run
    starts, so the definitions carry no address."""
    from dagster_celery import celery_executor  # the `distributed` extra

    def source(name: str) -> object:
        return {"env": name} if os.environ.get(name) else None

    broker = source(BROKER_ENV) or DEFAULT_BROKER
    return celery_executor.configured(
        {
            "broker": broker,
            "backend": source(BACKEND_ENV) or broker,
            "config_source": CELERY_CONFIG_SOURCE,
        },
        name="celery_from_env",
    )


def build_group_schedule(host_buckets: int, n_groups: int) -> dg.ScheduleDefinition:
    """Like the single-machine schedule, but each tick asks for one run per bucket group, with
    the tick as every run's ``now``; the daemon launches them side by side within the run
    queue's limits."""
    groups = bucket_groups(host_buckets, n_groups)

    @dg.schedule(
        name=SCHEDULE_NAME,
        job_name=JOB_NAME,
        cron_schedule=os.environ.get(CRON_ENV, DEFAULT_CRON),
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )
    def freshness_cycle_groups_schedule(context: dg.ScheduleEvaluationContext):
        tick = context.scheduled_execution_time.isoformat()
        return [
            dg.RunRequest(
                run_key=f"cycle-{tick}-{group_label(first, last)}",
                run_config=cycle_run_config(tick),
                tags=group_run_tags(first, last, cycle_id=tick),
            )
            for first, last in groups
        ]

    return freshness_cycle_groups_schedule


def _host_buckets(home: str, host_buckets: int | None) -> int:
    if host_buckets is not None:
        return host_buckets
    n = load_config(Warehouse(home or None).home).host_buckets
    if not n:
        raise ValueError(
            "the distributed cycle runs host buckets: set [partitioning] host_buckets in "
            "freshness.toml (a per-host partition per run would not split into groups)"
        )
    return n


def build_distributed_definitions(
    home: str = "", host_buckets: int | None = None, n_groups: int | None = None
) -> dg.Definitions:
    """The cycle's assets and checks over host buckets, with the celery job and the group
    schedule. ``home`` empty: ``$FRESHNESS_HOME`` in every process, which is how a deployment
    points its run processes and workers at one warehouse."""
    n_buckets = _host_buckets(home, host_buckets)
    groups = n_groups or int(os.environ.get(GROUPS_ENV, DEFAULT_GROUPS))
    assets, checks = cycle_graph(n_buckets)
    # Not the retention step: it prunes the whole home, and a cycle's group runs go side by
    # side, each still writing its own hosts' files while another would rewrite them.
    job = dg.define_asset_job(
        JOB_NAME,
        selection=dg.AssetSelection.groups(GROUP) - dg.AssetSelection.assets(RETENTION),
        description="One crawl cycle for a group of host buckets, steps on Celery workers.",
        executor_def=celery_executor_def(),
    )
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[job],
        schedules=[build_group_schedule(n_buckets, min(groups, n_buckets))],
        resources=build_resources(home),
    )


@dataclass
class GroupRun:
    first: str
    last: str
    run_id: str = ""
    success: bool = False
    wall_s: float = 0.0  # the `dagster job execute` process, start-up included
    run_s: float = 0.0  # the run itself, from the instance's start and end times
    step_workers: dict[str, str] = field(default_factory=dict)
    error: str = ""

    @property
    def label(self) -> str:
        return group_label(self.first, self.last)


@dataclass
class DistributedCycle:
    now: datetime
    runs: list[GroupRun]
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def success(self) -> bool:
        return all(r.success for r in self.runs)


def step_workers(instance: dg.DagsterInstance, run_id: str) -> dict[str, str]:
    """Step key -> the Celery worker that ran it, from the engine event each task writes when
    it starts ("Executing steps ... in celery worker")."""
    found: dict[str, str] = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        event = record.dagster_event
        if event is None or record.step_key is None:
            continue
        data = event.engine_event_data
        worker = data.metadata.get("Celery worker") if data and data.metadata else None
        if worker is not None:
            found[record.step_key] = str(getattr(worker, "value", worker))
    return found


def group_run_command(config_path: Path, tags: Mapping[str, str]) -> list[str]:
    """The documented CLI for one group run: it executes the run in its own process (the run
    coordinator, submitting steps and polling the broker), as a run launcher would."""
    return [
        sys.executable,
        "-m",
        "dagster",
        "job",
        "execute",
        "-m",
        "freshness_pipeline.distributed_definitions",
        "-j",
        JOB_NAME,
        "-c",
        str(config_path),
        "--tags",
        json.dumps(dict(tags)),
    ]


def run_distributed_cycle(
    home: str | Path,
    now: datetime,
    *,
    n_groups: int = DEFAULT_GROUPS,
    dagster_home_dir: str | Path | None = None,
    budget_per_group: int | None = None,
    log_level: str = "WARNING",
    retention_days: float | None = DEFAULT_RETENTION_DAYS,
    timeout_s: float = 3600.0,
) -> DistributedCycle:
    """One cycle as ``n_groups`` concurrent runs of the celery job, each in its own
    ``dagster job execute`` process, all started before any is awaited.

    One process per run, not one thread: dagster's run setup reconfigures ``logging`` while
    another run's event handler holds a handler lock, and two runs in one process deadlock.

    The instance is the one ``freshness cycle`` uses (``$DAGSTER_HOME``, else
    ``<home>/dagster``) unless ``dagster_home_dir`` names another: sqlite on one machine,
    Postgres across machines. The run processes open it through ``DAGSTER_HOME``, the workers
    from the reference each task carries. A budget cannot be shared between runs that plan at
    the same time, so there is none, or one per group. The home's writer lock keeps ``freshness cycle`` out on this
    machine; across machines only the run queue's per-group limit protects a group.
    """
    warehouse = Warehouse(home)
    instance_dir = Path(dagster_home_dir) if dagster_home_dir else dagster_home(warehouse.home)
    n_buckets = _host_buckets(str(warehouse.home), None)
    groups = bucket_groups(n_buckets, n_groups)
    run_config = cycle_run_config(
        now.isoformat(), -1 if budget_per_group is None else budget_per_group
    )
    run_config["loggers"] = {"console": {"config": {"log_level": log_level}}}
    cycle_id = now.isoformat()
    launch_id = uuid.uuid4().hex
    env = {
        **os.environ,
        "FRESHNESS_HOME": str(warehouse.home),
        "DAGSTER_HOME": str(instance_dir),
        GROUPS_ENV: str(n_groups),
    }
    with (
        warehouse.exclusive(f"distributed cycle {cycle_id}"),
        tempfile.TemporaryDirectory(prefix="group-runs-") as scratch,
    ):
        warehouse.sweep_temp_files()
        config_path = Path(scratch) / "run_config.yaml"  # JSON is YAML
        config_path.write_text(json.dumps(run_config))
        started = time.perf_counter()
        launched: list[tuple[GroupRun, subprocess.Popen, Path]] = []
        try:
            for first, last in groups:
                tags = {**group_run_tags(first, last, cycle_id), LAUNCH_TAG: launch_id}
                output = Path(scratch) / f"{group_label(first, last)}.log"
                with output.open("wb") as out:
                    proc = subprocess.Popen(
                        group_run_command(config_path, tags),
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                launched.append((GroupRun(first, last), proc, output))
            _wait_all(launched, started, timeout_s)
        finally:
            for _, proc, _ in launched:  # interrupted: the CLI cancels its run on SIGTERM
                if proc.poll() is None:
                    proc.terminate()
                    proc.wait()
        runs = [run for run, _, _ in launched]
        with dg.DagsterInstance.from_config(str(instance_dir)) as instance:
            for run, _, output in launched:
                _fill_run(run, instance, launch_id, output)
        cycle = DistributedCycle(now=now, runs=runs, wall_s=time.perf_counter() - started)
        if cycle.success and retention_days:
            pruned = warehouse.prune_fetch_log(now - timedelta(days=retention_days))
            if pruned:
                cycle.notes.append(f"pruned {pruned} fetch_log files")
        note = warehouse.ensure_views()
        if note:
            cycle.notes.append(note)
    return cycle


def _wait_all(
    launched: list[tuple[GroupRun, subprocess.Popen, Path]], started: float, timeout_s: float
) -> None:
    pending = list(launched)
    while pending:
        for item in list(pending):
            run, proc, _ = item
            elapsed = time.perf_counter() - started
            if proc.poll() is not None or elapsed > timeout_s:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                    run.error = f"no result within {timeout_s:g} s"
                run.wall_s = elapsed
                pending.remove(item)
        time.sleep(0.1)


def _fill_run(run: GroupRun, instance: dg.DagsterInstance, launch_id: str, output: Path) -> None:
    """Status, id and workers of a finished group run, from the instance (the CLI's exit code
    says nothing about which run it made)."""
    records = instance.get_run_records(
        dg.RunsFilter(tags={LAUNCH_TAG: launch_id, HOST_BUCKET_TAG: run.label}), limit=1
    )
    if records:
        record = records[0]
        dagster_run = record.dagster_run
        run.run_id = dagster_run.run_id
        if record.start_time and record.end_time:
            run.run_s = record.end_time - record.start_time
        run.success = dagster_run.status == dg.DagsterRunStatus.SUCCESS
        run.step_workers = step_workers(instance, run.run_id)
        if not run.success and not run.error:
            run.error = _first_failure(instance, run.run_id)
    if not run.success and not run.error:
        tail = output.read_text(errors="replace").strip().splitlines()[-5:]
        run.error = "the run did not start: " + " | ".join(tail)


def _first_failure(instance: dg.DagsterInstance, run_id: str) -> str:
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or not event.is_failure:
            continue
        if event.step_failure_data is not None:
            error = event.step_failure_data.error
            message = error.message.strip().splitlines()[-1] if error and error.message else ""
            return f"step {event.step_key} failed: {message or 'unknown error'}"
        return event.message or "the run failed"
    return "the run failed"
