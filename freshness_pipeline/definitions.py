"""The one Definitions of the code location: `dagster dev -m freshness_pipeline.definitions`.

Its partitions follow the home's partitioning (``partitions.home_partitioning``: the home is
``$FRESHNESS_HOME``, else the home whose instance ``$DAGSTER_HOME`` is, ``<home>/dagster``, else
``./data``), resolved when the location loads: one per host, or hash
buckets of hosts (no new-host sensor then: buckets need no registration). The choice and why
are shown on every asset's definition and on the code location. When the home resolves to
another partitioning later (a seed load past the "auto" limit, an edited freshness.toml), the
schedule and the sensor skip their ticks and say to reload the location.
"""

from __future__ import annotations

import dagster as dg

from freshness_pipeline.defs.graph import build_resources, cycle_graph
from freshness_pipeline.defs.instance import adopt_instance_home
from freshness_pipeline.defs.jobs import freshness_cycle_job
from freshness_pipeline.defs.partitions import (
    Partitioning,
    choose_partitioning,
    location_partitioning,
)
from freshness_pipeline.defs.schedules import build_cycle_schedule
from freshness_pipeline.defs.sensors import change_notifications_sensor, new_hosts_sensor


def build_definitions(partitioning: Partitioning | int = 0) -> dg.Definitions:
    """The location for ``partitioning`` (a number: that many host buckets, 0 per host)."""
    if isinstance(partitioning, int):
        partitioning = choose_partitioning(partitioning, 0)
    n = partitioning.host_buckets
    assets, checks = cycle_graph(n, partitioning.describe())
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[freshness_cycle_job],
        schedules=[build_cycle_schedule(n)],
        sensors=[change_notifications_sensor]
        if n
        else [new_hosts_sensor, change_notifications_sensor],
        resources=build_resources(),
        executor=dg.in_process_executor,
        metadata={"partitioning": partitioning.describe()},
    )


adopt_instance_home()
defs = build_definitions(location_partitioning())
