"""Asset checks that can fail: each guards a promise a later stage or a user relies on."""

from collections.abc import Callable

import dagster as dg
import polars as pl

from freshness_pipeline.partitions import hosts_partitions, partitions_for
from freshness_pipeline.resources import CycleResource
from freshness_pipeline.science.calibration import verify_calibration
from freshness_pipeline.science.capacity import polite_capacity

_CHECKS: list[tuple[Callable, dict]] = []


def cycle_check(**kwargs: object) -> Callable[[Callable], dg.AssetChecksDefinition]:
    """An asset check on the per-host assets, kept so that ``cycle_checks(n)`` can define it on
    the host-bucket assets too."""

    def define(fn: Callable) -> dg.AssetChecksDefinition:
        _CHECKS.append((fn, kwargs))
        return dg.asset_check(partitions_def=hosts_partitions, **kwargs)(fn)  # type: ignore[arg-type]

    return define


def cycle_checks(host_buckets: int = 0) -> list[dg.AssetChecksDefinition]:
    partitions_def = partitions_for(host_buckets)
    return [dg.asset_check(partitions_def=partitions_def, **kw)(fn) for fn, kw in _CHECKS]  # type: ignore[arg-type]


def duplicate_urls(frame: pl.DataFrame) -> int:
    return frame.height - frame["url"].n_unique() if frame.height else 0


@cycle_check(asset="url_candidates", blocking=True)
def candidates_have_unique_urls(url_candidates: pl.DataFrame) -> dg.AssetCheckResult:
    """Two rows for one canonical URL would mean two fetches and two states for one page."""
    dups = duplicate_urls(url_candidates)
    return dg.AssetCheckResult(passed=dups == 0, metadata={"duplicate_urls": dups})


def plan_over_budget(plan: pl.DataFrame, budget: int | None) -> int:
    selected = int(plan["selected"].sum() or 0) if plan.height else 0
    return max(0, selected - budget) if budget is not None else 0


def hosts_over_capacity(plan: pl.DataFrame, window_s: float) -> dict[str, int]:
    """Fetches selected beyond what each host's Crawl-delay allows in one fetch window.

    The plan keeps no capacity column, but it keeps each host's crawl_delay, and the planner's
    capacity never exceeds the window over that delay (it only shrinks for unhealthy hosts).
    So this bound holds for every correct plan, and breaking it means the plan would hammer a
    host harder than its robots.txt asks.
    """
    if not plan.height:
        return {}
    bound = polite_capacity(window_s).cast(pl.Int64)
    per_host = (
        plan.group_by("host")
        .agg(pl.col("selected").sum().alias("n"), bound.max().alias("bound"))
        .filter(pl.col("n") > pl.col("bound"))
    )
    return {h: int(n - b) for h, n, b in per_host.select("host", "n", "bound").iter_rows()}


@cycle_check(asset="revisit_plan", blocking=True)
def plan_within_budget(revisit_plan: pl.DataFrame, cycle: CycleResource) -> dg.AssetCheckResult:
    """The budget is what the user pays for and the crawl-delay is what each host asked for:
    the plan may exceed neither.

    A range run checks the whole run's plan against the budget. The per-host check is an upper
    bound (window / crawl-delay); the exact capacity, which also halves for failing hosts, is
    enforced by the planner and checked in its tests.
    """
    over = plan_over_budget(revisit_plan, cycle.budget_or_none())
    crowded = hosts_over_capacity(revisit_plan, cycle.fetch_window_s)
    selected = int(revisit_plan["selected"].sum() or 0) if revisit_plan.height else 0
    metadata: dict[str, int | str] = {
        "selected": selected,
        "over_budget": over,
        "hosts_over_capacity": len(crowded),
    }
    if crowded:
        worst = max(crowded, key=lambda h: crowded[h])
        metadata["worst_host"] = f"{worst} (+{crowded[worst]})"
    return dg.AssetCheckResult(passed=over == 0 and not crowded, metadata=metadata)


def unaccounted_urls(plan: pl.DataFrame, results: pl.DataFrame) -> int:
    planned = plan.filter(pl.col("selected")).select("url")
    return planned.join(results.select("url"), on="url", how="anti").height


@cycle_check(
    asset="fetch_results",
    additional_ins={"revisit_plan": dg.AssetIn(key="revisit_plan")},
)
def results_account_for_plan(
    fetch_results: pl.DataFrame, revisit_plan: pl.DataFrame
) -> dg.AssetCheckResult:
    """Every planned URL must come back as a result or as 'deferred'; none may vanish."""
    missing = unaccounted_urls(revisit_plan, fetch_results)
    return dg.AssetCheckResult(passed=missing == 0, metadata={"planned_without_result": missing})


#: fewer verified pages than this in a run say too little to judge the model by
MIN_VERIFIED = 30
#: |z| beyond this: the forecasts and the verified outcomes disagree
MAX_CALIBRATION_Z = 3.0


@cycle_check(asset="fetch_results")
def verify_sample_matches_the_model(fetch_results: pl.DataFrame) -> dg.AssetCheckResult:
    """The random verification sample, fetched whatever the model thought of it, should find
    about as many changes as the model forecast for it (science.calibration). A warning, not a
    failure: a model that misjudges the pages of this crawl still plans (every fetch also
    corrects its estimates), but a lasting warning says its rates deserve a look. Runs with
    fewer than ``MIN_VERIFIED`` verified pages pass and say so: too small a sample to judge.
    """
    cal = verify_calibration(fetch_results)
    judged = cal.n >= MIN_VERIFIED
    metadata: dict[str, int | float | str] = {"verified_pages": cal.n}
    if cal.n:
        metadata |= {
            "forecast_change_share": round(cal.predicted, 4),
            "observed_change_share": round(cal.observed, 4),
            "z": round(cal.z, 2),
            "brier_score": round(cal.brier, 4),
        }
    if not judged:
        metadata["verdict"] = f"fewer than {MIN_VERIFIED} verified pages: not judged"
    return dg.AssetCheckResult(
        passed=not judged or abs(cal.z) <= MAX_CALIBRATION_Z,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=metadata,
    )


def candidates_missing_from_state(candidates: pl.DataFrame, state: pl.DataFrame) -> int:
    return candidates.select("url").join(state.select("url"), on="url", how="anti").height


@cycle_check(
    asset="url_state",
    additional_ins={"url_candidates": dg.AssetIn(key="url_candidates")},
)
def state_keeps_every_candidate(
    url_state: pl.DataFrame, url_candidates: pl.DataFrame
) -> dg.AssetCheckResult:
    """No URL may drop out of url_state: a URL that vanishes comes back as 'new' and loses its
    change history. url_state replaces the previous file, so the previous state is gone by the
    time this runs; this cycle's candidates are what the state must still cover.

    Not blocking: url_state is the last asset, so there is nothing downstream to hold back, and
    a red check in the UI is more useful than a failed run whose fetches already happened.
    """
    missing = candidates_missing_from_state(url_candidates, url_state)
    return dg.AssetCheckResult(passed=missing == 0, metadata={"candidates_missing": missing})


ALL_CHECKS = [
    candidates_have_unique_urls,
    plan_within_budget,
    results_account_for_plan,
    verify_sample_matches_the_model,
    state_keeps_every_candidate,
]
