"""The IO manager: each host partition of an asset is one Parquet file in the warehouse.

The stock dagster-polars and dagster-duckdb-polars IO managers fail at run time with polars 2 and
duckdb 2 and cannot write a range of partitions in one go; this one writes every host of a range
run from one frame and loads only the run's hosts (those its partitions cover, narrowed by a
``freshness/hosts`` tag). Nothing is kept between steps: each input is read from the files the
step before wrote, so a run holds one step's frames at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import dagster as dg
import polars as pl

from freshness_pipeline.assets.common import partition_hosts
from freshness_pipeline.storage import Warehouse

#: threads writing one table's host files: each file is a create, a write, an fsync and a
#: rename, which wait on the file system far more than they compute, so a few overlap well
#: even on two cores (docs/scaling.md)
WRITERS = 8


def write_host_files(
    warehouse: Warehouse, table: str, hosts: Sequence[str], frame: pl.DataFrame
) -> int:
    """``Warehouse.write_partitions`` over ``WRITERS`` threads, each with its share of the hosts;
    every file is still written whole or not at all. Rows of a host outside ``hosts`` are
    refused as write_partitions refuses them."""
    if len(hosts) < 2 * WRITERS:
        return warehouse.write_partitions(table, hosts, frame)
    shares = [list(hosts[i::WRITERS]) for i in range(WRITERS)]
    share_of = {host: i for i, share in enumerate(shares) for host in share}
    # A host outside the run goes to share 0, whose write_partitions refuses it.
    keyed = frame.with_columns(
        pl.col("host")
        .replace_strict(share_of, default=0, return_dtype=pl.Int64)
        .fill_null(0)
        .alias("_share")
    )
    parts = {
        key[0]: part.drop("_share")
        for key, part in keyed.partition_by("_share", as_dict=True).items()
    }
    empty = frame.clear()
    with ThreadPoolExecutor(WRITERS, thread_name_prefix=f"write-{table}") as pool:
        done = [
            pool.submit(warehouse.write_partitions, table, share, parts.get(i, empty))
            for i, share in enumerate(shares)
        ]
        return sum(future.result() for future in done)


def _run(context: dg.InputContext | dg.OutputContext) -> tuple[Mapping[str, str], str | None]:
    """The run's tags and id; none outside a run (``load_asset_value`` builds no step)."""
    try:
        step = context.step_context
    except dg.DagsterInvariantViolationError:
        return {}, None
    return step.run_tags, step.run_id


class WarehouseIOManager(dg.ConfigurableIOManager):
    home: str = ""

    def _warehouse(self) -> Warehouse:
        return Warehouse(self.home or None)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        table = context.asset_key.path[-1]
        wh = self._warehouse()
        hosts = partition_hosts(
            context.asset_partition_keys,
            context.asset_partitions_def,
            wh,
            *_run(context),
        )
        write_host_files(wh, table, hosts, obj)

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        table = context.asset_key.path[-1]
        wh = self._warehouse()
        hosts = partition_hosts(
            context.asset_partition_keys,
            context.asset_partitions_def,
            wh,
            *_run(context),
        )
        return wh.read(table, hosts)
