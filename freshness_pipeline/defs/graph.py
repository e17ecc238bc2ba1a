"""The cycle's graph and its resources, for any partitioning; definitions.py and the in-process
runner both build from here, so a CLI cycle runs exactly what the UI shows."""

from __future__ import annotations

import dagster as dg

from freshness_pipeline.defs.assets.candidates import url_candidates
from freshness_pipeline.defs.assets.common import cycle_assets_for, step_name
from freshness_pipeline.defs.assets.fetch import fetch_results
from freshness_pipeline.defs.assets.inventory import url_inventory
from freshness_pipeline.defs.assets.plan import revisit_plan
from freshness_pipeline.defs.assets.retention import define_retention, retention
from freshness_pipeline.defs.assets.state import url_state
from freshness_pipeline.defs.checks import ALL_CHECKS, cycle_checks
from freshness_pipeline.defs.io_manager import WarehouseIOManager
from freshness_pipeline.defs.jobs import PLANNING_STEPS, cycle_job_def
from freshness_pipeline.defs.partitions import partitions_for
from freshness_pipeline.defs.resources import CycleResource, HttpClientResource, WarehouseResource

#: the steps that compute the cycle's tables, then the one that expires what retention lets go
TABLE_ASSETS = [url_inventory, url_candidates, revisit_plan, fetch_results, url_state]
CYCLE_ASSETS = [*TABLE_ASSETS, retention]

#: the seeds: written by `freshness seed`, not by a cycle's step (the inventory step only hands
#: redirect targets to other hosts' seeds), so an external asset the inventory reads, outside
#: the cycle's group and its job
SEEDS = dg.AssetSpec(
    "seeds",
    description="Per host: the URLs `freshness seed` loaded, with their value and when they "
    "were added; the cycle's inventory starts from them.",
    group_name="freshness_inputs",
    kinds={"parquet"},
)


def cycle_graph(
    host_buckets: int = 0, partitioning: str = ""
) -> tuple[list[dg.AssetsDefinition | dg.AssetSpec], list[dg.AssetChecksDefinition]]:
    """The cycle's assets and checks, per host (0) or over ``host_buckets`` buckets;
    ``partitioning`` (why this one) is shown on each asset's definition."""
    if not host_buckets and not partitioning:
        return [SEEDS, *CYCLE_ASSETS], list(ALL_CHECKS)
    names = [step_name(a) for a in TABLE_ASSETS]
    assets: list[dg.AssetsDefinition | dg.AssetSpec] = [SEEDS]
    assets += cycle_assets_for(host_buckets, names, partitioning)
    assets.append(define_retention(partitions_for(host_buckets), partitioning))
    return assets, cycle_checks(host_buckets)


def build_resources(
    home: str = "", cycle: CycleResource | None = None, fetch_processes: int = 1
) -> dict[str, object]:
    """Resources for one home. Without an explicit cycle, the cycle is run configuration
    (`resources.cycle.config.now`, `.budget`, ...), as the schedule and the launchpad pass it."""
    return {
        "io_manager": WarehouseIOManager(home=home),
        "warehouse": WarehouseResource(home=home),
        "cycle": cycle if cycle is not None else CycleResource.configure_at_launch(),
        "http": HttpClientResource(fetch_processes=fetch_processes),
    }


def cycle_job(
    home: str, host_buckets: int, fetch_processes: int = 1, planning_only: bool = False
) -> dg.JobDefinition:
    """The cycle job for one home, as ``dg.execute_job`` rebuilds it from these arguments
    (``dg.build_reconstructable_job``): the cycle is run configuration, and the in-process
    executor hands every output to the IO manager without keeping it, where ``dg.materialize``
    keeps every step's output until the run ends."""
    assets, checks = cycle_graph(host_buckets)
    job = cycle_job_def(PLANNING_STEPS if planning_only else None)
    defs = dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[job],
        resources=build_resources(home, None, fetch_processes),
        executor=dg.in_process_executor,
    )
    return defs.resolve_job_def(job.name)
