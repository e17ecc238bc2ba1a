"""What a cycle that died between its fetches and its state wrote, taken back.

The fetch step writes its history as it ends (fetch_log, page_versions, changes) and moves the
running totals on (fetch_totals, validator_evidence, validator_latest); url_state, written by
the next step, is what plans the next cycle. A cycle killed or failed in between left rows
url_state never heard of: the next cycle fetched those pages again and recorded every change
a second time, in `changes`, exports, notifications and the metrics (found by an exploratory
run: 20 changes counted 40 times). Per host whose state did not take the cycle in, its rows
are removed and its running totals brought back to what they were; its WARC records stay (no
row points at them, and retention expires them with their files).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.layout import file_identity, scan_files
from freshness_pipeline.warehouse.storage import Warehouse

__all__ = ["forget_unrecorded_cycle", "plans_carried_out"]

#: running totals with a row per cycle: the dead cycle's rows go
_PER_CYCLE = ("fetch_totals",)
#: running totals a cycle moves on in place: dropped for the host, and counted again from
#: fetch_log when next read (stages.running_totals, as after an upgrade)
_RECOUNTED = ("validator_evidence", "validator_latest")


def forget_unrecorded_cycle(wh: Warehouse, moment: datetime) -> list[str]:
    """Take back cycle ``moment``'s rows for every host whose url_state does not have it (no
    URL last fetched then); the hosts, sorted."""
    logs = wh.files("fetch_log", since=moment, until=moment + timedelta(microseconds=1))
    if not logs:
        return []
    fetched = (
        scan_files([str(p) for p in logs], schema=tables.SCHEMAS["fetch_log"])
        .select("host")
        .unique()
        .collect()["host"]
        .to_list()
    )
    at = pl.lit(moment).cast(tables.UTC_TIME)
    state = wh.read("url_state", fetched, columns=["host", "last_fetched_at"])
    recorded = set(state.filter(pl.col("last_fetched_at") == at)["host"].to_list())
    unrecorded = sorted(set(fetched) - recorded)
    for host in unrecorded:
        for table in tables.HISTORY_TABLES:
            wh.cycle_file(table, host, moment).unlink(missing_ok=True)
        for table in _PER_CYCLE:
            if wh.has_partition(table, host):
                rows = wh.read(table, [host])
                wh.write_partition(table, host, rows.filter(pl.col("cycle_at") != at))
        for table in _RECOUNTED:
            wh.partition_file(table, host).unlink(missing_ok=True)
    return unrecorded


def plans_carried_out(wh: Warehouse, hosts: list[str]) -> list[str]:
    """Hosts whose url_state was written after their plan: the plan was fetched and recorded.
    Selected alone, the fetch step fetched such a plan again, without validators, and recorded
    every page 'new' a second time (found by an exploratory run)."""
    done = []
    for host in hosts:
        planned = file_identity(str(wh.partition_file("revisit_plan", host)))
        recorded = file_identity(str(wh.partition_file("url_state", host)))
        if planned is not None and recorded is not None and recorded[1] > planned[1]:
            done.append(host)
    return done
