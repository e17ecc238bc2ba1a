"""defs/schedules.py: a tick's run configuration, and a code location that no longer fits its
home says so instead of planning runs over partition keys the run would not have."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from freshness_pipeline.defs.schedules import cycle_run_config, stale_definitions
from freshness_pipeline.warehouse.storage import Warehouse

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)


def test_a_tick_passes_its_time_as_the_cycles_now() -> None:
    assert cycle_run_config("2026-03-02T12:00:00+00:00") == {
        "resources": {"cycle": {"config": {"now": "2026-03-02T12:00:00+00:00"}}}
    }
    assert cycle_run_config("T", budget=50)["resources"]["cycle"]["config"] == {
        "now": "T",
        "budget": 50,
    }


def seeded(home: Path, n_hosts: int) -> Warehouse:
    wh = Warehouse(home)
    for i in range(n_hosts):
        host = f"h{i:03d}.example"
        wh.write_partition(
            "seeds",
            host,
            pl.DataFrame({"url": [f"https://{host}/"], "host": [host], "added_at": [T0]}),
        )
    return wh


def test_a_location_loaded_per_host_is_stale_once_the_home_needs_buckets(tmp_path: Path) -> None:
    few = seeded(tmp_path / "few", 3)
    assert stale_definitions(0, few) is None  # per host, as loaded
    assert "loaded with 16 host buckets" in (stale_definitions(16, few) or "")
    many = seeded(tmp_path / "many", 101)
    note = stale_definitions(0, many)
    assert note is not None and "16 host buckets" in note and "reload" in note


def test_an_unreadable_freshness_toml_is_named(tmp_path: Path) -> None:
    wh = seeded(tmp_path / "home", 2)
    (wh.home / "freshness.toml").write_text("[partitioning]\nhost_buckets = 'many'\n")
    note = stale_definitions(0, wh)
    assert note is not None and note.startswith("freshness.toml is unreadable")


def test_a_cron_that_is_no_cron_expression_skips_every_tick_and_the_location_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`FRESHNESS_CYCLE_CRON='every 5 minutes'` made Dagster refuse the schedule, and the whole
    code location failed to load (found by an exploratory run)."""
    import dagster as dg

    from freshness_pipeline.defs.schedules import DEFAULT_CRON, build_cycle_schedule

    monkeypatch.setenv("FRESHNESS_CYCLE_CRON", "every 5 minutes")
    schedule = build_cycle_schedule()
    assert schedule.cron_schedule == DEFAULT_CRON
    with dg.instance_for_test() as instance:
        context = dg.build_schedule_context(instance=instance, scheduled_execution_time=T0)
        result = schedule.evaluate_tick(context)
    assert result.skip_message is not None and "'every 5 minutes'" in result.skip_message
    monkeypatch.setenv("FRESHNESS_CYCLE_CRON", "*/5 * * * *")
    assert build_cycle_schedule().cron_schedule == "*/5 * * * *"
