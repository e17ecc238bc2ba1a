"""Running cycles in-process, as the CLI and the demo do: the same assets and checks as the
Dagster UI, against a persistent instance under the home folder so that CLI runs show in the UI.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
from dagster._core.storage.defs_state.base import set_defs_state_storage

from freshness_pipeline.config import ConfigError, load_config
from freshness_pipeline.graph import build_resources, cycle_graph
from freshness_pipeline.jobs import PLANNING_ASSETS
from freshness_pipeline.partitions import (
    bucket_keys,
    buckets_of_hosts,
    contiguous_ranges,
    hosts_in_buckets,
    range_tags,
    register_hosts,
    registered_hosts,
)
from freshness_pipeline.resources import CycleResource
from freshness_pipeline.seeds import SeedParse, merge_seeds, parse_seeds
from freshness_pipeline.storage import DEFAULT_RETENTION_DAYS, Warehouse

# Where a local instance keeps its runs and events, and its run queue; each deployment adds
# its own concurrency limits (distributed.py has the bucket-group one).
INSTANCE_STORAGE_YAML = """\
storage:
  sqlite:
    base_dir: {storage}
local_artifact_storage:
  module: dagster._core.storage.root
  class: LocalArtifactStorage
  config:
    base_dir: {artifacts}
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
"""

DAGSTER_YAML = (
    "# Written by freshness-pipeline for this home folder; edit freely.\n"
    + INSTANCE_STORAGE_YAML
    + """\
concurrency:
  runs:
    max_concurrent_runs: 4
    tag_concurrency_limits:
      - key: "freshness/cycle"
        limit: 1
      - key: "dagster/partition"
        value: {{applyLimitPerUniqueValue: true}}
        limit: 1
telemetry:
  enabled: false
"""
)


def dagster_home(home: Path) -> Path:
    """``$DAGSTER_HOME`` when set (the user runs `dagster dev` with it), else ``<home>/dagster``."""
    env = os.environ.get("DAGSTER_HOME")
    folder = Path(env) if env else home / "dagster"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "dagster.yaml"
    if not config.exists():
        config.write_text(
            DAGSTER_YAML.format(storage=folder / "storage", artifacts=folder / "artifacts")
        )
    return folder


def open_instance(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(dagster_home(home)))


@dataclass
class CycleOutcome:
    now: datetime
    hosts: list[str]
    runs: int = 0
    planned: int = 0
    fetched: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class CycleFailed(RuntimeError):
    """The pipeline itself failed (not a fetch: those are outcomes)."""


class UnknownHosts(ValueError):
    """``--host`` named hosts nothing was seeded for: the caller's mistake, not the pipeline's."""


def register_seeded_hosts(warehouse: Warehouse, instance: dg.DagsterInstance) -> list[str]:
    return register_hosts(instance, warehouse.hosts_in("seeds"))


def run_cycle(
    home: str | Path | None,
    now: datetime,
    *,
    budget: int | None = None,
    hosts: list[str] | None = None,
    dry_run: bool = False,
    fetch_time_limit_s: float = 0.0,
    instance: dg.DagsterInstance | None = None,
    log_level: str = "WARNING",
    retention_days: float | None = DEFAULT_RETENTION_DAYS,
    fetch_processes: int = 1,
) -> CycleOutcome:
    """One cycle of the whole graph as of ``now``, as few runs as the host selection allows
    (one, unless --host picks a non-contiguous set). The budget is shared across those runs.
    Raises HomeBusy when another cycle or seed load holds the home."""
    warehouse = Warehouse(home)
    with warehouse.exclusive(f"cycle {now.isoformat()}"):
        warehouse.sweep_temp_files()
        outcome = _run_cycle_locked(
            warehouse,
            now,
            budget,
            hosts,
            dry_run,
            fetch_time_limit_s,
            instance,
            log_level,
            fetch_processes,
        )
        if retention_days and not dry_run:
            pruned = warehouse.prune_fetch_log(now - timedelta(days=retention_days))
            if pruned:
                outcome.notes.append(
                    f"pruned {pruned} fetch_log files older than {retention_days:g} days"
                )
        return outcome


def _run_cycle_locked(
    warehouse: Warehouse,
    now: datetime,
    budget: int | None,
    hosts: list[str] | None,
    dry_run: bool,
    fetch_time_limit_s: float,
    instance: dg.DagsterInstance | None,
    log_level: str,
    fetch_processes: int = 1,
) -> CycleOutcome:
    instance = instance or open_instance(warehouse.home)
    try:
        n_buckets = load_config(warehouse.home).host_buckets
    except ConfigError as exc:
        raise CycleFailed(str(exc)) from exc
    if n_buckets:
        known = warehouse.hosts_in("seeds")
    else:
        register_seeded_hosts(warehouse, instance)
        known = registered_hosts(instance)
    wanted = list(dict.fromkeys(h.lower() for h in hosts)) if hosts else known
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        raise UnknownHosts(f"unknown host(s): {', '.join(unknown)} (seed them first)")
    notes: list[str] = []
    if n_buckets and hosts:
        # A bucket is Dagster's unit of work: --host cycles every host sharing its buckets.
        covered = hosts_in_buckets(buckets_of_hosts(wanted, n_buckets), n_buckets, known)
        if len(covered) > len(wanted):
            notes.append(f"host buckets: {len(covered)} hosts cycled for the {len(wanted)} asked")
        wanted = covered
    outcome = CycleOutcome(now=now, hosts=wanted, notes=notes)
    if not wanted:
        outcome.notes.append("no hosts: seed some URLs first (`freshness seed PATH`)")
        return outcome
    if n_buckets:
        # Empty buckets join the run rather than split it: one run plans one budget at once.
        empty = set(bucket_keys(n_buckets)) - set(buckets_of_hosts(known, n_buckets))
        ranges = contiguous_ranges(
            bucket_keys(n_buckets), {*buckets_of_hosts(wanted, n_buckets), *empty}
        )
    else:
        ranges = contiguous_ranges(known, wanted)
    assets, checks = cycle_graph(n_buckets)
    remaining = budget
    selection = PLANNING_ASSETS if dry_run else None
    for start, end in ranges:
        cycle = CycleResource(
            now=now.isoformat(),
            budget=-1 if remaining is None else remaining,
            dry_run=dry_run,
            fetch_time_limit_s=fetch_time_limit_s,
        )
        # Dagster resolves definitions through the defs-state storage of the "current"
        # instance, a context variable that a finished run elsewhere in this process may have
        # left pointing at an instance since collected; name ours.
        with set_defs_state_storage(instance.defs_state_storage):
            result = dg.materialize(
                [*assets, *checks],
                instance=instance,
                resources=build_resources(str(warehouse.home), cycle, fetch_processes),
                tags=range_tags(start, end, bucket="cli"),
                selection=selection,
                raise_on_error=False,
                run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
            )
        outcome.runs += 1
        if not result.success:
            raise CycleFailed(_failure_message(result))
        # The run's own metadata has the counts: re-reading a file per host would cost
        # seconds at ten thousand hosts.
        selected = _run_metadata(result, "revisit_plan").get("selected", 0)
        outcome.planned += selected
        if remaining is not None:
            remaining = max(0, remaining - selected)
        if not dry_run:
            fetched = _run_metadata(result, "fetch_results")
            outcome.fetched += fetched.get("requests_sent", 0)
            for key, n in fetched.items():
                if key.startswith("outcome_"):
                    name = key.removeprefix("outcome_")
                    outcome.outcomes[name] = outcome.outcomes.get(name, 0) + n
    note = warehouse.ensure_views()
    if note:
        outcome.notes.append(note)
    return outcome


def _run_metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, int]:
    """An asset's integer metadata in this run: a range run's output is one materialization
    copied to every partition, so the first one holds the run's totals."""
    for materialization in result.asset_materializations_for_node(asset):
        return {
            key: int(value.value)
            for key, value in materialization.metadata.items()
            if isinstance(value, dg.IntMetadataValue) and value.value is not None
        }
    return {}


def _failure_message(result: dg.ExecuteInProcessResult) -> str:
    for event in result.all_events:
        if event.is_failure and event.step_failure_data is not None:
            error = event.step_failure_data.error
            parts = []
            while error is not None:
                parts.append(
                    error.message.strip().splitlines()[-1] if error.message.strip() else ""
                )
                error = error.cause
            text = " <- ".join(p for p in parts if p) or "unknown error"
            return f"step {event.step_key} failed: {text}"
    return "the cycle run failed"


@dataclass
class SeedLoad:
    parse: SeedParse
    hosts: int = 0
    new_hosts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def load_seeds(home: str | Path | None, data: bytes, *, added_at: datetime) -> SeedLoad:
    """Parse, merge into each host's seeds (idempotent) and register new hosts as partitions."""
    parsed = parse_seeds(data)
    load = SeedLoad(parse=parsed)
    if parsed.fatal:
        return load
    warehouse = Warehouse(home)
    by_host = parsed.rows.partition_by("host", as_dict=True)
    with warehouse.exclusive("seed load"):
        for (host,), rows in by_host.items():
            merged = merge_seeds(warehouse.read("seeds", [host]), rows, added_at=added_at)
            warehouse.write_partition("seeds", host, merged)
    load.hosts = len(by_host)
    load.new_hosts = register_hosts(open_instance(warehouse.home), [h for (h,) in by_host])
    note = warehouse.ensure_views()
    if note:
        load.notes.append(note)
    return load
