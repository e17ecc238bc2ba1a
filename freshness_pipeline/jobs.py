"""The cycle job: the five assets over the hosts partitions, in one run for many hosts."""

from __future__ import annotations

import dagster as dg

from freshness_pipeline.assets.common import GROUP

PLANNING_ASSETS = ["url_inventory", "url_candidates", "revisit_plan"]

freshness_cycle_job = dg.define_asset_job(
    "freshness_cycle",
    selection=dg.AssetSelection.groups(GROUP),
    description="One crawl cycle: inventory, candidates, plan, fetch, state.",
)
