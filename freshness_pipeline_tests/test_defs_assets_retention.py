"""defs/assets/retention.py: the cycle's retention step as Dagster runs it. Defined after the
tables it rewrites, over hosts or host buckets; run for real (dagster.materialize, a range run
over three hosts of a hand-written home) it prunes the home, puts the run's totals in one
observation and each partition's own rows removed on its materialization."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from freshness_pipeline.defs.assets.retention import (
    AFTER,
    NAME,
    define_retention,
    partition_counts,
    retention,
)
from freshness_pipeline.defs.partitions import (
    bucket_keys,
    host_buckets_partitions,
    hosts_partitions,
    range_tags,
)
from freshness_pipeline.defs.resources import CycleResource, WarehouseResource
from freshness_pipeline.warehouse.retention import RetentionSummary
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.test_warehouse_retention import (
    CONFIG,
    NOW,
    kept,
    write_state,
    write_versions,
)

HOSTS = ["a.test", "b.test", "c.test"]


def test_partition_counts_give_each_host_or_bucket_its_own_rows() -> None:
    summary = RetentionSummary(by_host={"a.test": (3, 1), "b.test": (0, 2), "gone.test": (5, 5)})
    by_host = partition_counts(summary, ["a.test", "b.test", "c.test"], 0)
    assert by_host == {
        "a.test": {"page_versions_rows": 3, "changes_rows": 1},
        "b.test": {"page_versions_rows": 0, "changes_rows": 2},
        "c.test": {"page_versions_rows": 0, "changes_rows": 0},
    }  # a host outside the run's keys is in none of them
    keys = bucket_keys(1)
    assert partition_counts(summary, keys, 1) == {
        keys[0]: {"page_versions_rows": 8, "changes_rows": 8}
    }
    keys = bucket_keys(64)
    by_bucket = partition_counts(summary, keys, 64)
    assert set(by_bucket) == set(keys)
    assert sum(f["page_versions_rows"] for f in by_bucket.values()) == 8
    assert sum(f["changes_rows"] for f in by_bucket.values()) == 8


def test_the_step_comes_after_the_tables_it_rewrites_over_hosts_or_buckets() -> None:
    assert retention.partitions_def == hosts_partitions
    assert retention.key == dg.AssetKey(NAME)
    assert set(retention.asset_deps[retention.key]) == {dg.AssetKey(t) for t in AFTER}
    assert set(AFTER) == {"url_state", "page_versions", "changes"}
    bucketed = define_retention(host_buckets_partitions(4), "4 host buckets")
    assert bucketed.partitions_def is not None
    assert bucketed.partitions_def.get_partition_keys() == bucket_keys(4)
    spec = next(iter(bucketed.specs))
    assert spec.metadata["partitioning"] == "4 host buckets"
    assert {"parquet", "warc"} <= set(spec.kinds)


def hand_written_home(root: Path) -> Warehouse:
    (root / "freshness.toml").write_text(CONFIG)
    wh = Warehouse(root)
    a, b, c = HOSTS
    write_state(wh, a, {"/l": "listing", "/x": "article"})
    write_versions(wh, a, 20, {"/l": "listing", "/x": "article"})
    write_versions(wh, a, 0, {"/l": "listing"})
    write_state(wh, b, {"/m": "listing"})
    write_versions(wh, b, 20, {"/m": "listing"})
    write_versions(wh, b, 9, {"/m": "listing"})
    write_state(wh, c, {"/y": "article"})
    write_versions(wh, c, 60, {"/y": "article"})
    return wh


def run_retention(instance: dg.DagsterInstance, home: Path) -> dg.ExecuteInProcessResult:
    """The retention step over every host of the hand-written home, as one range run."""
    return dg.materialize(
        [retention],
        instance=instance,
        resources={
            "warehouse": WarehouseResource(home=str(home)),
            "cycle": CycleResource(now=NOW.isoformat()),
        },
        tags=range_tags(HOSTS[0], HOSTS[-1], bucket="test"),
    )


def test_a_range_run_prunes_the_home_and_gives_each_partition_its_own_figures(
    tmp_path: Path,
) -> None:
    wh = hand_written_home(tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(hosts_partitions.name, HOSTS)
    result = run_retention(instance, tmp_path)
    assert result.success
    a, b, c = HOSTS
    assert kept(wh, "page_versions", a) == {("/x", 20.0), ("/l", 0.0)}
    # /m is live and its 9-day version its newest: what the page says now stays
    assert kept(wh, "page_versions", b) == {("/m", 9.0)}
    assert kept(wh, "page_versions", c) == {("/y", 60.0)}

    (observation,) = [
        e.asset_observation_data.asset_observation for e in result.get_asset_observation_events()
    ]
    totals = {k: v.value for k, v in observation.metadata.items()}
    assert observation.asset_key == dg.AssetKey(NAME)
    assert (totals["version_rows"], totals["change_rows"], totals["hosts_pruned"]) == (2, 3, 2)
    assert totals["summary"].startswith("retention removed 2 page_versions rows, 3 changes rows")

    figures = {
        e.partition: {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
    }
    assert figures == {
        a: {"page_versions_rows": 1, "changes_rows": 1},
        b: {"page_versions_rows": 1, "changes_rows": 2},
        c: {"page_versions_rows": 0, "changes_rows": 0},
    }
    # nothing left to expire: the next run says so
    again = run_retention(instance, tmp_path)
    (observation,) = [
        e.asset_observation_data.asset_observation for e in again.get_asset_observation_events()
    ]
    assert observation.metadata["summary"].value == "nothing expired"
    assert observation.metadata["hosts_pruned"].value == 0
