"""Registers hosts that appear in the seeds (from `freshness seed` or discovered redirects)
as partitions, and starts their first cycle."""

import dagster as dg

from freshness_pipeline.jobs import freshness_cycle_job
from freshness_pipeline.partitions import hosts_partitions, registered_hosts
from freshness_pipeline.schedules import cycle_run_config
from freshness_pipeline.storage import Warehouse


def unregistered_hosts(warehouse: Warehouse, known: list[str]) -> list[str]:
    seeds = warehouse.read("seeds")
    wanted = set(seeds["host"].drop_nulls().to_list()) if seeds.height else set()
    return sorted(wanted - set(known))


@dg.sensor(job=freshness_cycle_job, minimum_interval_seconds=60)
def new_hosts_sensor(context: dg.SensorEvaluationContext):
    """A new host's first run has no `now` in its config: it takes the run's creation time."""
    new = unregistered_hosts(Warehouse(), registered_hosts(context.instance))
    if not new:
        return dg.SkipReason("no new hosts")
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(partition_key=h, run_key=f"first-{h}", run_config=cycle_run_config(""))
            for h in new
        ],
        dynamic_partitions_requests=[hosts_partitions.build_add_request(new)],
    )
