from __future__ import annotations

import dagster as dg

from freshness_pipeline.partitions import contiguous_ranges, register_hosts, registered_hosts


def test_contiguous_ranges_cover_exactly_the_wanted_hosts():
    hosts = ["h1", "h2", "h3", "h4", "h5"]
    assert contiguous_ranges(hosts, hosts) == [("h1", "h5")]
    assert contiguous_ranges(hosts, ["h1", "h3", "h4"]) == [("h1", "h1"), ("h3", "h4")]
    assert contiguous_ranges(hosts, []) == []


def test_register_hosts_is_idempotent_and_keeps_order():
    instance = dg.DagsterInstance.ephemeral()
    assert register_hosts(instance, ["b.example", "a.example"]) == ["a.example", "b.example"]
    assert register_hosts(instance, ["a.example", "c.example"]) == ["c.example"]
    assert registered_hosts(instance) == ["a.example", "b.example", "c.example"]
