"""Host-bucket partitioning: the same cycles over hash buckets of hosts give the same tables as
per-host partitions, with a fraction of Dagster's per-partition bookkeeping."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import dagster as dg
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from freshness_pipeline.app.runner import execute_cycle_run, load_seeds, open_instance, run_cycle
from freshness_pipeline.config import ConfigError, load_config
from freshness_pipeline.definitions import build_definitions
from freshness_pipeline.defs.checks import ALL_CHECKS
from freshness_pipeline.defs.partitions import (
    AUTO_HOST_BUCKETS,
    AUTO_HOST_LIMIT,
    PARTITION_TAG,
    RANGE_END_TAG,
    bucket_index,
    bucket_keys,
    bucket_of,
    buckets_of_hosts,
    choose_partitioning,
    hosts_in_buckets,
    hosts_tag,
    location_partitioning,
    range_tags,
    registered_hosts,
)
from freshness_pipeline.defs.sensors import new_hosts_sensor
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.storage import Warehouse

STEP = timedelta(hours=6)
T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
CYCLES = 3
BUCKETS = 16  # more buckets than hosts: some are empty, between full ones


def test_bucket_of_a_host_is_stable_across_processes_and_releases():
    # Pinned values: a change of hash would move hosts between buckets in a running deployment.
    assert bucket_index("example.com", 64) == bucket_index("EXAMPLE.com", 64) == 38
    assert bucket_index("a.example:8080", 256) == 116
    assert bucket_index("[::1]:80", 256) == 241


def test_every_host_is_in_exactly_one_bucket():
    hosts = [f"h{i}.example" for i in range(1000)]
    keys = bucket_keys(16)
    members = [hosts_in_buckets([k], 16, hosts) for k in keys]
    assert sorted(h for m in members for h in m) == sorted(hosts)
    assert min(len(m) for m in members) > 1000 / 16 / 2  # no bucket starved
    assert buckets_of_hosts(["h1.example"], 16) == [keys[bucket_index("h1.example", 16)]]
    with pytest.raises(ValueError, match="not a key of 16 host buckets"):
        hosts_in_buckets(["h1.example"], 16, hosts)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[partitioning]\nhost_buckets = -1\n", 'host_buckets must be "auto" or an integer'),
        ("[partitioning]\nhost_buckets = 5000\n", 'host_buckets must be "auto" or an integer'),
        ('[partitioning]\nhost_buckets = "64"\n', 'host_buckets must be "auto" or an integer'),
        ("[partitioning]\nbuckets = 64\n", "takes only host_buckets"),
    ],
)
def test_bad_partitioning_is_named(tmp_path, text, message):
    (tmp_path / "freshness.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(tmp_path)


def test_auto_is_the_default_and_can_be_said(tmp_path):
    assert load_config(tmp_path).host_buckets is None
    (tmp_path / "freshness.toml").write_text('[partitioning]\nhost_buckets = "auto"\n')
    assert load_config(tmp_path).host_buckets is None
    (tmp_path / "freshness.toml").write_text("[partitioning]\nhost_buckets = 0\n")
    assert load_config(tmp_path).host_buckets == 0


def test_hosts_in_reads_folder_names_even_for_escaped_and_cut_keys(tmp_path):
    wh = Warehouse(tmp_path)
    long_host = "a" * 150 + ".example"
    hosts = ["plain.example", "[::1]:8080", ".dot.example", long_host]
    for host in hosts:
        wh.write_partition(
            "seeds", host, pl.DataFrame({"url": [f"http://{host}/"], "host": [host]})
        )
    assert wh.hosts_in("seeds") == sorted(hosts)


def test_bucketed_definitions_have_one_partition_per_bucket_and_no_sensor():
    defs = build_definitions(BUCKETS)
    with dg.instance_for_test():  # resolving reads state storage through a live instance
        job = defs.resolve_job_def("freshness_cycle")
        checks = defs.resolve_asset_graph().asset_check_keys
    assert job.partitions_def is not None
    assert job.partitions_def.get_partition_keys() == bucket_keys(BUCKETS)
    # buckets need no registration: no new-hosts sensor (the notifications sensor stays)
    assert [s.name for s in defs.sensors or []] == ["change_notifications_sensor"]
    assert len(checks) == len(ALL_CHECKS)


def _crawl(home, web, world_start, host_buckets: int):
    home.mkdir()
    if host_buckets:
        (home / "freshness.toml").write_text(f"[partitioning]\nhost_buckets = {host_buckets}\n")
    seeds = web.seeds_csv(home / "seeds.csv", variants=True).read_bytes()
    load_seeds(home, seeds, added_at=world_start)
    return open_instance(home)


# What differs between two runs of the same fetches: timings, and where in which WARC file a
# record landed (one file per run, records in completion order); the payload digests stay.
PER_RUN_COLUMNS = ("duration_ms", "warc_filename", "warc_offset", "warc_length", "archived")


def test_buckets_and_hosts_give_the_same_state(tmp_path):
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    # Every site but 'volatile', whose pages differ per request: both homes share one server.
    sites = [
        SiteSpec("honest", "honest", 40, sitemap_index=True, gzip_pages=True),
        SiteSpec("lastmod", "lastmod_only", 30),
        SiteSpec("novalid", "no_validators", 30),
        SiteSpec("polite", "polite", 30, crawl_delay=0.05, disallow=("/private/",), n_private=4),
        SiteSpec("honest2", "honest", 20),
        SiteSpec("honest3", "honest", 20),
    ]
    world = build_world(11, start=DEFAULT_START, horizon_days=1, sites=sites)
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        by_host = _crawl(tmp_path / "by_host", web, DEFAULT_START, 0)
        by_bucket = _crawl(tmp_path / "by_bucket", web, DEFAULT_START, BUCKETS)
        for i in range(CYCLES):
            now = DEFAULT_START + i * STEP
            web.set_now(now)
            a = run_cycle(tmp_path / "by_host", now, budget=30, instance=by_host)
            b = run_cycle(tmp_path / "by_bucket", now, budget=30, instance=by_bucket)
            assert (a.planned, a.fetched, a.outcomes) == (b.planned, b.fetched, b.outcomes)
            assert sorted(a.hosts) == sorted(b.hosts)
            assert a.runs == b.runs == 1  # empty buckets join the range instead of splitting it

        for table in ("url_inventory", "url_candidates", "fetch_results", "url_state", "fetch_log"):
            left, right = (
                Warehouse(tmp_path / home).read(table).drop(*PER_RUN_COLUMNS, strict=False)
                for home in ("by_host", "by_bucket")
            )
            order = [c for c in ("url", "fetched_at", "source") if c in left.columns]
            assert left.height > 0, table
            assert_frame_equal(left.sort(order), right.sort(order))

        # Dagster tracked buckets, not hosts: one materialization per bucket per asset and cycle.
        records = by_bucket.fetch_materializations(dg.AssetKey("url_state"), limit=1000).records
        keys = {r.partition_key for r in records}
        assert keys <= set(bucket_keys(BUCKETS)) and len(records) == CYCLES * len(keys)
        assert 1 < len(keys) <= BUCKETS


def _dry_home(tmp_path, n_hosts: int, toml: str | None) -> tuple[Warehouse, dg.DagsterInstance]:
    home = tmp_path / "home"
    home.mkdir()
    if toml is not None:
        (home / "freshness.toml").write_text(toml)
    lines = [f"https://h{i:03d}.example/p/{k}" for i in range(n_hosts) for k in range(3)]
    load_seeds(home, ("url\n" + "\n".join(lines) + "\n").encode(), added_at=T0)
    return Warehouse(home), open_instance(home)


def test_a_host_is_cycled_alone_inside_its_bucket(tmp_path):
    wh, instance = _dry_home(tmp_path, 12, "[partitioning]\nhost_buckets = 2\n")
    hosts = wh.hosts_in("seeds")
    first = run_cycle(wh.home, T0, dry_run=True, instance=instance)
    assert first.runs == 1 and sorted(first.hosts) == hosts
    one = hosts[3]
    mates = [h for h in hosts_in_buckets(buckets_of_hosts([one], 2), 2, hosts) if h != one]
    assert mates  # 12 hosts in 2 buckets
    narrow = run_cycle(wh.home, T0 + STEP, hosts=[one], dry_run=True, instance=instance)
    assert narrow.hosts == [one] and narrow.runs == 1 and narrow.planned == 3
    planned = dict(
        wh.read("revisit_plan").group_by("host").agg(pl.col("planned_at").max()).iter_rows()
    )
    assert planned[one] == T0 + STEP
    assert {planned[h] for h in mates} == {T0}  # the bucket's other hosts were not touched

    # Each bucket's materialization carries its own figures; the run's totals come once.
    records = instance.fetch_materializations(dg.AssetKey("url_candidates"), limit=10).records
    last_run = [r for r in records if r.run_id == records[0].run_id]
    assert len(last_run) == 1 and last_run[0].partition_key == bucket_of(one, 2)
    meta = last_run[0].asset_materialization.metadata
    assert (meta["rows"].value, meta["hosts"].value) == (3, 1)
    assert "candidates" not in meta
    first_run = [r for r in records if r.run_id != records[0].run_id]
    assert sorted(r.asset_materialization.metadata["rows"].value for r in first_run) == sorted(
        3 * len(hosts_in_buckets([b], 2, hosts)) for b in bucket_keys(2)
    )
    observed = instance.fetch_observations(dg.AssetKey("url_candidates"), limit=10).records
    assert [o.asset_observation.metadata["rows"].value for o in observed] == [3, 3 * len(hosts)]

    # As the UI launches it: one bucket partition (dagster/partition) and the hosts tag.
    later = T0 + 2 * STEP
    result = execute_cycle_run(
        wh.home,
        choose_partitioning(2, 0),
        instance,
        run_config={
            "resources": {"cycle": {"config": {"now": later.isoformat(), "dry_run": True}}}
        },
        tags={PARTITION_TAG: bucket_of(mates[0], 2), **hosts_tag([mates[0]])},
        planning_only=True,
    )
    assert result.success
    planned = dict(
        wh.read("revisit_plan").group_by("host").agg(pl.col("planned_at").max()).iter_rows()
    )
    assert planned[mates[0]] == later and planned[one] == T0 + STEP
    assert {planned[h] for h in mates[1:]} == {T0}


def test_a_hosts_tag_naming_no_host_of_the_run_fails_and_says_where_they_are(tmp_path):
    wh, instance = _dry_home(tmp_path, 12, "[partitioning]\nhost_buckets = 2\n")
    one = wh.hosts_in("seeds")[0]
    other = next(k for k in bucket_keys(2) if k != bucket_of(one, 2))
    result = execute_cycle_run(
        wh.home,
        choose_partitioning(2, 0),
        instance,
        run_config={"resources": {"cycle": {"config": {"now": T0.isoformat(), "dry_run": True}}}},
        tags={**range_tags(other, other), **hosts_tag([one])},
        planning_only=True,
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert f"{one}: in {bucket_of(one, 2)}" in failure.step_failure_data.error.message


@pytest.mark.parametrize(
    ("setting", "hosts", "buckets"),
    [
        (None, AUTO_HOST_LIMIT, 0),
        (None, AUTO_HOST_LIMIT + 1, AUTO_HOST_BUCKETS),
        (0, 10**4, 0),
        (8, 3, 8),
    ],
)
def test_auto_partitioning_is_per_host_until_the_limit_and_buckets_past_it(setting, hosts, buckets):
    chosen = choose_partitioning(setting, hosts)
    assert chosen.host_buckets == buckets
    assert ("auto" in chosen.reason) == (setting is None)


def test_a_home_past_the_limit_loads_as_buckets_and_a_stale_location_says_reload(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("FRESHNESS_HOME", str(tmp_path / "home"))
    wh, instance = _dry_home(tmp_path, AUTO_HOST_LIMIT, None)
    # At the limit: per host, every host registered, the sensor present.
    small = build_definitions(location_partitioning())
    assert isinstance(
        small.get_assets_def("url_state").partitions_def, dg.DynamicPartitionsDefinition
    )
    assert len(registered_hosts(instance)) == AUTO_HOST_LIMIT
    assert [s.name for s in small.sensors or []] == [
        "new_hosts_sensor",
        "change_notifications_sensor",
    ]

    extra = [f"https://late{i}.example/" for i in range(2)]
    crossing = load_seeds(wh.home, ("\n".join(extra) + "\n").encode(), added_at=T0)
    assert any("reload the code location" in n for n in crossing.notes)
    assert len(registered_hosts(instance)) == AUTO_HOST_LIMIT  # buckets need no registration

    # The location loaded before the crossing skips its ticks, saying why.
    tick = datetime(2026, 11, 30, 13, tzinfo=UTC)
    repo = small.get_repository_def()
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=tick, repository_def=repo
    ) as context:
        data = repo.get_schedule_def("freshness_cycle_schedule").evaluate_tick(context)
    assert not data.run_requests and "reload the code location" in (data.skip_message or "")
    with dg.build_sensor_context(instance=instance, repository_def=repo) as context:
        skipped = new_hosts_sensor(context)
    assert (
        isinstance(skipped, dg.SkipReason)
        and f"{AUTO_HOST_BUCKETS} host buckets" in skipped.skip_message
    )

    # Loaded again, the location is bucketed, says why, and its schedule asks for all buckets.
    large = build_definitions(location_partitioning())
    url_state = large.get_assets_def("url_state")
    assert url_state.partitions_def.get_partition_keys() == bucket_keys(AUTO_HOST_BUCKETS)
    shown = url_state.specs_by_key[dg.AssetKey("url_state")].metadata["partitioning"]
    assert f"{AUTO_HOST_LIMIT + 2} hosts, more than {AUTO_HOST_LIMIT}" in str(shown)
    assert [s.name for s in large.sensors or []] == ["change_notifications_sensor"]
    repo = large.get_repository_def()
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=tick, repository_def=repo
    ) as context:
        data = repo.get_schedule_def("freshness_cycle_schedule").evaluate_tick(context)
    (request,) = data.run_requests
    assert request.tags[RANGE_END_TAG] == bucket_keys(AUTO_HOST_BUCKETS)[-1]

    # The CLI follows the home at every cycle: one bucketed run, every host planned.
    outcome = run_cycle(wh.home, T0, dry_run=True, instance=instance)
    assert outcome.runs == 1 and len(outcome.hosts) == AUTO_HOST_LIMIT + 2
    assert f"{AUTO_HOST_BUCKETS} host buckets" in outcome.partitioning


def test_a_first_seed_load_past_the_limit_leaves_the_instance_configured(tmp_path, monkeypatch):
    """Bucketed from the first load, there is nothing to register; the instance's dagster.yaml
    (run queue, one cycle at a time) must still be there for a `dagster dev` started next."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    lines = [f"https://h{i:03d}.example/" for i in range(AUTO_HOST_LIMIT + 1)]
    load = load_seeds(tmp_path, ("\n".join(lines) + "\n").encode(), added_at=T0)
    assert "host buckets" in load.partitioning
    config = tmp_path / "dagster" / "dagster.yaml"
    assert config.exists() and "freshness/cycle" in config.read_text()
