"""The cycle job: the five assets over the hosts partitions, in one run for many hosts."""

from __future__ import annotations

import dagster as dg

from freshness_pipeline.assets.common import GROUP

PLANNING_ASSETS = ["url_inventory", "url_candidates", "revisit_plan"]

# Every run of the cycle job carries this tag, and dagster.yaml allows one such run at a time:
# two cycles planning from the same url_state would fetch the same pages twice and the last
# writer would win, whichever hosts each covers (a range run carries no dagster/partition tag).
CYCLE_TAG = "freshness/cycle"

freshness_cycle_job = dg.define_asset_job(
    "freshness_cycle",
    selection=dg.AssetSelection.groups(GROUP),
    description="One crawl cycle: inventory, candidates, plan, fetch, state.",
    tags={CYCLE_TAG: "true"},
)
