"""The one Definitions of the code location: `dagster dev -m freshness_pipeline.definitions`."""

from __future__ import annotations

import dagster as dg

from freshness_pipeline.assets.candidates import url_candidates
from freshness_pipeline.assets.fetch import fetch_results
from freshness_pipeline.assets.inventory import url_inventory
from freshness_pipeline.assets.plan import revisit_plan
from freshness_pipeline.assets.state import url_state
from freshness_pipeline.checks import ALL_CHECKS
from freshness_pipeline.io_manager import WarehouseIOManager
from freshness_pipeline.jobs import freshness_cycle_job
from freshness_pipeline.resources import CycleResource, HttpClientResource, WarehouseResource
from freshness_pipeline.schedules import freshness_cycle_schedule
from freshness_pipeline.sensors import new_hosts_sensor

CYCLE_ASSETS = [url_inventory, url_candidates, revisit_plan, fetch_results, url_state]


def build_resources(home: str = "", cycle: CycleResource | None = None) -> dict[str, object]:
    """Resources for one home. Without an explicit cycle, the cycle is run configuration
    (`resources.cycle.config.now`, `.budget`, ...), as the schedule and the launchpad pass it."""
    return {
        "io_manager": WarehouseIOManager(home=home),
        "warehouse": WarehouseResource(home=home),
        "cycle": cycle if cycle is not None else CycleResource.configure_at_launch(),
        "http": HttpClientResource(),
    }


defs = dg.Definitions(
    assets=CYCLE_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[freshness_cycle_job],
    schedules=[freshness_cycle_schedule],
    sensors=[new_hosts_sensor],
    resources=build_resources(),
    executor=dg.in_process_executor,
)
