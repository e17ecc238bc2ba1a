"""What every asset of the cycle shares: the host partitions and one run for many hosts."""

import dagster as dg

from freshness_pipeline.partitions import hosts_partitions

GROUP = "freshness_cycle"

ASSET_KWARGS = dict(
    partitions_def=hosts_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name=GROUP,
    kinds={"polars", "parquet"},
)
