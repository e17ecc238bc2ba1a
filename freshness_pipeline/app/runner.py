"""Running cycles in-process, as the CLI and the demo do: the same assets and checks as the
Dagster UI, against a persistent instance under the home folder so that CLI runs show in the UI.

A run executes with ``dg.execute_job`` rather than ``dg.materialize``: both run the steps in this
process, but ``materialize`` keeps every step's output in memory until the run ends (to return
it), which at a million URLs is every table of the cycle at once; here each output goes to the
IO manager and is let go, and the next step reads it back from the warehouse.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import polars as pl
from dagster._core.storage.defs_state.base import set_defs_state_storage

from freshness_pipeline.app.host_names import host_key_of, unknown_hosts_message
from freshness_pipeline.app.undo import SNAPSHOT_NOTE
from freshness_pipeline.config import ConfigError, PipelineConfig, load_config
from freshness_pipeline.defs.assets.common import HELD_BACK
from freshness_pipeline.defs.instance import dagster_home, open_instance, shared_instance_note
from freshness_pipeline.defs.instance_upkeep import prune_instance
from freshness_pipeline.defs.jobs import CYCLE_TAG
from freshness_pipeline.defs.partitions import (
    HOST_BUCKET_TAG,
    HOSTS_PARTITIONS_NAME,
    Partitioning,
    bucket_index,
    bucket_keys,
    buckets_of_hosts,
    choose_partitioning,
    contiguous_ranges,
    home_partitioning,
    hosts_tag,
    range_tags,
    register_hosts,
    registered_hosts,
)
from freshness_pipeline.stages.candidates import normalization_rules
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.retention import RetentionSummary
from freshness_pipeline.warehouse.seeds import SeedParse, merge_seeds, parse_seeds
from freshness_pipeline.warehouse.storage import DEFAULT_RETENTION_DAYS, Warehouse
from freshness_pipeline.warehouse.undo import keep_undo_point
from freshness_pipeline.warehouse.unrecorded import forget_unrecorded_cycle


@dataclass
class CycleOutcome:
    now: datetime
    hosts: list[str]
    runs: int = 0
    planned: int = 0
    fetched: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    partitioning: str = ""
    #: URLs not planned or not fetched, by what held them back (robots.txt, the network
    #: allow-list, Retry-After, a circuit breaker, the time limit)
    held_back: dict[str, int] = field(default_factory=dict)
    #: what discovery read and found (url_inventory's run totals: sitemap files, feeds, URLs
    #: listed, new URLs, problems); empty on a dry run, which reads nothing
    discovery: dict[str, int] = field(default_factory=dict)
    #: hosts whose newest cycle was at this very ``now`` before this one
    repeated: int = 0


class CycleFailed(RuntimeError):
    """The pipeline itself failed (not a fetch: those are outcomes)."""

    label = "cycle failed"
    exit_code = 1


class CycleInterrupted(CycleFailed):
    """Ctrl-C or SIGTERM stopped the run (Dagster raises its interruption in the step that was
    running): 130, as a shell reports a command that SIGINT ended."""

    label = "cycle interrupted"
    exit_code = 130


#: The file that marks a home as the demo's: `freshness demo` resets such a home on every run,
#: so `freshness seed` refuses it (a user's seeds would go with the next demo).
DEMO_MARKER = ".freshness-demo"
# what a CLI cycle writes into the writer lock while it runs: "cycle <its now> (pid N)", or
# "distributed cycle <its now> (pid N)"
_DEAD_CYCLE = re.compile(r"^(?:distributed )?cycle (\S+) \(pid")


class UnreadableConfig(CycleFailed):
    """``freshness.toml`` cannot be read or says something invalid: the user's input, so the
    CLI exits 2 rather than 1, and nothing was run."""


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
    undo_point: bool = False,
    now_given: bool = True,
) -> CycleOutcome:
    """One cycle of the whole graph as of ``now``, as few runs as the host selection allows
    (one, unless --host picks hosts that are not one contiguous stretch of partitions). The
    budget is shared across those runs. Raises HomeBusy when another cycle or seed load holds
    the home. ``undo_point``: snapshot the home first, for `freshness undo` (warehouse/undo.py).
    ``now_given``: False when ``now`` is the clock's because the user gave no --now, so that
    what the cycle says about its time names no flag they did not pass.
    """
    warehouse = Warehouse(home)
    with warehouse.exclusive(f"cycle {now.isoformat()}"):
        warehouse.sweep_temp_files()
        kept = keep_undo_point(warehouse, now) if undo_point else None
        with contextlib.ExitStack() as opened:
            if instance is None:  # ours to close: its open databases and their WAL files
                instance = opened.enter_context(open_instance(warehouse.home))
            interrupted = interrupted_note(warehouse, instance)
            try:
                config = load_config(warehouse.home)
                pruned_runs = prune_instance(instance, config.keep_runs_days)
            except ConfigError as exc:
                raise UnreadableConfig(str(exc)) from exc
            try:
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
                    now_given=now_given,
                )
            except CycleFailed as failed:
                forgotten = [] if dry_run else forget_unrecorded_cycle(warehouse, now)
                if not forgotten:
                    raise
                raise type(failed)(
                    f"{failed}; what it fetched from {len(forgotten)} hosts before failing is "
                    "taken back (the next cycle fetches it again)"
                ) from failed
        if retention_days and not dry_run:
            pruned = warehouse.prune_fetch_log(now - timedelta(days=retention_days))
            if pruned:
                outcome.notes.append(
                    f"pruned {pruned} fetch_log files older than {retention_days:g} days"
                )
        if pruned_runs:
            outcome.notes.append(pruned_runs)
        if kept is not None:
            outcome.notes.append(SNAPSHOT_NOTE)
        if interrupted:
            outcome.notes.insert(0, interrupted)
        shared = shared_instance_note(warehouse.home)
        if shared:
            outcome.notes.append(shared)
        return outcome


def interrupted_note(warehouse: Warehouse, instance: dg.DagsterInstance) -> str | None:
    """What to tell of work that died holding the home (a cycle killed mid-fetch): its fetches
    were never recorded, so this cycle makes them again, and the runs it started from the CLI,
    which would say 'started' for ever, are marked failed (under the writer lock no other CLI
    run of this home is alive; runs the UI or a schedule launched are left alone)."""
    if warehouse.interrupted is None:
        return None
    cli_runs = dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED], tags={HOST_BUCKET_TAG: "cli"})
    dead = instance.get_runs(cli_runs)
    for run in dead:
        instance.report_run_failed(run, "interrupted: its process died holding the home")
    said = f"the last {warehouse.interrupted} did not finish (killed?)"
    cycle = _DEAD_CYCLE.match(warehouse.interrupted)
    if cycle is not None:
        # what its fetch step wrote that url_state never took in is taken back, or the same
        # changes would be recorded twice
        with contextlib.suppress(ValueError):
            forget_unrecorded_cycle(warehouse, datetime.fromisoformat(cycle.group(1)))
        said += ": nothing it fetched was recorded, and this cycle fetches again what is due"
    if dead:
        said += f"; {len(dead)} Dagster run(s) it left 'started' marked failed"
    return said


def cycle_ranges(
    partitioning: Partitioning, order: list[str], known: list[str], wanted: list[str]
) -> list[tuple[str, str]]:
    """The fewest partition ranges whose runs cover the wanted hosts (``order``: the partition
    keys in order; ``known``: every seeded host). Buckets hold other hosts too: a run over some
    of the hosts is narrowed to them by its tag."""
    n = partitioning.host_buckets
    if not n:
        return contiguous_ranges(order, wanted)
    buckets = set(buckets_of_hosts(wanted, n))
    if set(wanted) == set(known):
        # Empty buckets join the run rather than split it: one run plans one budget at once.
        buckets |= set(bucket_keys(n)) - set(buckets_of_hosts(known, n))
    return contiguous_ranges(bucket_keys(n), buckets)


def _run_cycle_locked(
    warehouse: Warehouse,
    now: datetime,
    budget: int | None,
    hosts: list[str] | None,
    dry_run: bool,
    fetch_time_limit_s: float,
    instance: dg.DagsterInstance,
    log_level: str,
    fetch_processes: int = 1,
    *,
    now_given: bool = True,
) -> CycleOutcome:
    known = warehouse.hosts_in("seeds")
    try:
        partitioning = home_partitioning(warehouse, known)
    except ConfigError as exc:
        raise CycleFailed(str(exc)) from exc
    n_buckets = partitioning.host_buckets
    order = known
    if not n_buckets:
        register_hosts(instance, known)
        order = registered_hosts(instance)
    wanted = list(dict.fromkeys(host_key_of(h) for h in hosts)) if hosts else known
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        raise UnknownHosts(
            f"unknown host(s): {unknown_hosts_message(unknown, known)}; seed them first, or "
            "see `freshness hosts`"
        )
    outcome = CycleOutcome(now=now, hosts=wanted, partitioning=partitioning.describe())
    if not wanted:
        outcome.notes.append("no hosts: seed some URLs first (`freshness seed PATH`)")
        return outcome
    newest = warehouse.newest_cycles()
    behind = backwards_note(newest, wanted, now, now_given=now_given)
    if behind:
        outcome.notes.append(behind)
    outcome.repeated = sum(1 for h in wanted if newest.get(h) == now)
    if outcome.repeated:
        outcome.notes.append(repeat_note(outcome.repeated, len(wanted), now))
    # A bucket is Dagster's unit of work; --host narrows its run to the hosts asked for.
    narrowed = hosts_tag(wanted) if hosts and n_buckets else {}
    remaining = budget
    # each run's last step prunes the home (assets.retention); its totals are summed here
    retention = RetentionSummary()
    for start, end in cycle_ranges(partitioning, order, known, wanted):
        cycle = {
            "now": now.isoformat(),
            "budget": -1 if remaining is None else remaining,
            "dry_run": dry_run,
            "fetch_time_limit_s": fetch_time_limit_s,
        }
        result = execute_cycle_run(
            warehouse.home,
            partitioning,
            instance,
            run_config={
                "resources": {"cycle": {"config": cycle}},
                "loggers": {"console": {"config": {"log_level": log_level}}},
            },
            tags={**range_tags(start, end, bucket="cli"), **narrowed},
            planning_only=dry_run,
            fetch_processes=fetch_processes,
        )
        outcome.runs += 1
        if not result.success:
            step = interrupted_step(result.all_events)
            if step is not None:
                raise CycleInterrupted(f"stopped by Ctrl-C or SIGTERM in {step}")
            raise CycleFailed(failure_message(result.all_events, "the cycle run failed"))
        # The run's own metadata has the counts: re-reading a file per host would cost
        # seconds at ten thousand hosts.
        for asset in ("url_candidates", *(() if dry_run else ("fetch_results",))):
            for key, n in _run_metadata(result, asset).items():
                if key.startswith(HELD_BACK) and n:
                    reason = key.removeprefix(HELD_BACK)
                    outcome.held_back[reason] = outcome.held_back.get(reason, 0) + n
        selected = _run_metadata(result, "revisit_plan").get("selected", 0)
        outcome.planned += selected
        if remaining is not None:
            remaining = max(0, remaining - selected)
        if not dry_run:
            for key, n in _run_metadata(result, "url_inventory").items():
                outcome.discovery[key] = outcome.discovery.get(key, 0) + n
            fetched = _run_metadata(result, "fetch_results")
            outcome.fetched += fetched.get("requests_sent", 0)
            # a page read again under a changed extractor is 'new' in fetch_results (its
            # fingerprint starts over) and 'reextracted' in page_versions: say the latter
            reread = _run_metadata(result, "page_versions").get("outcome_reextracted", 0)
            fetched["outcome_new"] = fetched.get("outcome_new", 0) - reread
            fetched["outcome_reextracted"] = reread
            for key, n in fetched.items():
                if key.startswith("outcome_") and n > 0:
                    name = key.removeprefix("outcome_")
                    outcome.outcomes[name] = outcome.outcomes.get(name, 0) + n
            retention.add(RetentionSummary.from_counts(_run_metadata(result, "retention")))
    if not dry_run:  # (each run's url_state step recorded the cycle for its hosts)
        note = retention.note()
        if note:
            outcome.notes.append(note)
    note = warehouse.ensure_views()
    if note:
        outcome.notes.append(note)
    return outcome


def repeat_note(repeated: int, hosts: int, now: datetime) -> str:
    """A cycle at the very time of the last one finds nothing due that the last did not
    fetch: without a word it planned nothing and its held-back line read as the reason
    (found by a newcomer)."""
    return (
        f"a cycle as of {now.isoformat()} already ran for {repeated} of the {hosts} hosts: what "
        "was due then was planned then, so this one plans only what that one left; a later "
        "--now plans what has come due since"
    )


def backwards_note(
    newest: dict[str, datetime], hosts: list[str], now: datetime, *, now_given: bool = True
) -> str | None:
    """A cycle whose ``now`` is before a host's newest cycle re-plans that host from a state
    that already knows the later fetches: right for a deliberate backfill, a mistake when a
    wall-clock run lands on a home kept on a simulated clock (or the reverse). Say which, and
    whose time it was: "--now <t>" to a user who gave no --now sent them looking for a flag
    they had not passed (found by a newcomer)."""
    later = [h for h in hosts if h in newest and newest[h] > now]
    if not later:
        return None
    latest = max(newest[h] for h in later)
    when = (
        f"--now {now.isoformat()}"
        if now_given
        else f"this cycle's time, the clock's {now.isoformat()} (no --now given),"
    )
    return (
        f"{when} is before the newest cycle of {len(later)} of the "
        f"{len(hosts)} hosts (up to {latest.isoformat()}): their state already holds the later "
        "fetches, so this re-plans the past (a backfill); if that is not meant, pass --now "
        "after it or use another home"
    )


def execute_cycle_run(
    home: Path,
    partitioning: Partitioning,
    instance: dg.DagsterInstance,
    *,
    run_config: dict,
    tags: dict[str, str],
    planning_only: bool = False,
    fetch_processes: int = 1,
) -> dg.JobExecutionResult:
    """One run of the cycle job (graph.cycle_job) in this process; the job's own tags
    (``freshness/cycle``) are added, so a CLI run reads like a scheduled one in the UI."""
    job = dg.build_reconstructable_job(
        "freshness_pipeline.defs.graph",
        "cycle_job",
        reconstructable_kwargs={
            "home": str(home),
            "host_buckets": partitioning.host_buckets,
            "fetch_processes": fetch_processes,
            "planning_only": planning_only,
        },
    )
    # Dagster resolves definitions through the defs-state storage of the "current" instance, a
    # context variable that a finished run elsewhere in this process may have left pointing at
    # an instance since collected; name ours.
    with set_defs_state_storage(instance.defs_state_storage):
        return dg.execute_job(
            job, instance, run_config=run_config, tags={CYCLE_TAG: "true", **tags}
        )


def _run_metadata(result: dg.JobExecutionResult, asset: str) -> dict[str, int]:
    """An asset's integer metadata in this run: its one observation per run holds the run's
    totals (assets.common)."""
    key = dg.AssetKey(asset)
    for event in result.get_asset_observation_events():
        observation = event.asset_observation_data.asset_observation
        if observation.asset_key == key:
            return {
                name: int(value.value)
                for name, value in observation.metadata.items()
                if isinstance(value, dg.IntMetadataValue) and value.value is not None
            }
    return {}


def interrupted_step(events: Iterable[dg.DagsterEvent]) -> str | None:
    """The step Dagster stopped on SIGINT or SIGTERM (it raises its interruption in the step
    that was running), if that is how the run failed."""
    for event in events:
        data = event.step_failure_data if event.is_step_failure else None
        error = data.error if data is not None else None
        if error is not None and error.cls_name == "DagsterExecutionInterruptedError":
            return event.step_key
    return None


def failure_message(events: Iterable[dg.DagsterEvent], fallback: str) -> str:
    """What the first failure among ``events`` says: a failed step's error and its causes, or
    a run's own failure (one that no step raised: its executor or launcher failed), which
    carries no step data, so reading that raises instead of telling what went wrong."""
    for event in events:
        if not event.is_failure:
            continue
        if not event.is_step_failure or event.step_failure_data is None:
            return event.message or fallback
        error = event.step_failure_data.error
        parts = []
        while error is not None:
            parts.append(error.message.strip().splitlines()[-1] if error.message.strip() else "")
            error = error.cause
        text = " <- ".join(p for p in parts if p) or "unknown error"
        return f"step {event.step_key} failed: {text}"
    return fallback


@dataclass
class SeedLoad:
    parse: SeedParse
    hosts: int = 0
    new_hosts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    partitioning: str = ""


def load_seeds(home: str | Path | None, data: bytes, *, added_at: datetime) -> SeedLoad:
    """Parse, merge into the hosts' seeds (idempotent) and register new hosts as partitions when
    the home is partitioned per host; say so when the load moved it into host buckets."""
    parsed = parse_seeds(data)
    load = SeedLoad(parse=parsed, notes=list(parsed.notes))
    if parsed.fatal:
        return load
    warehouse = Warehouse(home)
    try:
        config: PipelineConfig | None = load_config(warehouse.home)
    except ConfigError as exc:
        load.notes.append(f"{exc}: the seeds are loaded, nothing else is decided from it")
        config = None
    with warehouse.exclusive("seed load"):
        before = warehouse.hosts_in("seeds")
        hosts = sorted(set(parsed.rows["host"].to_list()))
        again = sorted(set(hosts) & set(before))
        merged = merge_seeds(warehouse.read("seeds", again), parsed.rows, added_at=added_at)
        warehouse.write_partitions("seeds", hosts, merged)
        if config is not None:
            warm_normalization_cache(warehouse, parsed.rows, config, again)
    load.hosts = len(hosts)
    load.new_hosts = sorted(set(hosts) - set(before))
    # The instance's configuration (run queue, concurrency limits) is in place before anyone
    # starts `dagster dev` on the home, whether or not there are partitions to register.
    dagster_home(warehouse.home)
    if config is None:
        with open_instance(warehouse.home) as instance:
            register_hosts(instance, load.new_hosts)
    else:
        was = choose_partitioning(config.host_buckets, len(before))
        now = choose_partitioning(config.host_buckets, len(set(before) | set(hosts)))
        load.partitioning = now.describe()
        if not now.host_buckets:
            with open_instance(warehouse.home) as instance:
                register_hosts(instance, load.new_hosts)
        elif was.host_buckets != now.host_buckets and before:
            load.notes.append(
                f"Dagster partitions are now {now.describe()}: reload the code location (or "
                "restart `dagster dev`) so the UI shows them; [partitioning] host_buckets in "
                "freshness.toml pins a choice"
            )
    note = warehouse.ensure_views()
    if note:
        load.notes.append(note)
    shared = shared_instance_note(warehouse.home)
    if shared:
        load.notes.append(shared)
    return load


def warm_normalization_cache(
    warehouse: Warehouse, rows: pl.DataFrame, config: PipelineConfig, seeded_before: list[str]
) -> None:
    """Leave each seed's canonical form where url_candidates looks it up (url_canonical), so
    that the first cycle over a large seed load does not normalize it all again: a seed is
    stored normalized, and normalization is idempotent, so under the default rules a seed is
    its own canonical form. Hosts with their own strip_params normalize otherwise and are
    left to the cycle."""
    base, per_host = normalization_rules(config)
    own = rows.filter(~pl.col("host").is_in(list(per_host)))
    if not own.height:
        return
    fresh = own.select(
        "host",
        "url",
        pl.col("url").alias("canonical"),
        pl.col("host").alias("canonical_host"),
        pl.lit(None, dtype=pl.String).alias("error"),
        pl.lit(base).alias("rules"),
    )
    hosts = sorted(set(own["host"].to_list()))
    earlier = set(seeded_before) & set(hosts)  # their cache may hold other URLs: keep them
    if earlier:
        cached = warehouse.read("url_canonical", sorted(earlier))
        fresh = pl.concat(
            [cached, fresh.join(cached.select("host", "url"), on=["host", "url"], how="anti")],
            how="vertical_relaxed",
        )
    warehouse.write_partitions("url_canonical", hosts, tables.conform("url_canonical", fresh))


def host_summary(home: str | Path | None) -> pl.DataFrame:
    """One row per seeded host: its URLs by every status, its Dagster partition (its own, or
    its bucket) and its newest cycle; what `freshness hosts` lists. Every status has its
    column, so that they add up to ``urls``: "urls 68, active 62, gone 0" left a newcomer
    wondering where six had gone (blocked by robots.txt, and not fetched yet)."""
    warehouse = Warehouse(home)
    seeded = warehouse.hosts_in("seeds")
    partitioning = home_partitioning(warehouse, seeded)
    n = partitioning.host_buckets
    seeds = warehouse.read("seeds", seeded, columns=["host"]).group_by("host").len("seeds")
    state = (
        warehouse.read("url_state", seeded, columns=["host", "status"])
        .group_by("host")
        .agg(
            pl.len().alias("urls"),
            *[(pl.col("status") == status).sum().alias(status) for status in tables.URL_STATUSES],
        )
    )
    newest = warehouse.newest_cycles()
    frame = pl.DataFrame({"host": seeded}, schema={"host": pl.String})
    return (
        frame.join(seeds, on="host", how="left")
        .join(state, on="host", how="left")
        .with_columns(
            pl.col("urls", *tables.URL_STATUSES).fill_null(0),
            partition=pl.Series(
                [bucket_keys(n)[bucket_index(h, n)] if n else h for h in seeded],
                dtype=pl.String,
            ),
            newest_cycle=pl.Series([newest.get(h) for h in seeded], dtype=tables.UTC_TIME),
        )
    )


def retire_host(home: str | Path | None, host: str) -> list[str]:
    """Remove a host from the crawl: every table's files for it, and its Dagster partition
    when the home is partitioned per host (a bucket simply no longer holds it). Raises
    UnknownHosts for a host that is not seeded, HomeBusy when a cycle holds the home."""
    warehouse = Warehouse(home)
    key = host.lower()
    with warehouse.exclusive(f"retire {key}"):
        if key not in warehouse.hosts_in("seeds"):
            raise UnknownHosts(f"unknown host: {host} (`freshness hosts` lists them)")
        removed = warehouse.remove_host(key)
        with open_instance(warehouse.home) as instance:
            if key in registered_hosts(instance):
                instance.delete_dynamic_partition(HOSTS_PARTITIONS_NAME, key)
    warehouse.ensure_views()
    return removed
