"""The url_candidates asset: ``stages.candidates.cycle_candidates`` with the run's hosts and time,
and the counts the UI shows (what robots.txt refused, invalid URLs, variants collapsed).
"""

import dagster as dg
import polars as pl

from freshness_pipeline.defs.assets.common import (
    HELD_BACK,
    cycle_asset,
    reads_side_tables,
    step_start,
    writes_side_tables,
)
from freshness_pipeline.defs.resources import CycleResource, HttpClientResource, WarehouseResource
from freshness_pipeline.stages.candidates import (
    cycle_candidates,
)


@cycle_asset
@writes_side_tables(
    url_canonical="Per host: each inventory URL's canonical form under the current "
    "normalization rules, a cache so that unchanged URLs are not normalized again."
)
@reads_side_tables("robots")
def url_candidates(
    context: dg.AssetExecutionContext,
    url_inventory: pl.DataFrame,
    warehouse: WarehouseResource,
    cycle: CycleResource,
    http: HttpClientResource,
) -> dg.Output[pl.DataFrame]:
    """One row per canonical URL, with whether robots.txt lets us fetch it."""
    wh, hosts = step_start(context, warehouse, "url_candidates")
    made = cycle_candidates(
        wh,
        hosts,
        url_inventory,
        cycle.cycle_now(context),
        warehouse.pipeline_config(),
        allow=http.allow_list(),
    )
    candidates, invalid = made.frame, made.invalid
    if invalid:
        context.log.warning(f"{invalid} inventory URLs are not valid http(s) URLs and were dropped")
    refused = candidates.filter(~pl.col("allowed"))
    blocked = refused.height
    reasons = dict(refused.group_by("blocked_reason").len().iter_rows())
    return dg.Output(
        candidates,
        metadata={
            "candidates": dg.MetadataValue.int(candidates.height),
            "blocked_by_robots": dg.MetadataValue.int(blocked),
            **{
                f"{HELD_BACK}{reason}": dg.MetadataValue.int(n)
                for reason, n in sorted(reasons.items(), key=lambda kv: str(kv[0]))
            },
            "invalid_urls": dg.MetadataValue.int(invalid),
            "urls_normalized_afresh": dg.MetadataValue.int(made.normalized_afresh),
            "variants_collapsed": dg.MetadataValue.int(
                int(candidates["n_variants"].sum() or 0) - candidates.height
            ),
        },
    )
