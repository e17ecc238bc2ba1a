"""defs/assets/common.py: what every cycle step shares. A step written once with
``cycle_asset`` (here a probe step with a side table, run for real by dagster.materialize over a
range of two hosts) puts its metadata in one observation per run and each partition's own rows
and hosts on its materialization; its side table becomes an asset of the step; the same
function is defined again over host buckets. A run's partition keys become its hosts (hosts, or
the seeded hosts of its buckets as the run first saw them), narrowed by a ``freshness/hosts``
tag, and a tag naming none of them fails the step at once."""

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from freshness_pipeline.defs.assets.common import (
    GROUP,
    asset_kwargs,
    cycle_asset,
    cycle_assets_for,
    partition_figures,
    partition_hosts,
    run_hosts,
    seeded_hosts,
    step_name,
    step_tables,
    writes_side_tables,
)
from freshness_pipeline.defs.partitions import (
    bucket_keys,
    bucket_of,
    host_buckets_partitions,
    hosts_partitions,
    hosts_tag,
    range_tags,
)
from freshness_pipeline.defs.resources import WarehouseResource
from freshness_pipeline.warehouse.storage import Warehouse

A, B = "a.test", "b.test"
ROWS = {A: ["http://a.test/1", "http://a.test/2"], B: ["http://b.test/1"]}


@cycle_asset
@writes_side_tables(probe_side="What the probe step's stage writes beside its own table.")
def probe_step(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.Output:
    """One row per URL of the run's hosts."""
    hosts = run_hosts(context, warehouse.warehouse())
    urls = [u for h in hosts for u in ROWS.get(h, [])]
    frame = pl.DataFrame({"url": urls, "host": [u.split("/")[2] for u in urls]})
    return dg.Output(frame, metadata={"hosts_seen": dg.MetadataValue.int(len(hosts))})


def seed(wh: Warehouse, *hosts: str) -> None:
    for host in hosts:
        wh.write_partition(
            "seeds",
            host,
            pl.DataFrame(
                {
                    "url": [f"http://{host}/"],
                    "host": [host],
                    "added_at": [datetime(2026, 3, 1, tzinfo=UTC)],
                }
            ),
        )


def test_asset_kwargs_put_every_step_in_one_group_with_single_run_backfills() -> None:
    kwargs = asset_kwargs(hosts_partitions)
    assert kwargs["partitions_def"] == hosts_partitions and kwargs["group_name"] == GROUP
    assert kwargs["backfill_policy"] == dg.BackfillPolicy.single_run()
    assert "metadata" not in kwargs
    shown = asset_kwargs(host_buckets_partitions(4), "4 host buckets")
    assert shown["metadata"] == {"partitioning": "4 host buckets"}


def test_partition_figures_count_rows_and_hosts_per_host_or_bucket() -> None:
    frame = pl.DataFrame(
        {"url": ["1", "2", "3", "4"], "host": [A, A, B, None]}, schema_overrides={"host": pl.String}
    )
    assert partition_figures(frame, 0) == {A: {"rows": 2, "hosts": 1}, B: {"rows": 1, "hosts": 1}}
    one = bucket_keys(1)[0]
    assert partition_figures(frame, 1) == {one: {"rows": 3, "hosts": 2}}
    by_bucket = partition_figures(frame, 64)
    assert by_bucket[bucket_of(A, 64)]["rows"] >= 2
    assert sum(f["rows"] for f in by_bucket.values()) == 3
    assert sum(f["hosts"] for f in by_bucket.values()) == 2
    assert partition_figures(frame.drop("host"), 0) == {}
    assert partition_figures(frame.clear(), 0) == {}


def test_partition_keys_become_hosts_narrowed_by_the_hosts_tag(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    seed(wh, A, B, "c.test")
    assert partition_hosts([A, B], hosts_partitions, wh) == [A, B]
    assert partition_hosts([A, B], hosts_partitions, wh, hosts_tag([B, "z.test"])) == [B]
    buckets = host_buckets_partitions(4)
    in_a = bucket_of(A, 4)
    expected = sorted(h for h in (A, B, "c.test") if bucket_of(h, 4) == in_a)
    assert partition_hosts([in_a], buckets, wh) == expected
    assert partition_hosts(bucket_keys(4), buckets, wh) == [A, B, "c.test"]


def test_a_run_sees_the_seeded_hosts_it_first_saw(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    seed(wh, A)
    assert seeded_hosts(wh, "run-1") == [A]
    seed(wh, B)  # the run's own inventory step hands over a new host
    assert seeded_hosts(wh, "run-1") == [A]  # joins at the next run, not halfway through
    assert seeded_hosts(wh, "run-2") == [A, B]
    assert seeded_hosts(wh) == [A, B]
    buckets = bucket_keys(1)
    assert partition_hosts(buckets, host_buckets_partitions(1), wh, run_id="run-1") == [A]


def test_a_step_is_defined_once_and_again_over_host_buckets() -> None:
    assert step_name(probe_step) == "probe_step"
    assert step_tables("probe_step") == ("probe_step", "probe_side")
    assert {k.to_user_string() for k in probe_step.keys} == {"probe_step", "probe_side"}
    assert probe_step.partitions_def == hosts_partitions
    specs = {s.key.to_user_string(): s for s in probe_step.specs}
    assert specs["probe_step"].description == "One row per URL of the run's hosts."
    assert specs["probe_side"].description == (
        "What the probe step's stage writes beside its own table."
    )
    (bucketed,) = cycle_assets_for(4, ["probe_step"], "4 host buckets")
    assert bucketed.partitions_def is not None
    assert bucketed.partitions_def.get_partition_keys() == bucket_keys(4)
    assert {s.metadata.get("partitioning") for s in bucketed.specs} == {"4 host buckets"}


def materialize(home: Path, tags: dict[str, str] | None = None) -> dg.ExecuteInProcessResult:
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(hosts_partitions.name, [A, B])
    return dg.materialize(
        [probe_step],
        instance=instance,
        resources={
            "io_manager": dg.InMemoryIOManager(),
            "warehouse": WarehouseResource(home=str(home)),
        },
        tags={**range_tags(A, B, bucket="test"), **(tags or {})},
        raise_on_error=False,
    )


def figures(result: dg.ExecuteInProcessResult, asset: str) -> dict[str | None, dict]:
    return {
        e.partition: {k: v.value for k, v in e.materialization.metadata.items()}
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey(asset)
    }


def test_a_range_run_observes_its_totals_once_and_gives_each_partition_its_own(
    tmp_path: Path,
) -> None:
    result = materialize(tmp_path)
    assert result.success
    (observation,) = [
        e.asset_observation_data.asset_observation for e in result.get_asset_observation_events()
    ]
    assert observation.asset_key == dg.AssetKey("probe_step")
    assert {k: v.value for k, v in observation.metadata.items()} == {
        "hosts_seen": 2,
        "partitions": 2,
        "rows": 3,
    }
    assert figures(result, "probe_step") == {
        A: {"rows": 2, "hosts": 1},
        B: {"rows": 1, "hosts": 1},
    }
    assert set(figures(result, "probe_side")) == {A, B}  # the side table: an asset of the step


def test_the_hosts_tag_narrows_the_run_and_one_naming_none_of_its_hosts_fails(
    tmp_path: Path,
) -> None:
    narrowed = materialize(tmp_path, hosts_tag([B]))
    assert narrowed.success
    assert figures(narrowed, "probe_step") == {
        A: {"rows": 0, "hosts": 0},
        B: {"rows": 1, "hosts": 1},
    }
    seed(Warehouse(tmp_path), A, B, "c.test")
    wrong = materialize(tmp_path, hosts_tag(["c.test", "elsewhere.test"]))
    assert not wrong.success
    (failure,) = [e for e in wrong.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    message = error.message if error else ""
    assert (
        "names c.test, elsewhere.test, none of which is in its partitions "
        "(c.test: its own partition; elsewhere.test: not seeded)"
    ) in message
    assert not figures(wrong, "probe_step")


@pytest.mark.parametrize("host", [A, "unseeded.test"])
def test_a_bucketed_hosts_tag_says_where_a_host_is(tmp_path: Path, host: str) -> None:
    wh = Warehouse(tmp_path)
    seed(wh, A)
    (bucketed,) = cycle_assets_for(2, ["probe_step"])
    elsewhere = next(k for k in bucket_keys(2) if k != bucket_of(A, 2))
    result = dg.materialize(
        [bucketed],
        instance=dg.DagsterInstance.ephemeral(),
        resources={
            "io_manager": dg.InMemoryIOManager(),
            "warehouse": WarehouseResource(home=str(tmp_path)),
        },
        partition_key=elsewhere,
        tags=hosts_tag([host]),
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    message = error.message if error else ""
    said = f"in {bucket_of(A, 2)}" if host == A else "not seeded"
    assert f"{host}: {said}" in message


def test_loading_the_definitions_warns_nothing_and_silences_nothing_else() -> None:
    """`dagster dev` printed Dagster's BetaWarning for ``backfill_policy`` four times at each
    start (and every run worker did): a choice of this project's, read by a newcomer as a
    fault. Only that warning, and only where the steps are defined, is silenced."""
    import subprocess
    import sys
    import warnings

    loaded = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import freshness_pipeline.definitions"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "Warning" not in loaded.stderr, loaded.stderr
    before = list(warnings.filters)
    cycle_assets_for(2, ["probe_step"])
    assert warnings.filters == before

    def elsewhere() -> None:
        pass

    with pytest.warns(dg.BetaWarning, match="backfill_policy"):  # a user's own asset still warns
        dg.asset(backfill_policy=dg.BackfillPolicy.single_run())(elsewhere)


@pytest.mark.parametrize(
    ("tags", "said"),
    [
        ({}, "this run names no partitions: a cycle step runs for hosts"),
        ({"dagster/partition": "gone.test"}, "reload the code location (Deployment, Reload)"),
    ],
)
def test_a_run_without_usable_partitions_says_what_to_do(
    tmp_path: Path, tags: dict[str, str], said: str
) -> None:
    """Launched with no partition (a launchpad left blank), or for a host key the code location
    no longer has (a seed load moved the home into host buckets before a reload), a run failed
    with Dagster's raw "Cannot access partition_key for a non-partitioned run" or
    "Nonexistent partition keys"."""
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(hosts_partitions.name, [A, B])
    result = dg.materialize(
        [probe_step],
        instance=instance,
        resources={
            "io_manager": dg.InMemoryIOManager(),
            "warehouse": WarehouseResource(home=str(tmp_path)),
        },
        tags=tags,
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    error = failure.step_failure_data.error
    assert error is not None and said in error.message, error
