"""One distributed cycle from a script or a cron job: one ``dagster job execute`` process per
group of host buckets, all started before any is awaited, bypassing the run queue as
``freshness cycle`` does (``python -m freshness_pipeline.distributed`` from cron). The code
location and its job, schedule and executor are ``defs.distributed``'s.
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

from freshness_pipeline.app.runner import failure_message
from freshness_pipeline.defs.distributed import (
    DEFAULT_GROUPS,
    GROUPS_ENV,
    JOB_NAME,
    bucket_groups,
    configured_host_buckets,
    group_label,
    group_run_tags,
)
from freshness_pipeline.defs.instance import dagster_home
from freshness_pipeline.defs.partitions import HOST_BUCKET_TAG, LAUNCH_TAG
from freshness_pipeline.defs.schedules import cycle_run_config
from freshness_pipeline.warehouse.storage import DEFAULT_RETENTION_DAYS, Warehouse
from freshness_pipeline.warehouse.unrecorded import forget_unrecorded_cycle


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
    n_buckets = configured_host_buckets(str(warehouse.home), None)
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
        if not cycle.success:
            # what a failed group fetched that its url_state never took in would be recorded
            # again by the next cycle (warehouse/unrecorded.py)
            forgotten = forget_unrecorded_cycle(warehouse, now)
            if forgotten:
                cycle.notes.append(
                    f"what failed groups fetched from {len(forgotten)} hosts is taken back (the "
                    "next cycle fetches it again)"
                )
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
            run.error = failure_message(
                (r.dagster_event for r in instance.all_logs(run.run_id) if r.dagster_event),
                "the run failed",
            )
    if not run.success and not run.error:
        tail = output.read_text(errors="replace").strip().splitlines()[-5:]
        run.error = "the run did not start: " + " | ".join(tail)
