"""The one Definitions of the code location: `dagster dev -m freshness_pipeline.definitions`.

Its partitions follow ``[partitioning] host_buckets`` in the home's ``freshness.toml`` (the home
is ``$FRESHNESS_HOME``, else ``./data``), read when the location loads: per host by default,
hash buckets of hosts when set (no new-host sensor then: buckets need no registration).
"""

from __future__ import annotations

import dagster as dg

from freshness_pipeline.config import load_config
from freshness_pipeline.graph import build_resources, cycle_graph
from freshness_pipeline.jobs import freshness_cycle_job
from freshness_pipeline.schedules import build_cycle_schedule
from freshness_pipeline.sensors import new_hosts_sensor
from freshness_pipeline.storage import Warehouse


def build_definitions(host_buckets: int = 0) -> dg.Definitions:
    assets, checks = cycle_graph(host_buckets)
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[freshness_cycle_job],
        schedules=[build_cycle_schedule(host_buckets)],
        sensors=[] if host_buckets else [new_hosts_sensor],
        resources=build_resources(),
        executor=dg.in_process_executor,
    )


defs = build_definitions(load_config(Warehouse().home).host_buckets)
