"""The ``hosts`` dynamic partitions: one partition per URL authority (``host[:port]``, lower-case).

A cycle runs many hosts in one run through the single-run backfill policy; the range tags select
a contiguous slice of hosts in the order they were added.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import dagster as dg

HOSTS_PARTITIONS_NAME = "hosts"
hosts_partitions = dg.DynamicPartitionsDefinition(name=HOSTS_PARTITIONS_NAME)

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
# Range runs carry no dagster/partition tag, so the per-host run limit keys on this one.
HOST_BUCKET_TAG = "freshness/host_bucket"


def registered_hosts(instance: dg.DagsterInstance) -> list[str]:
    """Hosts in the order they were added, which is the order a range run slices."""
    return list(instance.get_dynamic_partitions(HOSTS_PARTITIONS_NAME))


def register_hosts(instance: dg.DagsterInstance, hosts: Iterable[str]) -> list[str]:
    """Add the hosts not yet known; returns the new ones, sorted (a stable order for slices)."""
    known = set(registered_hosts(instance))
    new = sorted({h for h in hosts if h and h not in known})
    if new:
        instance.add_dynamic_partitions(HOSTS_PARTITIONS_NAME, new)
    return new


def contiguous_ranges(all_hosts: Sequence[str], wanted: Iterable[str]) -> list[tuple[str, str]]:
    """The fewest (start, end) ranges of ``all_hosts`` that cover exactly the wanted hosts."""
    wanted_set = set(wanted)
    ranges: list[tuple[str, str]] = []
    start: str | None = None
    previous: str | None = None
    for host in all_hosts:
        if host in wanted_set:
            if start is None:
                start = host
            previous = host
        elif start is not None and previous is not None:
            ranges.append((start, previous))
            start = None
    if start is not None and previous is not None:
        ranges.append((start, previous))
    return ranges


def range_tags(start: str, end: str, bucket: str = "all") -> dict[str, str]:
    return {RANGE_START_TAG: start, RANGE_END_TAG: end, HOST_BUCKET_TAG: bucket}
