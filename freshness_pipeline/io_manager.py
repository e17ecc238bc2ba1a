"""The IO manager: each host partition of an asset is one Parquet file in the warehouse.

The stock dagster-polars and dagster-duckdb-polars IO managers fail at run time with polars 2 and
duckdb 2 and cannot write a range of partitions in one go; this one writes every host of a range
run from one frame and loads only the run's hosts.
"""

from __future__ import annotations

import dagster as dg
import polars as pl

from freshness_pipeline.assets.common import partition_hosts
from freshness_pipeline.storage import Warehouse


class WarehouseIOManager(dg.ConfigurableIOManager):
    home: str = ""

    def _warehouse(self) -> Warehouse:
        return Warehouse(self.home or None)

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        table = context.asset_key.path[-1]
        wh = self._warehouse()
        hosts = partition_hosts(context.asset_partition_keys, context.asset_partitions_def, wh)
        wh.write_partitions(table, hosts, obj)

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        table = context.asset_key.path[-1]
        wh = self._warehouse()
        hosts = partition_hosts(context.asset_partition_keys, context.asset_partitions_def, wh)
        return wh.read(table, hosts)
