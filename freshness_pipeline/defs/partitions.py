"""How hosts map to Dagster partitions.

Per host: the ``hosts`` dynamic partitions, one per URL authority (``host[:port]``, lower-case).
A cycle runs many hosts in one run through the single-run backfill policy; the range tags select
a contiguous slice of hosts in the order they were added.

Host buckets: N static partitions, each a stable hash bucket of hosts. Dagster's bookkeeping is
a few events per (asset, partition) and cycle, so per host it outgrows the work past a few
hundred hosts (docs/scaling.md). The warehouse still keeps one file per host and table; only
what Dagster tracks is coarser. A bucket's hosts are those with seeds whose hash falls in it, so
a new host needs no registration: its bucket picks it up at the next cycle.

``[partitioning] host_buckets`` chooses: "auto" (the default) is per host up to
``AUTO_HOST_LIMIT`` seeded hosts and ``AUTO_HOST_BUCKETS`` buckets past that, a number pins it.
Either way a run can be narrowed to some of its hosts with the ``freshness/hosts`` tag, so one
host is still a run of its own (a backfill of one host inside its bucket).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import dagster as dg

from freshness_pipeline.config import MAX_HOST_BUCKETS, ConfigError, load_config
from freshness_pipeline.warehouse.storage import Warehouse

HOSTS_PARTITIONS_NAME = "hosts"
hosts_partitions = dg.DynamicPartitionsDefinition(name=HOSTS_PARTITIONS_NAME)

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
PARTITION_TAG = "dagster/partition"
# Range runs carry no dagster/partition tag, so the per-host run limit keys on this one.
HOST_BUCKET_TAG = "freshness/host_bucket"
#: set on the group runs `freshness cycle --distributed` launches (one id per cycle)
LAUNCH_TAG = "freshness/launch_id"
# Comma-separated hosts: the run covers only these of its partitions' hosts.
HOSTS_TAG = "freshness/hosts"

#: "auto" keeps one partition per host up to this many seeded hosts ...
AUTO_HOST_LIMIT = 100
#: ... and uses this many host buckets past it.
AUTO_HOST_BUCKETS = 16


@dataclass(frozen=True)
class Partitioning:
    """What the cycle's assets are partitioned by, and why (shown in the UI and the CLI)."""

    host_buckets: int  # 0: one partition per host
    reason: str

    def describe(self) -> str:
        kind = f"{self.host_buckets} host buckets" if self.host_buckets else "one per host"
        return f"{kind} ({self.reason})"


def choose_partitioning(setting: int | None, n_hosts: int) -> Partitioning:
    """``setting``: ``[partitioning] host_buckets`` (None for "auto"); ``n_hosts``: seeded hosts.

    Not remembered: hosts are only ever added, so an "auto" home crosses the limit once, and a
    release that moved the limit would move such a home too (pin a number to avoid that).
    """
    if setting is not None:
        return Partitioning(setting, f"freshness.toml: host_buckets = {setting}")
    if n_hosts > AUTO_HOST_LIMIT:
        return Partitioning(
            AUTO_HOST_BUCKETS, f"auto: {n_hosts:,} hosts, more than {AUTO_HOST_LIMIT}"
        )
    return Partitioning(0, f"auto: {n_hosts:,} hosts, at most {AUTO_HOST_LIMIT}")


def home_partitioning(warehouse: Warehouse, hosts: Sequence[str] | None = None) -> Partitioning:
    """The partitioning a home resolves to now (``hosts``: its seeded hosts, if already listed).
    Raises ConfigError for a bad freshness.toml."""
    setting = load_config(warehouse.home).host_buckets
    if setting is not None:
        return choose_partitioning(setting, 0)
    seeded = warehouse.hosts_in("seeds") if hosts is None else hosts
    return choose_partitioning(None, len(seeded))


def location_partitioning(home: Path | None = None) -> Partitioning:
    """For a code location, which must load: a freshness.toml it cannot read is named in the
    reason, and the runs then fail on it with the same message."""
    warehouse = Warehouse(home)
    try:
        return home_partitioning(warehouse)
    except ConfigError as exc:
        return Partitioning(0, f"freshness.toml unreadable: {exc}")


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


def launched_by_the_command(tags: Mapping[str, str]) -> bool:
    """Whether a run's tags say the ``freshness`` command started it, holding the home's writer
    lock for it: its in-process cycle run, or a group run of its distributed cycle."""
    return tags.get(HOST_BUCKET_TAG) == "cli" or LAUNCH_TAG in tags


def range_tags(start: str, end: str, bucket: str = "all") -> dict[str, str]:
    return {RANGE_START_TAG: start, RANGE_END_TAG: end, HOST_BUCKET_TAG: bucket}


def hosts_tag(hosts: Iterable[str]) -> dict[str, str]:
    """The tag that narrows a run to ``hosts`` (each must be among its partitions' hosts)."""
    chosen = sorted({h.lower() for h in hosts})
    bad = [h for h in chosen if not h or "," in h or h != h.strip()]
    if bad:
        raise ValueError(f"not a host key: {bad[0]!r}")
    return {HOSTS_TAG: ",".join(chosen)}


def selected_hosts(tags: Mapping[str, str]) -> set[str] | None:
    """The hosts a run's ``freshness/hosts`` tag names, or None: every host of its partitions."""
    text = tags.get(HOSTS_TAG)
    if text is None:
        return None
    hosts = {h.strip().lower() for h in text.split(",") if h.strip()}
    if not hosts:
        raise ValueError(f"the {HOSTS_TAG} tag names no host: {text!r}")
    return hosts


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


def bucket_of(host: str, n_buckets: int) -> str:
    return bucket_keys(n_buckets)[bucket_index(host, n_buckets)]
