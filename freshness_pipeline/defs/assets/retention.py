"""retention: the cycle's last step, which expires what the home's ``[retention]`` and
``[url_classes.C.retention]`` settings no longer keep (freshness_pipeline.warehouse.retention).

A step of the graph rather than something the CLI does after its runs, so that a cycle the
schedule or the UI launched prunes exactly as a ``freshness cycle`` does, through the same code,
and the UI shows what it removed. It runs after url_state, page_versions and changes: the
prune rewrites files of those tables (it moves their archive locations off expired WARC files),
so none of them may still be written after it.

The prune is home-wide, not per partition: a WARC file holds records of every host the cycle
fetched, so it can go only once every host's rows are moved off it. Its materializations carry
each partition's own figures (rows removed for its hosts); the run's totals go into one
observation, as the other steps' do (assets.common).
"""

import dagster as dg

from freshness_pipeline.defs.assets.common import asset_kwargs, single_run_backfills, step_start
from freshness_pipeline.defs.partitions import (
    bucket_index,
    bucket_keys,
    hosts_partitions,
    n_buckets_of,
)
from freshness_pipeline.defs.resources import CycleResource, WarehouseResource
from freshness_pipeline.warehouse.retention import RetentionSummary, prune_home

__all__ = ["NAME", "define_retention", "partition_counts", "retention"]

NAME = "retention"
#: what must be written before the prune may rewrite it
AFTER = ("url_state", "page_versions", "changes")


def partition_counts(
    summary: RetentionSummary, keys: list[str], n_buckets: int
) -> dict[str, dict[str, int]]:
    """page_versions and changes rows removed per partition key (a host, or its bucket)."""
    figures = {key: {"page_versions_rows": 0, "changes_rows": 0} for key in keys}
    names = bucket_keys(n_buckets) if n_buckets else []
    for host, (versions, changes) in summary.by_host.items():
        key = names[bucket_index(host, n_buckets)] if n_buckets else host
        if key in figures:
            figures[key]["page_versions_rows"] += versions
            figures[key]["changes_rows"] += changes
    return figures


def define_retention(
    partitions_def: dg.PartitionsDefinition, partitioning: str = ""
) -> dg.AssetsDefinition:
    """The retention step over ``partitions_def`` (hosts, or host buckets), like the other
    cycle steps (assets.common.cycle_assets_for); it has no table of its own, so no IO manager
    is involved."""
    kwargs = asset_kwargs(partitions_def, partitioning)
    kwargs["kinds"] = {"parquet", "warc"}
    n_buckets = n_buckets_of(partitions_def)

    def retention(
        context: dg.AssetExecutionContext,
        warehouse: WarehouseResource,
        cycle: CycleResource,
    ) -> dg.MaterializeResult:
        """Expire the crawled copy's rows and WARC files the retention settings no longer keep,
        as of the cycle's now, keeping every revisit's original and every row's location."""
        # a freshness/hosts tag naming none of the run's hosts fails here
        wh, _ = step_start(context, warehouse, NAME)
        now = cycle.cycle_now(context)
        summary = prune_home(
            wh,
            warehouse.pipeline_config(),
            now,
            what=f"retention of cycle {now.isoformat()} (run {context.run.run_id[:8]})",
        )
        note = summary.note()
        if summary.skipped:
            context.log.warning(note)
        elif note:
            context.log.info(note)
        totals: dict[str, dg.MetadataValue] = {
            name: dg.MetadataValue.int(n) for name, n in summary.counts().items()
        }
        totals["hosts_pruned"] = dg.MetadataValue.int(
            sum(1 for versions, changes in summary.by_host.values() if versions or changes)
        )
        totals["summary"] = dg.MetadataValue.text(note or "nothing expired")
        context.log_event(dg.AssetObservation(asset_key=context.asset_key, metadata=totals))
        keys = list(context.partition_keys)
        for key, figures in partition_counts(summary, keys, n_buckets).items():
            context.add_asset_metadata(figures, partition_key=key)
        return dg.MaterializeResult()

    with single_run_backfills():
        return dg.asset(name=NAME, deps=list(AFTER), **kwargs)(retention)


retention = define_retention(hosts_partitions)
