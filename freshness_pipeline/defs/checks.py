"""Asset checks that can fail: each guards a promise a later stage or a user relies on.

Each check is a plain function of frames (call it in a notebook on a table read from the
warehouse) and, through ``cycle_checks``, one check per run in Dagster: it reads the run's hosts
(its partitions', narrowed by a ``freshness/hosts`` tag) from the warehouse and judges them
together, as the budget and the verification sample are judged. A check partitioned like its
asset would be one execution record per partition, each carrying the run's whole partition set
(Dagster 1.13): storage growing with hosts squared per check and cycle (docs/scaling.md).
"""

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import dagster as dg
import polars as pl

from freshness_pipeline.defs.assets.common import partition_hosts
from freshness_pipeline.defs.partitions import partitions_for
from freshness_pipeline.defs.resources import CycleResource, WarehouseResource
from freshness_pipeline.science.calibration import verify_calibration
from freshness_pipeline.science.capacity import polite_capacity


@dataclass(frozen=True)
class CycleCheck:
    """A check function, the asset it checks, the tables it reads (parameter -> table), and
    the columns it reads of some of them (parameter -> columns; the others are read whole)."""

    fn: Callable[..., dg.AssetCheckResult]
    asset: str
    reads: dict[str, str]
    blocking: bool = False
    columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


_CHECKS: list[CycleCheck] = []


def cycle_check(
    asset: str,
    reads: tuple[str, ...] = (),
    blocking: bool = False,
    columns: Mapping[str, tuple[str, ...]] | None = None,
) -> Callable[[Callable[..., dg.AssetCheckResult]], Callable[..., dg.AssetCheckResult]]:
    """Register ``fn`` as a check on ``asset``; it is called with the run's rows of ``asset``
    and of each table in ``reads``, as keyword arguments named after them (and ``cycle``, the
    run's CycleResource, if it takes one). ``columns``: what it reads of a table, where that
    is less than the whole: a run reads one file per host and table, and the cost of reading
    those files grows with the columns read."""

    def register(fn: Callable[..., dg.AssetCheckResult]) -> Callable[..., dg.AssetCheckResult]:
        tables = {name: name for name in (asset, *reads)}
        _CHECKS.append(CycleCheck(fn, asset, tables, blocking, dict(columns or {})))
        return fn

    return register


def cycle_checks(host_buckets: int = 0) -> list[dg.AssetChecksDefinition]:
    """The checks for the assets over ``host_buckets`` buckets (0: per host)."""
    partitions_def = partitions_for(host_buckets)
    return [_define(check, partitions_def) for check in _CHECKS]


def _define(check: CycleCheck, partitions_def: dg.PartitionsDefinition) -> dg.AssetChecksDefinition:
    others = [table for table in check.reads if table != check.asset]
    wants_cycle = "cycle" in inspect.signature(check.fn).parameters

    @dg.asset_check(
        name=check.fn.__name__,
        asset=check.asset,
        blocking=check.blocking,
        description=check.fn.__doc__,
        additional_deps=others,
    )
    def run_check(
        context: dg.AssetCheckExecutionContext,
        warehouse: WarehouseResource,
        cycle: CycleResource,
    ) -> dg.AssetCheckResult:
        wh = warehouse.warehouse()
        hosts = partition_hosts(
            context.partition_keys, partitions_def, wh, context.run.tags, context.run.run_id
        )
        frames: dict[str, object] = {
            param: wh.read(table, hosts, columns=check.columns.get(param))
            for param, table in check.reads.items()
        }
        if wants_cycle:
            frames["cycle"] = cycle
        result = check.fn(**frames)
        return dg.AssetCheckResult(
            passed=result.passed,
            severity=result.severity,
            description=result.description,
            metadata={**result.metadata, "hosts": dg.MetadataValue.int(len(hosts))},
        )

    return run_check


def _said(count: int, what: str, none: str) -> str:
    """A check's result in words, as the UI shows it beside passed or failed."""
    return f"{count} {what}" if count else none


def duplicate_urls(frame: pl.DataFrame) -> int:
    return frame.height - frame["url"].n_unique() if frame.height else 0


@cycle_check("url_candidates", blocking=True, columns={"url_candidates": ("url",)})
def candidates_have_unique_urls(url_candidates: pl.DataFrame) -> dg.AssetCheckResult:
    """Two rows for one canonical URL would mean two fetches and two states for one page."""
    dups = duplicate_urls(url_candidates)
    return dg.AssetCheckResult(
        passed=dups == 0,
        description=_said(dups, "rows repeat a canonical URL", "each URL once"),
        metadata={"duplicate_urls": dups},
    )


@cycle_check("robots", blocking=True, columns={"robots": ("host",)})
def robots_one_row_per_host(robots: pl.DataFrame) -> dg.AssetCheckResult:
    """url_candidates and revisit_plan look a host's robots.txt rules up by host: a second row
    would make the rules a host is held to depend on which row a join meets first."""
    hosts = robots["host"]
    repeated = robots.height - hosts.n_unique() if robots.height else 0
    unnamed = int(hosts.is_null().sum()) if robots.height else 0
    said = f"{robots.height - repeated} hosts, {repeated} repeated rows, {unnamed} without a host"
    return dg.AssetCheckResult(
        passed=repeated == 0 and unnamed == 0,
        description=said,
        # distinct hosts in the table; "hosts" (what the run read) is the wrapper's
        metadata={
            "robots_hosts": robots.height - repeated,
            "repeated_rows": repeated,
            "no_host": unnamed,
        },
    )


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


@cycle_check(
    "revisit_plan", blocking=True, columns={"revisit_plan": ("host", "selected", "crawl_delay")}
)
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
    said = f"{selected} fetches planned, {over} over the budget"
    if crowded:
        said += f", {len(crowded)} hosts planned past their Crawl-delay ({metadata['worst_host']})"
    return dg.AssetCheckResult(
        passed=over == 0 and not crowded, description=said, metadata=metadata
    )


def unaccounted_urls(plan: pl.DataFrame, results: pl.DataFrame) -> int:
    planned = plan.filter(pl.col("selected")).select("url")
    return planned.join(results.select("url"), on="url", how="anti").height


@cycle_check(
    "fetch_results",
    reads=("revisit_plan",),
    columns={"fetch_results": ("url",), "revisit_plan": ("url", "selected")},
)
def results_account_for_plan(
    fetch_results: pl.DataFrame, revisit_plan: pl.DataFrame
) -> dg.AssetCheckResult:
    """Every planned URL must come back as a result or as 'deferred'; none may vanish."""
    missing = unaccounted_urls(revisit_plan, fetch_results)
    return dg.AssetCheckResult(
        passed=missing == 0,
        description=_said(
            missing, "planned URLs without a result", "every planned URL has a result"
        ),
        metadata={"planned_without_result": missing},
    )


#: fewer verified pages than this in a run say too little to judge the model by
MIN_VERIFIED = 30


@cycle_check(
    "fetch_results", columns={"fetch_results": ("plan_reason", "outcome", "expected_change")}
)
def verify_sample_matches_the_model(fetch_results: pl.DataFrame) -> dg.AssetCheckResult:
    """The random verification sample, fetched whatever the model thought of it, should find
    about as many changes as the model forecast for it (science.calibration). A warning, not a
    failure: a model that misjudges the pages of this crawl still plans (every fetch also
    corrects its estimates), but a lasting warning says its rates deserve a look. Runs with
    fewer than ``MIN_VERIFIED`` verified pages pass and say so: too small a sample to judge.
    The verdict is the exact tail of the count (``p_value``), not ``z``: forecasts of a few
    percent leave so little variance that one unforeseen change would read as |z| > 3.
    """
    cal = verify_calibration(fetch_results)
    judged = cal.n >= MIN_VERIFIED
    metadata: dict[str, int | float | str] = {"verified_pages": cal.n}
    if cal.n:
        metadata |= {
            "forecast_change_share": round(cal.predicted, 4),
            "observed_change_share": round(cal.observed, 4),
            "z": round(cal.z, 2),
            "p_value": float(f"{cal.p_value:.3g}"),
            "brier_score": round(cal.brier, 4),
        }
    metadata["verdict"] = (
        cal.verdict() if judged else f"fewer than {MIN_VERIFIED} verified pages: not judged"
    )
    return dg.AssetCheckResult(
        passed=not judged or not cal.surprising,
        severity=dg.AssetCheckSeverity.WARN,
        description=str(metadata["verdict"]),
        metadata=metadata,
    )


def candidates_missing_from_state(candidates: pl.DataFrame, state: pl.DataFrame) -> int:
    return candidates.select("url").join(state.select("url"), on="url", how="anti").height


@cycle_check(
    "url_state",
    reads=("url_candidates",),
    columns={"url_state": ("url",), "url_candidates": ("url",)},
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
    return dg.AssetCheckResult(
        passed=missing == 0,
        description=_said(
            missing, "candidates missing from url_state", "every candidate is in url_state"
        ),
        metadata={"candidates_missing": missing},
    )


#: the checks of the default per-host assets (cycle_checks(n) for host buckets)
ALL_CHECKS = cycle_checks()
