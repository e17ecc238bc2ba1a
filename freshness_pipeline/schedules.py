"""The cycle schedule: ONE run over every registered host (or every host bucket), with the tick
time as ``now``.

One RunRequest per host would cost a run launch and a partition lookup each; a range over the
hosts is one run however many hosts there are.
"""

import os

import dagster as dg

from freshness_pipeline.jobs import freshness_cycle_job
from freshness_pipeline.partitions import (
    bucket_keys,
    range_tags,
    registered_hosts,
)

CRON_ENV = "FRESHNESS_CYCLE_CRON"
DEFAULT_CRON = "0 * * * *"


def cycle_run_config(now_iso: str, budget: int | None = None) -> dict:
    config: dict = {"now": now_iso}
    if budget is not None:
        config["budget"] = budget
    return {"resources": {"cycle": {"config": config}}}


def build_cycle_schedule(host_buckets: int = 0) -> dg.ScheduleDefinition:
    @dg.schedule(
        name="freshness_cycle_schedule",
        job=freshness_cycle_job,
        cron_schedule=os.environ.get(CRON_ENV, DEFAULT_CRON),
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )
    def freshness_cycle_schedule(context: dg.ScheduleEvaluationContext):
        keys = bucket_keys(host_buckets) if host_buckets else registered_hosts(context.instance)
        if not keys:
            return dg.SkipReason("no hosts registered yet: run `freshness seed` first")
        tick = context.scheduled_execution_time
        return dg.RunRequest(
            run_key=f"cycle-{tick.isoformat()}",
            run_config=cycle_run_config(tick.isoformat()),
            tags=range_tags(keys[0], keys[-1]),
        )

    return freshness_cycle_schedule


freshness_cycle_schedule = build_cycle_schedule()
