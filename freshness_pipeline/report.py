"""`freshness report`: the metrics of metrics_sql as of a chosen time (default: the newest
cycle), per host, per URL class and in total."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from freshness_pipeline.metrics_sql import PARAMETER_NOW, metrics_by, metrics_total
from freshness_pipeline.storage import Warehouse


def report_by(warehouse: Warehouse, key: str, now: datetime) -> pl.DataFrame:
    """Metrics grouped by 'host' or 'url_class'."""
    return warehouse.query(metrics_by(key, PARAMETER_NOW), {"now": now})


def report_totals(warehouse: Warehouse, now: datetime) -> pl.DataFrame:
    return warehouse.query(metrics_total(PARAMETER_NOW), {"now": now})


def latest_cycle_time(warehouse: Warehouse) -> datetime:
    """The newest cycle's ``now``: reports are as of the data, not of the wall clock, so a
    simulated or backfilled history reads the same any day."""
    frame = warehouse.query("SELECT max(fetched_at) AS t FROM fetch_log")
    latest = frame["t"][0] if frame.height else None
    if latest is None:
        frame = warehouse.query("SELECT max(added_at) AS t FROM seeds")
        latest = frame["t"][0] if frame.height else None
    if latest is None:
        raise ValueError("nothing seeded or fetched yet")
    return latest
