"""The url_inventory asset: ``stages.inventory.cycle_inventory`` with the run's hosts and time, and
the counts the UI shows (where the URLs came from, what discovery found).
"""

import dagster as dg
import polars as pl

from freshness_pipeline.defs.assets.common import (
    cycle_asset,
    reads_side_tables,
    step_start,
    writes_side_tables,
)
from freshness_pipeline.defs.resources import CycleResource, HttpClientResource, WarehouseResource
from freshness_pipeline.stages.inventory import (
    cycle_inventory,
)
from freshness_pipeline.warehouse.undo import keep_undo_point, leaped_from, note_cycle_run


@cycle_asset
@reads_side_tables("seeds")
@writes_side_tables(
    robots="Per host: the robots.txt record (rules, Crawl-delay, sitemaps named), the state of its "
    "/sitemap.xml, and any Retry-After hold; refreshed about once a day."
)
def url_inventory(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    cycle: CycleResource,
    http: HttpClientResource,
) -> dg.Output[pl.DataFrame]:
    """Everything known about which URLs exist, per host, with its source and sitemap lastmod."""
    wh, hosts = step_start(context, warehouse, "url_inventory")
    now = cycle.cycle_now(context)
    leaped = leaped_from(wh.newest_cycles(), hosts, now)
    if leaped is not None:
        # a year typed wrong in the launchpad froze its pages for a year, and no cycle dated
        # right could repair it (found by an exploratory run)
        said = (
            f"this cycle's now ({now.isoformat()}) is {(now - leaped).days} days after these "
            f"hosts' newest cycle ({leaped.isoformat()})"
        )
        try:
            keep_undo_point(wh, now)
        except OSError as exc:  # a full disk, or another group's snapshot beside this one
            context.log.warning(f"{said}: no snapshot could be kept ({exc})")
        else:
            context.log.warning(
                f"{said}: a snapshot of the home is kept, and `freshness undo` takes the cycle "
                "back if the date was a mistake"
            )
    else:
        note_cycle_run(wh, now)
    made = cycle_inventory(
        wh,
        hosts,
        now,
        http=None if cycle.dry_run else http,
        log=context.log,
    )
    inventory = made.frame
    by_source = inventory.group_by("source").len().sort("source")
    # URLs the crawl found itself this cycle (not seeded): what discovery brought
    found_now = (
        inventory.group_by("url")
        .agg(
            (pl.col("first_seen_at").min() == now).alias("_new"),
            (pl.col("source") == "seed").any().alias("_seed"),
        )
        .filter(pl.col("_new") & ~pl.col("_seed"))
        .height
    )
    return dg.Output(
        inventory,
        metadata={
            "urls": dg.MetadataValue.int(inventory.height),
            "hosts": dg.MetadataValue.int(len(hosts)),
            "urls_handed_to_other_hosts": dg.MetadataValue.int(made.handed_over),
            "urls_found_new": dg.MetadataValue.int(found_now),
            **{f"urls_from_{s}": dg.MetadataValue.int(n) for s, n in by_source.iter_rows()},
            **{key: dg.MetadataValue.int(n) for key, n in made.discovery.items()},
        },
    )
