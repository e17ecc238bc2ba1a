"""The IO manager: each host partition of an asset is one Parquet file in the warehouse.

The stock dagster-polars and dagster-duckdb-polars IO managers fail at run time with polars 2 and
duckdb 2 and cannot write a range of partitions in one go; this one writes every host of a range
run from one frame and loads only the run's hosts (those its partitions cover, narrowed by a
``freshness/hosts`` tag). Dagster keeps no output between steps: each input is read through the
warehouse, which answers a read of the table it wrote last from that frame while its files are
unchanged (``warehouse.last_write``), so a run holds one step's frames and at most the one frame
its last write left.
"""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg
import polars as pl

from freshness_pipeline.defs.assets.common import COLUMNS_KEY, partition_hosts
from freshness_pipeline.warehouse.storage import Warehouse


def _run(context: dg.InputContext | dg.OutputContext) -> tuple[Mapping[str, str], str | None]:
    """The run's tags and id; none outside a run (``load_asset_value`` builds no step)."""
    try:
        step = context.step_context
    except dg.DagsterInvariantViolationError:
        return {}, None
    return step.run_tags, step.run_id


class WarehouseIOManager(dg.ConfigurableIOManager):
    home: str = ""

    def _table_hosts(
        self, context: dg.InputContext | dg.OutputContext
    ) -> tuple[Warehouse, str, list[str]]:
        """The warehouse, the asset's table and the hosts the run's partitions cover."""
        wh = Warehouse(self.home or None)
        hosts = partition_hosts(
            context.asset_partition_keys, context.asset_partitions_def, wh, *_run(context)
        )
        return wh, context.asset_key.path[-1], hosts

    def handle_output(self, context: dg.OutputContext, obj: pl.DataFrame) -> None:
        wh, table, hosts = self._table_hosts(context)
        wh.write_partitions(table, hosts, obj)

    def load_input(self, context: dg.InputContext) -> pl.DataFrame:
        wh, table, hosts = self._table_hosts(context)
        columns = (context.definition_metadata or {}).get(COLUMNS_KEY)
        return wh.read(table, hosts, columns=columns)
