"""Registers hosts that appear in the seeds (from `freshness seed` or discovered redirects)
as partitions, and starts their first cycle. Only in a location partitioned per host: buckets
need no registration. And the change notifications, in any location."""

from datetime import UTC, datetime

import dagster as dg

from freshness_pipeline.config import CONFIG_FILE, ConfigError, load_config
from freshness_pipeline.defs.jobs import freshness_cycle_job
from freshness_pipeline.defs.notify import notify_changes
from freshness_pipeline.defs.partitions import hosts_partitions, range_tags, registered_hosts
from freshness_pipeline.defs.schedules import cycle_run_config, stale_definitions
from freshness_pipeline.warehouse.storage import Warehouse


def unregistered_hosts(warehouse: Warehouse, known: list[str]) -> list[str]:
    return sorted(set(warehouse.hosts_in("seeds")) - set(known))


def evaluation_time() -> datetime:
    """The sensor's tick time. Unlike a schedule's context, a SensorEvaluationContext (dagster
    1.13) carries no evaluation time, so the sensor, like the schedule an instigator above the
    pipeline, reads the clock once here and hands it down as the run's `now`."""
    return datetime.now(UTC)


@dg.sensor(job=freshness_cycle_job, minimum_interval_seconds=60)
def new_hosts_sensor(context: dg.SensorEvaluationContext):
    """New hosts are added at the end of the partition order, so their first cycle is ONE range
    run over them, however many arrived. Its `now` is this evaluation's time, passed as run
    config as the schedule passes its tick: the run says which cycle it is, and
    a re-execution replays that cycle instead of taking its own creation time. A seed load that
    takes the home past the "auto" host limit stops it (host buckets need no registration)
    until the location is reloaded without it."""
    warehouse = Warehouse()
    seeded = warehouse.hosts_in("seeds")
    stale = stale_definitions(0, warehouse, seeded)
    if stale:
        return dg.SkipReason(stale)
    new = sorted(set(seeded) - set(registered_hosts(context.instance)))
    if not new:
        return dg.SkipReason("no new hosts")
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=f"first-{new[0]}-{new[-1]}-{len(new)}",
                run_config=cycle_run_config(evaluation_time().isoformat()),
                tags=range_tags(new[0], new[-1], bucket="new-hosts"),
            )
        ],
        dynamic_partitions_requests=[hosts_partitions.build_add_request(new)],
    )


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Sends each batch of new changes to the Apprise URLs of [notify] in "
    "freshness.toml; a failing target is retried at the next evaluation.",
)
def change_notifications_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """A sensor rather than a step of the cycle: a notifier that is down or slow then delays
    only its own messages, never a cycle, and its cursor (in the instance) survives restarts.
    It starts no runs; every tick says in its skip reason what it sent or why not."""
    warehouse = Warehouse()
    try:
        config = load_config(warehouse.home)
    except ConfigError as exc:
        return dg.SensorResult(skip_reason=dg.SkipReason(f"notifications not sent: {exc}"))
    if not config.notify.urls:
        return dg.SensorResult(
            skip_reason=dg.SkipReason(
                f"nothing to do: no [notify] urls in {warehouse.home / CONFIG_FILE}"
            )
        )
    outcome = notify_changes(warehouse, config.notify, context.cursor)
    for name, why in outcome.failures:
        context.log.warning(f"notification to {name} failed: {why}")
    return dg.SensorResult(skip_reason=dg.SkipReason(outcome.reason), cursor=outcome.cursor)
