"""Host-bucket partitioning: the same cycles over hash buckets of hosts give the same tables as
per-host partitions, with a fraction of Dagster's per-partition bookkeeping."""

from __future__ import annotations

import os
from datetime import timedelta

import dagster as dg
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from freshness_pipeline.checks import ALL_CHECKS
from freshness_pipeline.config import ConfigError, load_config
from freshness_pipeline.definitions import build_definitions
from freshness_pipeline.partitions import (
    bucket_index,
    bucket_keys,
    buckets_of_hosts,
    hosts_in_buckets,
)
from freshness_pipeline.runner import load_seeds, open_instance, run_cycle
from freshness_pipeline.storage import Warehouse
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world

STEP = timedelta(hours=6)
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
        ("[partitioning]\nhost_buckets = -1\n", "host_buckets must be an integer"),
        ("[partitioning]\nhost_buckets = 5000\n", "host_buckets must be an integer"),
        ('[partitioning]\nhost_buckets = "64"\n', "host_buckets must be an integer"),
        ("[partitioning]\nbuckets = 64\n", "takes only host_buckets"),
    ],
)
def test_bad_partitioning_is_named(tmp_path, text, message):
    (tmp_path / "freshness.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(tmp_path)


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
    assert not list(defs.sensors or [])
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
        one_host = sorted(a.hosts)[0]
        narrow = run_cycle(
            tmp_path / "by_bucket", now + STEP, hosts=[one_host], dry_run=True, instance=by_bucket
        )
    # --host in bucket mode runs that host's whole bucket, and says so when it is more.
    bucket_mates = hosts_in_buckets(buckets_of_hosts([one_host], BUCKETS), BUCKETS, a.hosts)
    assert narrow.hosts == bucket_mates
    assert (len(bucket_mates) > 1) == any("host buckets" in n for n in narrow.notes)
