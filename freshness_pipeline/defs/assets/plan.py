"""The revisit_plan asset: ``stages.plan.cycle_plan`` with the run's hosts, time and budget, and
the counts the UI shows (what was selected, and why).
"""

import dagster as dg
import polars as pl

from freshness_pipeline.defs.assets.common import cycle_asset, reads_side_tables, step_start
from freshness_pipeline.defs.resources import CycleResource, WarehouseResource
from freshness_pipeline.stages.plan import (
    cycle_plan,
)


@cycle_asset
@reads_side_tables("robots")
def revisit_plan(
    context: dg.AssetExecutionContext,
    url_candidates: pl.DataFrame,
    warehouse: WarehouseResource,
    cycle: CycleResource,
) -> dg.Output[pl.DataFrame]:
    """Which URLs to fetch this cycle, in order, and why."""
    wh, hosts = step_start(context, warehouse, "revisit_plan")
    settings = warehouse.pipeline_config()
    made = cycle_plan(
        wh,
        hosts,
        url_candidates,
        cycle.cycle_now(context),
        window_s=cycle.window_s(),
        budget=cycle.budget_or_none(),
        objective=cycle.plan_objective(settings),
        settings=settings,
    )
    plan = made.frame
    selected = plan.filter(pl.col("selected"))
    reasons = selected.group_by("reason").len()
    return dg.Output(
        plan,
        metadata={
            "candidates": dg.MetadataValue.int(plan.height),
            "selected": dg.MetadataValue.int(selected.height),
            "budget": dg.MetadataValue.int(cycle.budget),
            **{f"selected_{r}": dg.MetadataValue.int(n) for r, n in reasons.iter_rows() if r},
            "lastmod_hints_used": dg.MetadataValue.int(
                int(plan["hinted_change"].is_not_null().sum())
            ),
            "expected_gain": dg.MetadataValue.float(float(selected["expected_gain"].sum() or 0.0)),
            "cost_basis": dg.MetadataValue.text(settings.cost_basis),
            "hosts_held_by_retry_after": dg.MetadataValue.int(made.held_by_retry_after),
            "reserve": dg.MetadataValue.int(int(plan["reserve_rank"].is_not_null().sum())),
        },
    )
