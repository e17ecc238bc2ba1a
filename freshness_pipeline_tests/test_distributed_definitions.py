"""freshness_pipeline/distributed_definitions.py, the distributed deployment's code location
(``dagster dev -m freshness_pipeline.distributed_definitions``), loaded as every process of the
deployment loads it: from the environment alone. Its home's host buckets split into the groups
``FRESHNESS_BUCKET_GROUPS`` asks for, its job runs steps on the Celery executor without the
home-wide retention step, its resources follow ``FRESHNESS_HOME``; a home without host buckets
cannot be loaded, and says what to set. No broker is contacted."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import dagster as dg
import pytest

from freshness_pipeline.defs.distributed import (
    BROKER_ENV,
    GROUPS_ENV,
    JOB_NAME,
    SCHEDULE_NAME,
)
from freshness_pipeline.defs.partitions import RANGE_END_TAG, RANGE_START_TAG, bucket_keys

MODULE = "freshness_pipeline.distributed_definitions"


@pytest.fixture
def fresh_import(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The module is read afresh, as a new process reads it (it is built when imported)."""
    monkeypatch.setenv(BROKER_ENV, "redis://127.0.0.1:1/0")  # never contacted
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("FRESHNESS_CYCLE_CRON", raising=False)
    sys.modules.pop(MODULE, None)
    yield
    sys.modules.pop(MODULE, None)


def load(home: Path, monkeypatch: pytest.MonkeyPatch, groups: int) -> ModuleType:
    monkeypatch.setenv("FRESHNESS_HOME", str(home))
    monkeypatch.setenv(GROUPS_ENV, str(groups))
    import freshness_pipeline.distributed_definitions as location

    return location


def test_the_location_splits_the_homes_buckets_into_the_groups_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_import: None
) -> None:
    (tmp_path / "freshness.toml").write_text("[partitioning]\nhost_buckets = 8\n")
    location = load(tmp_path, monkeypatch, groups=4)
    defs = location.defs
    assert isinstance(defs, dg.Definitions)
    with dg.instance_for_test() as instance:
        job = defs.resolve_job_def(JOB_NAME)
        schedule = defs.resolve_schedule_def(SCHEDULE_NAME)
        tick = datetime(2026, 11, 30, 13, tzinfo=UTC)
        with dg.build_schedule_context(instance=instance, scheduled_execution_time=tick) as ctx:
            requests = schedule.evaluate_tick(ctx).run_requests
        graph = defs.resolve_asset_graph()
    assert job.executor_def.name == "celery_from_env"
    assert job.partitions_def is not None
    assert job.partitions_def.get_partition_keys() == bucket_keys(8)
    # four groups of two buckets each, one run per group per tick
    assert [(r.tags[RANGE_START_TAG], r.tags[RANGE_END_TAG]) for r in requests] == [
        (keys[0], keys[1]) for keys in zip(*[iter(bucket_keys(8))] * 2, strict=True)
    ]
    # the whole cycle but retention, which prunes the home under runs still writing it
    in_job = {key.to_user_string() for key in job.asset_layer.executable_asset_keys}
    assert "fetch_results" in in_job and "url_state" in in_job
    assert "retention" not in in_job and dg.AssetKey("retention") in graph.get_all_asset_keys()
    # every process finds the warehouse through FRESHNESS_HOME: nothing fixed in the location
    warehouse = defs.resources["warehouse"]
    assert getattr(warehouse, "home", None) == ""
    assert warehouse.warehouse().home == tmp_path  # type: ignore[attr-defined]


def test_more_groups_than_buckets_makes_one_run_per_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_import: None
) -> None:
    (tmp_path / "freshness.toml").write_text("[partitioning]\nhost_buckets = 3\n")
    location = load(tmp_path, monkeypatch, groups=16)
    with dg.instance_for_test() as instance:
        schedule = location.defs.resolve_schedule_def(SCHEDULE_NAME)
        tick = datetime(2026, 11, 30, 13, tzinfo=UTC)
        with dg.build_schedule_context(instance=instance, scheduled_execution_time=tick) as ctx:
            requests = schedule.evaluate_tick(ctx).run_requests
    assert [r.tags[RANGE_START_TAG] for r in requests] == bucket_keys(3)


@pytest.mark.parametrize("toml", ["", "[partitioning]\nhost_buckets = 0\n"])
def test_a_home_without_host_buckets_cannot_be_loaded_and_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_import: None, toml: str
) -> None:
    (tmp_path / "freshness.toml").write_text(toml)
    with pytest.raises(ValueError, match=r"set \[partitioning\] host_buckets in freshness.toml"):
        load(tmp_path, monkeypatch, groups=2)
