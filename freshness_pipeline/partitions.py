"""How hosts map to Dagster partitions.

By default, the ``hosts`` dynamic partitions: one partition per URL authority (``host[:port]``,
lower-case). A cycle runs many hosts in one run through the single-run backfill policy; the range
tags select a contiguous slice of hosts in the order they were added.

Past a few thousand hosts, Dagster's bookkeeping per (asset, partition) dominates a cycle, so
``host_buckets = N`` in ``freshness.toml`` selects N static partitions instead, each a stable hash
bucket of hosts. The warehouse still keeps one file per host and table; only what Dagster tracks
is coarser. A bucket's hosts are those with seeds whose hash falls in it, so a new host needs no
registration: its bucket picks it up at the next cycle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from functools import cache

import dagster as dg

from freshness_pipeline.config import MAX_HOST_BUCKETS

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


BUCKET_PREFIX = "bucket-"


def bucket_index(host: str, n_buckets: int) -> int:
    """A hash that every process and release agrees on (Python's own hash() is salted)."""
    digest = hashlib.blake2b(host.lower().encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n_buckets


def bucket_keys(n_buckets: int) -> list[str]:
    width = len(str(n_buckets - 1))
    return [f"{BUCKET_PREFIX}{i:0{width}d}" for i in range(n_buckets)]


@cache
def host_buckets_partitions(n_buckets: int) -> dg.StaticPartitionsDefinition:
    if not 1 <= n_buckets <= MAX_HOST_BUCKETS:
        raise ValueError(f"host_buckets must be 1..{MAX_HOST_BUCKETS}, not {n_buckets}")
    return dg.StaticPartitionsDefinition(bucket_keys(n_buckets))


def partitions_for(host_buckets: int) -> dg.PartitionsDefinition:
    """The partitions of the cycle's assets: per host (0) or ``host_buckets`` hash buckets."""
    return host_buckets_partitions(host_buckets) if host_buckets else hosts_partitions


def n_buckets_of(partitions_def: dg.PartitionsDefinition | None) -> int:
    """0 for per-host partitions, else the bucket count of a host-bucket partitioning."""
    if isinstance(partitions_def, dg.StaticPartitionsDefinition):
        return len(partitions_def.get_partition_keys())
    return 0


def buckets_of_hosts(hosts: Iterable[str], n_buckets: int) -> list[str]:
    """The bucket keys holding ``hosts``, in partition order."""
    keys = bucket_keys(n_buckets)
    return [keys[i] for i in sorted({bucket_index(h, n_buckets) for h in hosts})]


def hosts_in_buckets(
    partition_keys: Iterable[str], n_buckets: int, candidates: Iterable[str]
) -> list[str]:
    """The ``candidates`` whose bucket is among ``partition_keys``, sorted."""
    index = {key: i for i, key in enumerate(bucket_keys(n_buckets))}
    keys = list(partition_keys)
    unknown = [k for k in keys if k not in index]
    if unknown:
        raise ValueError(f"not a key of {n_buckets} host buckets: {unknown[:3]}")
    wanted = {index[k] for k in keys}
    return sorted(h for h in candidates if bucket_index(h, n_buckets) in wanted)
