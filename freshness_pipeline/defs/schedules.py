"""The cycle schedule: ONE run over every registered host (or every host bucket), with the tick
time as ``now``.

One RunRequest per host would cost a run launch and a partition lookup each; a range over the
hosts is one run however many hosts there are. Each tick also deletes the runs older than
``[dagster] keep_runs_days`` (instance_upkeep.prune_instance), as a CLI cycle does.
"""

import os

import dagster as dg
from dagster._utils.schedules import is_valid_cron_schedule

from freshness_pipeline.config import ConfigError, load_config
from freshness_pipeline.defs.instance_upkeep import prune_instance
from freshness_pipeline.defs.jobs import freshness_cycle_job
from freshness_pipeline.defs.partitions import (
    bucket_keys,
    home_partitioning,
    range_tags,
    registered_hosts,
)
from freshness_pipeline.warehouse.storage import Warehouse

CRON_ENV = "FRESHNESS_CYCLE_CRON"
DEFAULT_CRON = "0 * * * *"


def cycle_run_config(now_iso: str, budget: int | None = None) -> dict:
    config: dict = {"now": now_iso}
    if budget is not None:
        config["budget"] = budget
    return {"resources": {"cycle": {"config": config}}}


def stale_definitions(
    loaded: int, warehouse: Warehouse, hosts: list[str] | None = None
) -> str | None:
    """Why the location's partitions (``loaded`` buckets, 0 per host) no longer fit the home, or
    None. Its runs would be planned over keys the run process, which loads the home afresh,
    does not have."""
    try:
        now = home_partitioning(warehouse, hosts)
    except ConfigError as exc:
        return f"freshness.toml is unreadable: {exc}"
    if now.host_buckets == loaded:
        return None
    had = f"{loaded} host buckets" if loaded else "one partition per host"
    return (
        f"this code location was loaded with {had}, and the home now resolves to "
        f"{now.describe()}: reload the code location (Deployment -> Reload, or restart "
        "`dagster dev`)"
    )


def cycle_cron() -> tuple[str, str | None]:
    """The schedule's cron and, when ``FRESHNESS_CYCLE_CRON`` is no cron expression, why it is
    not used: Dagster refuses the definition, and the whole code location failed to load (no
    assets, no UI) for a typo in one setting (found by an exploratory run). The default cron
    stands in and every tick skips, saying so."""
    cron = os.environ.get(CRON_ENV, DEFAULT_CRON)
    if is_valid_cron_schedule(cron):
        return cron, None
    return DEFAULT_CRON, (
        f"{CRON_ENV}={cron!r} is not a cron expression (five fields, e.g. '0 * * * *'): fix it "
        "and reload the code location; no cycle is scheduled until then"
    )


def build_cycle_schedule(host_buckets: int = 0) -> dg.ScheduleDefinition:
    cron, bad_cron = cycle_cron()

    @dg.schedule(
        name="freshness_cycle_schedule",
        job=freshness_cycle_job,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )
    def freshness_cycle_schedule(context: dg.ScheduleEvaluationContext):
        if bad_cron:
            return dg.SkipReason(bad_cron)
        warehouse = Warehouse()
        stale = stale_definitions(host_buckets, warehouse)
        if stale:
            return dg.SkipReason(stale)
        keys = bucket_keys(host_buckets) if host_buckets else registered_hosts(context.instance)
        if not keys:
            return dg.SkipReason("no hosts registered yet: run `freshness seed` first")
        note = prune_instance(context.instance, load_config(warehouse.home).keep_runs_days)
        if note:
            context.log.info(note)
        tick = context.scheduled_execution_time
        return dg.RunRequest(
            run_key=f"cycle-{tick.isoformat()}",
            run_config=cycle_run_config(tick.isoformat()),
            tags=range_tags(keys[0], keys[-1]),
        )

    return freshness_cycle_schedule


freshness_cycle_schedule = build_cycle_schedule()
