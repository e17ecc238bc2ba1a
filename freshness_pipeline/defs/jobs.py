"""The cycle job: the cycle's assets over the hosts partitions, in one run for many hosts, ending
with the retention step (assets.retention), so a scheduled run prunes as a CLI cycle does."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from freshness_pipeline.defs.assets.common import GROUP, step_tables

#: the steps a dry run runs: everything up to the plan, with the tables those steps write
PLANNING_STEPS = ("url_inventory", "url_candidates", "revisit_plan")
JOB_NAME = "freshness_cycle"

# Every run of the cycle job carries this tag, and dagster.yaml allows one such run at a time:
# two cycles planning from the same url_state would fetch the same pages twice and the last
# writer would win, whichever hosts each covers (a range run carries no dagster/partition tag).
CYCLE_TAG = "freshness/cycle"


def cycle_job_def(steps: Sequence[str] | None = None) -> dg.UnresolvedAssetJobDefinition:
    """The cycle job over the group's assets (or only those of ``steps``, with their checks)."""
    selection = (
        dg.AssetSelection.assets(*(table for step in steps for table in step_tables(step)))
        if steps
        else dg.AssetSelection.groups(GROUP)
    )
    return dg.define_asset_job(
        JOB_NAME,
        selection=selection,
        description="One crawl cycle: inventory, candidates, plan, fetch, state, retention.",
        tags={CYCLE_TAG: "true"},
    )


freshness_cycle_job = cycle_job_def()
