"""The url_state asset: ``stages.state.update_state`` with the run's inputs, and the figures and
plots the UI shows of the estimates.
"""

from datetime import datetime

import dagster as dg
import polars as pl

from freshness_pipeline.defs.assets.common import (
    cycle_asset,
    reads_columns,
    step_start,
    writes_side_tables,
)
from freshness_pipeline.defs.plots import state_plots
from freshness_pipeline.defs.resources import CycleResource, WarehouseResource
from freshness_pipeline.science.prior.components import GLOBAL
from freshness_pipeline.science.schedule import PlanConfig
from freshness_pipeline.science.timecols import duration_days
from freshness_pipeline.stages.state import (
    CANDIDATE_COLUMNS,
    PLAN_COLUMNS,
    RESULT_COLUMNS,
    update_state,
    updated_evidence,
)
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.locks import cycle_record_lock


@cycle_asset
@writes_side_tables(
    change_prior="Per host and URL class: the empirical-Bayes prior over change rates (the "
    "newest fit and the one before it), which every page's posterior leans on.",
    lastmod_evidence="Per host: how sitemap lastmod dates have matched the changes fetches "
    "saw, over 180 days, for trusting them as change hints.",
)
@reads_columns(
    revisit_plan=PLAN_COLUMNS, url_candidates=CANDIDATE_COLUMNS, fetch_results=RESULT_COLUMNS
)
def url_state(
    context: dg.AssetExecutionContext,
    url_candidates: pl.DataFrame,
    revisit_plan: pl.DataFrame,
    fetch_results: pl.DataFrame,
    warehouse: WarehouseResource,
    cycle: CycleResource,
) -> dg.Output[pl.DataFrame]:
    """Per-URL status, change rate (changes/day, posterior mean; ``change_rate_median`` beside
    it) and when to look again."""
    wh, hosts = step_start(context, warehouse, "url_state")
    now = cycle.cycle_now(context)
    # The change prior is refit from the updated histories (warm-started from the stored
    # fit): the rates are scored under it, and the next cycle's plan scores pages under it.
    state, grades, prior = update_state(
        wh.read("url_state", hosts),
        url_candidates,
        fetch_results,
        revisit_plan,
        now,
        PlanConfig(objective=cycle.plan_objective(warehouse.pipeline_config())),
        change_prior=wh.read("change_prior", hosts),
    )
    evidence = updated_evidence(wh.read("lastmod_evidence", hosts), grades, now)
    wh.write_partitions("lastmod_evidence", hosts, evidence)
    wh.write_partitions("change_prior", hosts, prior)
    # each host's newest cycle, whoever ran it (the schedule, the UI, the command): what
    # `freshness hosts` shows and what tells a backfill from a mistyped --now
    with cycle_record_lock(wh.root):
        wh.record_cycle(hosts, now)
    by_status = dict(state.group_by("status").len().iter_rows())
    live = state.filter(pl.col("status") == "active")
    age_days = duration_days(pl.lit(now).cast(tables.UTC_TIME) - pl.col("last_seen_at"))
    est_fresh = live.select(
        ((-pl.col("change_rate") * age_days).exp() * pl.col("value")).sum() / pl.col("value").sum()
    ).item()
    return dg.Output(
        state,
        metadata={
            "urls": dg.MetadataValue.int(state.height),
            **{f"status_{k}": dg.MetadataValue.int(v) for k, v in sorted(by_status.items())},
            "estimated_weighted_freshness": dg.MetadataValue.float(float(est_fresh or 0.0)),
            # Two populations, named apart: every active page (most of them thinly observed,
            # so mostly their class prior) and the pages fetched at least twice, the figure
            # the report's and the metric views' median_rate_per_day gives.
            "median_change_rate_per_day_all_active": dg.MetadataValue.float(
                float(live.select(pl.col("change_rate").median()).item() or 0.0)
            ),
            "median_change_rate_per_day_fetched_twice": dg.MetadataValue.float(
                float(
                    live.filter(pl.col("obs_interval_days").list.len().fill_null(0) > 0)
                    .select(pl.col("change_rate").median())
                    .item()
                    or 0.0
                )
            ),
            "periodic_prior_share": dg.MetadataValue.float(periodic_share(prior)),
            "hosts_dating_changes": dg.MetadataValue.int(
                fetch_results.filter(pl.col("dates_changes"))["host"].n_unique()
            ),
            **plot_metadata(state, now, len(hosts)),
        },
    )


def periodic_share(prior: pl.DataFrame) -> float:
    """Share of the run's pages the fitted prior expects to change by the clock."""
    glob = (
        prior.filter(
            (pl.col("url_class") == GLOBAL) & (pl.col("fitted_at") == pl.col("fitted_at").max())
        )
        .explode("component", "weight")
        .filter(pl.col("component") == "periodic")
    )
    hosts = glob["host"].n_unique()
    return float(glob["weight"].sum() / hosts) if hosts else 0.0


# Dagster copies a range run's metadata onto every host's materialization: pictures (~3 KB
# each) are attached only to runs over a few hosts.
MAX_HOSTS_FOR_PLOTS = 20


def plot_metadata(state: pl.DataFrame, now: datetime, n_hosts: int) -> dict[str, dg.MetadataValue]:
    if n_hosts > MAX_HOSTS_FOR_PLOTS:
        return {}
    return {k: dg.MetadataValue.md(v) for k, v in state_plots(state, now).items()}
