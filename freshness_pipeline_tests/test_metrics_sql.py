"""warehouse/metrics_sql.py: the metric views' SQL, run by DuckDB over a home's tables."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from freshness_pipeline.warehouse.metrics_sql import METRIC_VIEWS, metrics_by, metrics_total
from freshness_pipeline.warehouse.storage import Warehouse


def test_only_hosts_and_url_classes_are_metric_keys() -> None:
    with pytest.raises(ValueError, match="metrics key must be 'host' or 'url_class'"):
        metrics_by("url; DROP TABLE url_state", "now()")


def test_the_metrics_run_on_a_home_without_a_cycle(tmp_path: Path) -> None:
    """An empty home's views (0-row files of each schema) answer every metric query: one
    total row, and no host or class rows, rather than an error about a missing column."""
    wh = Warehouse(tmp_path)
    wh.ensure_views(force=True)
    with duckdb.connect(str(wh.duckdb_path), read_only=True) as con:
        (total,) = con.execute(metrics_total("TIMESTAMPTZ '2026-03-02 12:00:00+00'")).fetchall()
        assert len(total) > 5
        for name in METRIC_VIEWS:
            assert con.execute(f"SELECT count(*) FROM {name}").fetchone() == (0,)  # noqa: S608
