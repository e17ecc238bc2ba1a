"""Asset checks that can fail: each guards a promise a later stage or a user relies on."""

import dagster as dg
import polars as pl

from freshness_pipeline.assets.candidates import url_candidates
from freshness_pipeline.assets.fetch import fetch_results
from freshness_pipeline.assets.plan import revisit_plan
from freshness_pipeline.partitions import hosts_partitions
from freshness_pipeline.resources import CycleResource


def duplicate_urls(frame: pl.DataFrame) -> int:
    return frame.height - frame["url"].n_unique() if frame.height else 0


@dg.asset_check(asset=url_candidates, blocking=True, partitions_def=hosts_partitions)
def candidates_have_unique_urls(url_candidates: pl.DataFrame) -> dg.AssetCheckResult:
    """Two rows for one canonical URL would mean two fetches and two states for one page."""
    dups = duplicate_urls(url_candidates)
    return dg.AssetCheckResult(passed=dups == 0, metadata={"duplicate_urls": dups})


def plan_over_budget(plan: pl.DataFrame, budget: int | None) -> int:
    selected = int(plan["selected"].sum() or 0) if plan.height else 0
    return max(0, selected - budget) if budget is not None else 0


@dg.asset_check(asset=revisit_plan, blocking=True, partitions_def=hosts_partitions)
def plan_within_budget(revisit_plan: pl.DataFrame, cycle: CycleResource) -> dg.AssetCheckResult:
    """The budget is what the user pays for: the plan may never select more.

    A range run checks the whole run's plan against the budget; per-host capacity is enforced by
    the planner and checked in its tests.
    """
    over = plan_over_budget(revisit_plan, cycle.budget_or_none())
    selected = int(revisit_plan["selected"].sum() or 0) if revisit_plan.height else 0
    return dg.AssetCheckResult(
        passed=over == 0, metadata={"selected": selected, "over_budget": over}
    )


def unaccounted_urls(plan: pl.DataFrame, results: pl.DataFrame) -> int:
    planned = plan.filter(pl.col("selected")).select("url")
    return planned.join(results.select("url"), on="url", how="anti").height


@dg.asset_check(
    asset=fetch_results,
    partitions_def=hosts_partitions,
    additional_ins={"revisit_plan": dg.AssetIn(key=revisit_plan.key)},
)
def results_account_for_plan(
    fetch_results: pl.DataFrame, revisit_plan: pl.DataFrame
) -> dg.AssetCheckResult:
    """Every planned URL must come back as a result or as 'deferred'; none may vanish."""
    missing = unaccounted_urls(revisit_plan, fetch_results)
    return dg.AssetCheckResult(passed=missing == 0, metadata={"planned_without_result": missing})


ALL_CHECKS = [candidates_have_unique_urls, plan_within_budget, results_account_for_plan]
