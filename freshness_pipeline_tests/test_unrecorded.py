"""warehouse/unrecorded.py on a hand-written home: a cycle's rows are taken back for the hosts
whose url_state never took the cycle in, and only for them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.warehouse.unrecorded import forget_unrecorded_cycle

T0 = datetime(2026, 3, 2, tzinfo=UTC)
T1 = T0 + timedelta(hours=6)
HOSTS = ["kept.example", "lost.example"]


def test_only_the_hosts_whose_state_missed_the_cycle_lose_its_rows(tmp_path) -> None:
    wh = Warehouse(tmp_path)
    for host in HOSTS:
        url = f"https://{host}/p"
        for at in (T0, T1):
            wh.append_cycle(
                "fetch_log",
                host,
                at,
                pl.DataFrame({"url": [url], "host": [host], "fetched_at": [at]}),
            )
            wh.append_cycle(
                "changes",
                host,
                at,
                pl.DataFrame({"url": [url], "host": [host], "changed_at": [at]}),
            )
        wh.write_partition(
            "fetch_totals",
            host,
            pl.DataFrame({"host": [host, host], "cycle_at": [T0, T1], "requests": [1, 1]}),
        )
        wh.write_partition("validator_latest", host, pl.DataFrame({"url": [url], "host": [host]}))
        wh.write_partition("validator_evidence", host, pl.DataFrame({"host": [host]}))
        # the state step took T1 in for one host only (it died in between for the other)
        last = T1 if host == "kept.example" else T0
        wh.write_partition(
            "url_state",
            host,
            pl.DataFrame({"url": [url], "host": [host], "last_fetched_at": [last]}),
        )

    assert forget_unrecorded_cycle(wh, T1) == ["lost.example"]
    for table, at in tables.HISTORY_TABLES.items():
        if table == "page_versions":
            continue
        times = {h: sorted(wh.read(table, [h])[at].to_list()) for h in HOSTS}
        assert times == {"kept.example": [T0, T1], "lost.example": [T0]}, table
    assert wh.read("fetch_totals", ["lost.example"])["cycle_at"].to_list() == [T0]
    assert wh.read("fetch_totals", ["kept.example"]).height == 2
    for table in ("validator_latest", "validator_evidence"):  # counted again from fetch_log
        assert not wh.has_partition(table, "lost.example")
        assert wh.has_partition(table, "kept.example")
    assert forget_unrecorded_cycle(wh, T1) == []  # nothing left of it: a no-op
    assert forget_unrecorded_cycle(wh, T1 + timedelta(hours=6)) == []  # no such cycle
