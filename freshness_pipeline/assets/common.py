"""What every asset of the cycle shares: its partitions, one run for many hosts, and how a run's
partition keys become the hosts it covers.

Each asset is written once, as a function decorated with ``cycle_asset`` (or
``cycle_multi_asset`` for a step that writes several tables). That defines the default per-host
asset and remembers the function, so that the code can define the same graph over ``n`` host
buckets (``cycle_assets_for``) when ``freshness.toml`` asks for them.
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
_OUTPUTS: dict[str, tuple[str, ...]] = {}  # the tables of each multi-output step, by step name


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
    return _define(fn.__name__, hosts_partitions)


def cycle_multi_asset(*outputs: str) -> Callable[[Callable], dg.AssetsDefinition]:
    """One step that writes several per-host tables, each an asset of its own (``fn`` yields a
    ``dg.Output`` per table, named after it)."""

    def define(fn: Callable) -> dg.AssetsDefinition:
        _ASSET_FUNCTIONS[fn.__name__] = fn
        _OUTPUTS[fn.__name__] = outputs
        return _define(fn.__name__, hosts_partitions)

    return define


def _define(name: str, partitions_def: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    kwargs = asset_kwargs(partitions_def)
    outputs = _OUTPUTS.get(name)
    if outputs is None:
        return dg.asset(**kwargs)(_ASSET_FUNCTIONS[name])
    kinds = kwargs.pop("kinds")
    outs = {table: dg.AssetOut(kinds=kinds) for table in outputs}
    return dg.multi_asset(name=name, outs=outs, **kwargs)(_ASSET_FUNCTIONS[name])


def step_name(assets_def: dg.AssetsDefinition) -> str:
    """The name a cycle step is defined under (its function's), one per asset or multi-asset."""
    return assets_def.op.name


def cycle_assets_for(host_buckets: int, names: Iterable[str]) -> list[dg.AssetsDefinition]:
    partitions_def = partitions_for(host_buckets)
    return [_define(n, partitions_def) for n in names]


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
