"""The fetch_results step's four assets (fetch_results, host_capacity, page_versions, changes):
``stages.fetch.run_fetch_stage`` with the run's hosts, time and HTTP settings, and the figures
and tables an operator looks at in the UI (outcomes, 304 share, hosts short of their share).
"""

from collections.abc import Iterator

import dagster as dg
import polars as pl

from freshness_pipeline.defs.assets.common import (
    HELD_BACK,
    cycle_multi_asset,
    step_start,
    writes_side_tables,
)
from freshness_pipeline.defs.resources import CycleResource, HttpClientResource, WarehouseResource
from freshness_pipeline.science.fetch_totals import fetch_counts
from freshness_pipeline.stages.fetch import (
    held_back_reasons,
    release_freed_memory,
    run_fetch_stage,
)
from freshness_pipeline.warehouse.unrecorded import plans_carried_out


def _plans_in_this_run(context: dg.AssetExecutionContext) -> bool:
    """Whether this run makes the plan it fetches (the whole group, a cycle job), or is a
    re-execution of one that did (its failed steps, with the plan it made)."""
    run = context.run
    first = context.instance.get_run_by_id(run.root_run_id) if run.root_run_id else None
    selection = (first or run).asset_selection
    return selection is None or dg.AssetKey("revisit_plan") in selection


@cycle_multi_asset("fetch_results", "host_capacity", "page_versions", "changes")
@writes_side_tables(
    fetch_log="Per host and cycle: one row per request sent, with its answer, validators, "
    "bytes and where the answer is in the WARC archive.",
    validator_evidence="Per host: running totals of what ETag and Last-Modified have said "
    "against the content fingerprint, for trusting or distrusting them.",
    validator_latest="Per host: the newest validators and fingerprint of each URL, the other "
    "half of the validator running totals.",
    fetch_totals="Per host and URL class: what each cycle's requests add up to (requests, "
    "304s, unchanged and changed bodies, bytes), behind the metric views and the bytes cost.",
)
def fetch_results(
    context: dg.AssetExecutionContext,
    revisit_plan: pl.DataFrame,
    warehouse: WarehouseResource,
    cycle: CycleResource,
    http: HttpClientResource,
) -> Iterator[dg.Output[pl.DataFrame]]:
    """What each planned fetch found (304, same content, changed content, gone, an error), what
    each host showed it accepts (the pace the next cycle plans and fetches it at), and the
    crawled copy: every new or changed version of a page and what changed."""
    wh, hosts = step_start(context, warehouse, "fetch_results")
    now = cycle.cycle_now(context)
    if cycle.dry_run:
        raise dg.Failure("fetch_results does not run in a dry run; select the planning assets only")
    carried_out = [] if _plans_in_this_run(context) else plans_carried_out(wh, hosts)
    if carried_out:
        raise dg.Failure(
            f"the plan of {len(carried_out)} of these hosts ({', '.join(carried_out[:3])}"
            f"{' ...' if len(carried_out) > 3 else ''}) was fetched and recorded already: "
            "materialize from url_inventory (the whole group) for a new cycle"
        )
    stage = run_fetch_stage(
        revisit_plan,
        hosts,
        now,
        wh,
        warehouse.pipeline_config(),
        http.settings(time_limit_s=cycle.fetch_time_limit_s, window_s=cycle.window_s()),
        http.allow_list(),
        processes=http.fetch_processes,
        archive=http.archive,
    )
    release_freed_memory()
    frame, trust = stage.frame, stage.trust
    # the same counts the metric views sum (science.fetch_totals), for this cycle alone, over
    # every request sent (the redirects followed to a page's spelling included)
    total = fetch_counts(stage.requests).row(0, named=True)
    yield dg.Output(
        frame.sort(["host", "url"]),
        output_name="fetch_results",
        metadata={
            "requests_sent": dg.MetadataValue.int(stage.requests.height),
            **outcome_counts(frame),
            **{
                f"{HELD_BACK}{k}": dg.MetadataValue.int(v)
                for k, v in held_back_reasons(frame).items()
            },
            "share_304_of_conditional": dg.MetadataValue.float(
                total["answered_304"] / total["conditional"] if total["conditional"] else 0.0
            ),
            "unchanged_share_of_refetches": dg.MetadataValue.float(
                total["unchanged"] / total["refetched"] if total["refetched"] else 0.0
            ),
            "bytes": dg.MetadataValue.int(total["bytes"]),
            "hosts_needing_attention": dg.MetadataValue.md(attention_table(stage.throttled, trust)),
        },
    )
    capacity = stage.capacity
    totals = capacity.select(
        pl.col("planned", "sent", "deferred", "refilled").sum(),
        retry_after_pauses=pl.col("pauses").sum(),
        hosts_throttled=(pl.col("throttled") > 0).sum(),
    ).row(0, named=True)
    yield dg.Output(
        capacity,
        output_name="host_capacity",
        metadata={
            "hosts": dg.MetadataValue.int(capacity.height),
            **{name: dg.MetadataValue.int(int(n or 0)) for name, n in totals.items()},
            "hosts_short_of_their_share": dg.MetadataValue.md(short_hosts_table(capacity)),
        },
    )
    versions = stage.versions
    yield dg.Output(
        versions,
        output_name="page_versions",
        metadata={"versions": dg.MetadataValue.int(versions.height), **outcome_counts(versions)},
    )
    yield dg.Output(
        stage.changes,
        output_name="changes",
        metadata={"changes": dg.MetadataValue.int(stage.changes.height)},
    )


def outcome_counts(frame: pl.DataFrame) -> dict[str, dg.MetadataValue]:
    """``outcome_<name>``: how many of the rows had each outcome."""
    counts = frame.group_by("outcome").len().sort("outcome").iter_rows()
    return {f"outcome_{k}": dg.MetadataValue.int(n) for k, n in counts}


def short_hosts_table(capacity: pl.DataFrame, limit: int = 20) -> str:
    """Markdown: the hosts that deferred or were throttled this cycle, worst first, with their
    share, what they took and the pace they are now at (at most ``limit`` rows)."""
    short = capacity.filter((pl.col("deferred") > 0) | (pl.col("throttled") > 0)).sort(
        ["deferred", "throttled", "host"], descending=[True, True, False]
    )
    if not short.height:
        return "Every host took its share."
    lines = [
        "| host | planned | sent | deferred | throttled | capacity | gap (s) | concurrency |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in short.head(limit).iter_rows(named=True):
        lines.append(
            f"| {r['host']} | {r['planned']} | {r['sent']} | {r['deferred']} | "
            f"{r['throttled']} | {r['capacity']} | {r['gap_s'] or 0:.2f} | {r['concurrency']} |"
        )
    if short.height > limit:
        lines.append(f"| ... {short.height - limit} more | | | | | | | |")
    return "\n".join(lines)


def attention_table(throttled: list[dict], trust: pl.DataFrame) -> str:
    """Markdown: the hosts an operator should look at, and why (slowed down, failing, breaker
    open, validators not trusted)."""
    notes: dict[str, list[str]] = {}
    for host in throttled:
        reasons = notes.setdefault(host["host"], [])
        if host["breaker_open"]:
            reasons.append(f"breaker open ({host['last_failure']})")
        elif host["n_failures"]:
            reasons.append(f"{host['n_failures']} failures")
        if host["max_delay_s"] and host["max_delay_s"] > (host["crawl_delay_s"] or 0) + 1:
            reasons.append(f"slowed to {host['max_delay_s']:.1f} s between requests")
    for row in trust.iter_rows(named=True):
        for validator in ("etag", "last_modified"):
            if row[f"{validator}_trusted"] is False:
                notes.setdefault(row["host"], []).append(
                    f"{validator} not trusted: {row[f'{validator}_reason']}"
                )
    flagged = {h: r for h, r in notes.items() if r}
    if not flagged:
        return "No host needs attention."
    lines = ["| host | why |", "|---|---|"]
    lines += [f"| {h} | {'; '.join(r)} |" for h, r in sorted(flagged.items())]
    return "\n".join(lines)
