"""What every asset of the cycle shares: its partitions, one run for many hosts, and how a run's
partition keys become the hosts it covers.

Each asset is written once, as a function decorated with ``cycle_asset``. That defines the
default per-host asset and remembers the function, so that the code can define the
same graph over ``n`` host buckets (``cycle_assets_for``) when ``freshness.toml`` asks for them.
"""

from collections.abc import Callable, Iterable

import dagster as dg

from freshness_pipeline.partitions import (
    hosts_in_buckets,
    hosts_partitions,
    n_buckets_of,
    partitions_for,
)
from freshness_pipeline.storage import Warehouse

GROUP = "freshness_cycle"

_ASSET_FUNCTIONS: dict[str, Callable] = {}


def asset_kwargs(partitions_def: dg.PartitionsDefinition) -> dict:
    return dict(
        partitions_def=partitions_def,
        backfill_policy=dg.BackfillPolicy.single_run(),
        group_name=GROUP,
        kinds={"polars", "parquet"},
    )


def cycle_asset(fn: Callable) -> dg.AssetsDefinition:
    """The per-host asset of ``fn``; the function is kept for the bucketed variant."""
    _ASSET_FUNCTIONS[fn.__name__] = fn
    return dg.asset(**asset_kwargs(hosts_partitions))(fn)


def cycle_assets_for(host_buckets: int, names: Iterable[str]) -> list[dg.AssetsDefinition]:
    partitions_def = partitions_for(host_buckets)
    return [dg.asset(**asset_kwargs(partitions_def))(_ASSET_FUNCTIONS[n]) for n in names]


def partition_hosts(
    partition_keys: Iterable[str],
    partitions_def: dg.PartitionsDefinition | None,
    warehouse: Warehouse,
) -> list[str]:
    """The hosts behind a run's partition keys: the keys themselves, or every seeded host whose
    hash falls in one of the run's buckets."""
    n_buckets = n_buckets_of(partitions_def)
    if not n_buckets:
        return list(partition_keys)
    return hosts_in_buckets(partition_keys, n_buckets, warehouse.hosts_in("seeds"))


def run_hosts(context: dg.AssetExecutionContext, warehouse: Warehouse) -> list[str]:
    return partition_hosts(context.partition_keys, context.assets_def.partitions_def, warehouse)
