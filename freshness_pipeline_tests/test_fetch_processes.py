"""The fetch stage split over processes gives the rows one process gives, keeps every host in
one process, and balances the selected URLs between them."""

from __future__ import annotations

import ipaddress

import polars as pl
from polars.testing import assert_frame_equal

from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.stages.fetch import host_groups, run_fetch_stage
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.client import FetchSettings, host_key

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)


def _plan(urls: list[str], selected: list[bool]) -> pl.DataFrame:
    n = len(urls)
    return tables.conform(
        "revisit_plan",
        pl.DataFrame(
            {
                "url": urls,
                "host": [host_key(u) for u in urls],
                "planned_at": [DEFAULT_START] * n,
                "value": [1.0] * n,
                "url_class": ["page"] * n,
                "status": ["new"] * n,
                "reason": ["new"] * n,
                "selected": selected,
                "rank": list(range(n)),
            }
        ),
    )


def test_host_groups_balance_selected_urls_and_keep_hosts_whole():
    urls = [f"http://a.example/{i}" for i in range(6)]
    urls += [f"http://b.example/{i}" for i in range(3)]
    urls += [f"http://c.example/{i}" for i in range(3)]
    urls += ["http://idle.example/"]
    plan = _plan(urls, [True] * 12 + [False])
    hosts = ["a.example", "b.example", "c.example", "idle.example"]
    assert host_groups(plan, hosts, 2) == [["a.example"], ["b.example", "c.example"]]
    assert host_groups(plan, hosts, 1) == [["a.example", "b.example", "c.example"]]
    assert host_groups(plan, hosts, 8) == [["a.example"], ["b.example"], ["c.example"]]
    assert host_groups(plan, ["idle.example"], 4) == []


def test_two_processes_fetch_what_one_does(tmp_path):
    sites = [
        SiteSpec("honest", "honest", 25),
        SiteSpec("lastmod", "lastmod_only", 20),
        SiteSpec("novalid", "no_validators", 15),
    ]
    world = build_world(5, start=DEFAULT_START, horizon_days=1, sites=sites)
    settings = FetchSettings()
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        urls = sorted(web.truth().urls())
        plan = _plan(urls, [i % 3 != 0 for i in range(len(urls))])
        hosts = sorted(set(plan["host"]))
        stages = {}
        for processes in (1, 2):
            wh = Warehouse(tmp_path / f"p{processes}")
            stages[processes] = (
                run_fetch_stage(
                    plan, hosts, DEFAULT_START, wh, PipelineConfig(), settings, LOOPBACK, processes
                ),
                wh.read("fetch_log"),
            )
    (one, one_log), (two, two_log) = stages[1], stages[2]
    assert one.frame.height == int(plan["selected"].sum())
    assert "new" in set(one.frame["outcome"]) and "error" not in set(one.frame["outcome"])
    # Each process writes its own archive file, so only where a record sits may differ.
    where = ["duration_ms", "warc_filename", "warc_offset", "warc_length"]
    for left, right in ((one.frame, two.frame), (one_log, two_log)):
        assert_frame_equal(
            left.drop(where, "archived", strict=False).sort("url"),
            right.drop(where, "archived", strict=False).sort("url"),
        )
    assert sorted(t["host"] for t in two.throttled) == sorted(t["host"] for t in one.throttled)


def test_cycle_with_fetch_processes_matches_one_process(tmp_path):
    """The option reaches the asset: `freshness cycle --fetch-processes 2` is this call."""
    import os

    from freshness_pipeline.app.runner import load_seeds, run_cycle

    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    sites = [SiteSpec("honest", "honest", 20), SiteSpec("novalid", "no_validators", 20)]
    world = build_world(6, start=DEFAULT_START, horizon_days=1, sites=sites)
    with SyntheticWeb(world) as web:
        web.set_now(DEFAULT_START)
        seeds = web.seeds_csv(tmp_path / "seeds.csv", variants=False).read_bytes()
        outcomes = []
        for processes in (1, 2):
            home = tmp_path / f"home{processes}"
            load_seeds(home, seeds, added_at=DEFAULT_START)
            done = run_cycle(home, DEFAULT_START, budget=25, fetch_processes=processes)
            outcomes.append((done.fetched, done.outcomes))
            results = (
                Warehouse(home)
                .read("fetch_results")
                .drop("duration_ms", "warc_filename", "warc_offset", "warc_length", "archived")
                .sort("url")
            )
            outcomes.append(results)
    assert outcomes[0] == outcomes[2] and outcomes[0][0] == 25
    assert_frame_equal(outcomes[1], outcomes[3])
