"""fetch_results: the plan's selected URLs fetched with conditional GETs, one row per planned URL.

Every planned URL gets a row: sent requests with their outcome, the rest 'deferred' (host
throttled, cycle time limit). Requests actually sent are also appended to the fetch_log history,
one file per cycle per host, named after the cycle so a re-run replaces rather than duplicates.
"""

from dataclasses import asdict

import dagster as dg
import polars as pl

from freshness_pipeline import tables
from freshness_pipeline.assets.common import ASSET_KWARGS
from freshness_pipeline.crashpoints import crash_point
from freshness_pipeline.resources import CycleResource, HttpClientResource, WarehouseResource
from freshness_pipeline.science.fingerprint import FINGERPRINT_VERSION
from freshness_pipeline.web.client import FetchRequest, fetch_all_sync


def fetch_requests(plan: pl.DataFrame) -> list[FetchRequest]:
    selected = plan.filter(pl.col("selected")).sort("rank")
    return [
        FetchRequest(
            url=row["url"],
            host=row["host"],
            etag=row["etag"],
            last_modified=row["last_modified"],
            prev_fingerprint=row["fingerprint"],
            crawl_delay=row["crawl_delay"],
        )
        for row in selected.select(
            "url", "host", "etag", "last_modified", "fingerprint", "crawl_delay"
        ).iter_rows(named=True)
    ]


def results_frame(plan: pl.DataFrame, results: list, now) -> pl.DataFrame:
    if not results:
        return tables.empty("fetch_results")
    frame = pl.DataFrame([asdict(r) for r in results], infer_schema_length=None)
    reasons = plan.select("url", pl.col("reason").alias("plan_reason"))
    return tables.conform(
        "fetch_results",
        frame.join(reasons, on="url", how="left").with_columns(
            fetched_at=pl.lit(now).cast(tables.UTC_TIME),
            fingerprint_version=pl.lit(FINGERPRINT_VERSION, pl.Int64),
        ),
    )


@dg.asset(**ASSET_KWARGS)
def fetch_results(
    context: dg.AssetExecutionContext,
    revisit_plan: pl.DataFrame,
    warehouse: WarehouseResource,
    cycle: CycleResource,
    http: HttpClientResource,
) -> dg.Output[pl.DataFrame]:
    """What each planned fetch found: 304, same content, changed content, gone, or an error."""
    crash_point("asset:fetch_results:start")
    hosts = list(context.partition_keys)
    now = cycle.cycle_now(context)
    wh = warehouse.warehouse()
    requests = fetch_requests(revisit_plan)
    if cycle.dry_run:
        raise dg.Failure("fetch_results does not run in a dry run; select the planning assets only")
    results = fetch_all_sync(
        requests,
        http.settings(time_limit_s=cycle.fetch_time_limit_s),
        allow=http.allow_list(),
    )
    frame = results_frame(revisit_plan, results, now)
    sent = frame.filter(pl.col("sent"))
    for host in hosts:
        wh.append_fetch_log(host, now, sent.filter(pl.col("host") == host))
    counts = dict(frame.group_by("outcome").len().iter_rows())
    conditional = sent.filter(pl.col("conditional"))
    ok_bodies = sent.filter(pl.col("http_status") == 200)
    return dg.Output(
        frame.sort(["host", "url"]),
        metadata={
            "requests_sent": dg.MetadataValue.int(sent.height),
            **{f"outcome_{k}": dg.MetadataValue.int(v) for k, v in sorted(counts.items())},
            "share_304_of_conditional": dg.MetadataValue.float(
                float((conditional["http_status"] == 304).mean() or 0.0)
                if conditional.height
                else 0.0
            ),
            "unchanged_share_of_200": dg.MetadataValue.float(
                float((ok_bodies["outcome"] == "unchanged").mean() or 0.0)
                if ok_bodies.height
                else 0.0
            ),
            "bytes": dg.MetadataValue.int(int(sent["bytes"].sum() or 0)),
        },
    )
