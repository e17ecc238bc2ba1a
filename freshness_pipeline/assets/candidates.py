"""url_candidates: the inventory normalized, deduplicated and checked against robots.txt.

URL variants (tracking parameters, fragments, case, default ports, query order) collapse to one
canonical row. URLs robots.txt forbids stay in the table, marked not allowed, so that url_state
can say 'blocked' instead of silently forgetting them.
"""

from datetime import datetime

import dagster as dg
import polars as pl

from freshness_pipeline import tables
from freshness_pipeline.assets.common import cycle_asset, run_hosts
from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.crashpoints import crash_point
from freshness_pipeline.resources import CycleResource, WarehouseResource
from freshness_pipeline.science.normalize import normalize_url_column
from freshness_pipeline.web.discovery import record_from_row
from freshness_pipeline.web.robots import allowed_mask, robots_policy


def normalize_inventory(urls: pl.Series, config: PipelineConfig) -> pl.DataFrame:
    """Canonical URLs, with the extra parameters some hosts are configured to strip (session
    ids, sort orders) removed on those hosts only."""
    norm = normalize_url_column(urls)
    for host in config.host_strip_params:
        rows = norm.with_row_index("_i").filter(pl.col("host") == host)["_i"]
        if rows.len():
            special = normalize_url_column(
                urls.gather(rows), strip_params=config.strip_params_for(host)
            )
            norm = norm.with_columns(norm["url"].scatter(rows, special["url"]))
    return norm


def canonical_candidates(
    inventory: pl.DataFrame,
    hosts: list[str],
    now: datetime,
    config: PipelineConfig | None = None,
) -> tuple[pl.DataFrame, int]:
    """Collapse the inventory to one row per canonical URL; returns (rows, invalid count)."""
    norm = normalize_inventory(inventory["url"], config or PipelineConfig())
    rows = inventory.drop("host").with_columns(
        canonical=norm["url"], canonical_host=norm["host"], error=norm["error"]
    )
    invalid = rows.filter(pl.col("error").is_not_null()).height
    rows = rows.filter(pl.col("error").is_null() & pl.col("canonical_host").is_in(hosts))
    # Only a lastmod from a sitemap read in this cycle counts: an older listing says nothing
    # about changes since it was read, and a URL dropped from the sitemap may be gone while its
    # old lastmod would claim "unchanged" forever.
    listed_now = (pl.col("source") == "sitemap") & (
        pl.col("last_seen_at") == pl.lit(now).cast(tables.UTC_TIME)
    )
    rows = rows.with_columns(lastmod=pl.when(listed_now).then("lastmod"))
    grouped = (
        rows.group_by("canonical")
        .agg(
            pl.col("canonical_host").first().alias("host"),
            pl.col("value").max(),
            pl.col("url_class").drop_nulls().first(),
            pl.col("source").unique().sort().str.join(",").alias("sources"),
            pl.col("url").n_unique().cast(pl.Int64).alias("n_variants"),
            pl.col("lastmod").max(),
            pl.col("first_seen_at").min(),
        )
        .rename({"canonical": "url"})
        .with_columns(pl.col("value").fill_null(1.0))
    )
    return grouped, invalid


def apply_robots(candidates: pl.DataFrame, robots: pl.DataFrame) -> pl.DataFrame:
    """Mark what robots.txt disallows. Without a robots record (a dry run before the first
    fetch) a URL is allowed for planning; the fetch stage never runs without one."""
    parts = []
    records = {row["host"]: row for row in robots.iter_rows(named=True)}
    for (host,), part in candidates.partition_by("host", as_dict=True).items():
        row = records.get(host)
        if row is None:
            parts.append(
                part.with_columns(allowed=pl.lit(True), blocked_reason=pl.lit(None, pl.String))
            )
            continue
        policy = robots_policy(record_from_row(row))
        mask = pl.Series("allowed", allowed_mask(policy, part["url"].to_list()), dtype=pl.Boolean)
        reason = "robots.txt disallows" if policy.mode == "parsed" else f"robots.txt {policy.mode}"
        parts.append(
            part.with_columns(mask).with_columns(
                blocked_reason=pl.when(pl.col("allowed")).then(None).otherwise(pl.lit(reason))
            )
        )
    if not parts:
        return tables.empty("url_candidates")
    return pl.concat(parts, how="vertical_relaxed")


@cycle_asset
def url_candidates(
    context: dg.AssetExecutionContext,
    url_inventory: pl.DataFrame,
    warehouse: WarehouseResource,
    cycle: CycleResource,
) -> dg.Output[pl.DataFrame]:
    """One row per canonical URL, with whether robots.txt lets us fetch it."""
    crash_point("asset:url_candidates:start")
    hosts = run_hosts(context, warehouse.warehouse())
    candidates, invalid = canonical_candidates(
        url_inventory, hosts, cycle.cycle_now(context), warehouse.pipeline_config()
    )
    candidates = apply_robots(candidates, warehouse.warehouse().read("robots", hosts))
    candidates = tables.conform("url_candidates", candidates).sort(["host", "url"])
    if invalid:
        context.log.warning(f"{invalid} inventory URLs are not valid http(s) URLs and were dropped")
    blocked = candidates.filter(~pl.col("allowed")).height
    return dg.Output(
        candidates,
        metadata={
            "candidates": dg.MetadataValue.int(candidates.height),
            "blocked_by_robots": dg.MetadataValue.int(blocked),
            "invalid_urls": dg.MetadataValue.int(invalid),
            "variants_collapsed": dg.MetadataValue.int(
                int(candidates["n_variants"].sum() or 0) - candidates.height
            ),
        },
    )
