"""Optional per-host and per-URL-class settings, from ``<home>/freshness.toml``.

```toml
[hosts."shop.example"]
strip_params = ["sid", "sort"]     # query parameters that make no difference on this host,
                                   # stripped in addition to the tracking list
[url_classes.product]
selectors = ["h1", ".price"]       # fingerprint only these parts of the page (plus the title)

[partitioning]
host_buckets = 256                 # Dagster partitions are 256 hash buckets of hosts; 0: one
                                   # per host; "auto" (the default): see below

[dagster]
keep_runs_days = 30                # delete Dagster runs (and their events) older than this

[planning]
objective = "capture"              # or "freshness" (the default), see below
cost = "credits"                   # or "fetches" (the default) or "bytes", see below

[planning.credits]                 # with cost = "credits": what one fetch of a class costs
product = 5                        # e.g. fetched through a rendering API
default = 1                        # every other class (1 when omitted)
```

``objective``: "freshness" keeps the value-weighted share of fresh copies highest (pages that
change far faster than the budget can follow get less); "capture" counts every change a fetch
catches, so the fastest pages get the most (a change feed, an archive). A run's
``resources.cycle.config.objective`` overrides it for that run.

``cost``: what a page's gain is divided by (science.cost). "fetches" counts every fetch alike;
"bytes" uses the mean bytes a request of that host and URL class transferred over the last
30 days (the fetch_totals table; 304s are cheap); "credits" the ``[planning.credits]`` table. The budget
still counts fetches; the cost decides which fetches it buys.

``host_buckets``: Dagster's bookkeeping costs a few events per asset and partition, so one
partition per host is what a small crawl reads best in the UI and what a large one cannot
afford. "auto" (or no setting) therefore keeps one partition per host up to
``partitions.AUTO_HOST_LIMIT`` seeded hosts and uses ``partitions.AUTO_HOST_BUCKETS`` buckets
past that; a number pins the choice (0: per host). The code location reads it when it loads,
so reload it after a change (or after a seed load crosses the limit); the CLI reads it at every
cycle. The warehouse keeps one file per host either way, so a home can switch modes between
cycles.

``keep_runs_days`` (default 0: keep every run): each cycle, CLI or scheduled, deletes the runs
older than this from the Dagster instance, with their event logs, and compacts the instance's
index once much of it is free space: the warehouse is the crawl's history, the instance only
the operations log, and at one run an hour it otherwise grows without bound.

Selectors change what a fingerprint means, so each selector set gets its own fingerprint
version: changing them makes the next fetch of those pages a re-extraction (outcome 'new', no
change observation), not a wave of false changes.
"""

from __future__ import annotations

import math
import tomllib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from freshness_pipeline.science.cost import COST_BASES
from freshness_pipeline.science.fingerprint import FINGERPRINT_VERSION
from freshness_pipeline.science.normalize import TRACKING_PARAMS

CONFIG_FILE = "freshness.toml"
MAX_HOST_BUCKETS = 4096
AUTO = "auto"
OBJECTIVES = ("freshness", "capture")
PLANNING_KEYS = frozenset({"objective", "cost", "credits"})


class ConfigError(ValueError):
    """The config file is unreadable or has a setting of the wrong shape (named in the message)."""


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where} must be a list of non-empty strings")
    return tuple(v.strip() for v in value)


def extractor_version(selectors: tuple[str, ...]) -> int:
    """FINGERPRINT_VERSION for the default extractor; a distinct number per selector set."""
    if not selectors:
        return FINGERPRINT_VERSION
    digest = zlib.crc32("\n".join(selectors).encode()) % 1_000_000
    return FINGERPRINT_VERSION + 1000 * (digest + 1)


@dataclass(frozen=True)
class PipelineConfig:
    host_strip_params: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    class_selectors: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: None: "auto" (partitions.choose_partitioning decides by the number of hosts)
    host_buckets: int | None = None
    keep_runs_days: float = 0.0
    objective: str = "freshness"
    cost_basis: str = "fetches"
    class_credits: Mapping[str, float] = field(default_factory=dict)

    def strip_params_for(self, host: str) -> frozenset[str]:
        return TRACKING_PARAMS | frozenset(self.host_strip_params.get(host, ()))

    def selectors_for(self, url_class: str | None) -> tuple[str, ...]:
        return self.class_selectors.get(url_class or "", ())

    def version_expr(self) -> pl.Expr:
        """The fingerprint version each row's url_class calls for."""
        mapping = {c: extractor_version(s) for c, s in self.class_selectors.items()}
        return (
            pl.col("url_class")
            .replace_strict(mapping, default=FINGERPRINT_VERSION, return_dtype=pl.Int64)
            .fill_null(FINGERPRINT_VERSION)
        )


def load_config(home: Path) -> PipelineConfig:
    path = home / CONFIG_FILE
    if not path.exists():
        return PipelineConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    unknown = set(data) - {"hosts", "url_classes", "partitioning", "planning", "dagster"}
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {sorted(unknown)}")
    hosts: dict[str, tuple[str, ...]] = {}
    for host, settings in (data.get("hosts") or {}).items():
        if not isinstance(settings, dict) or set(settings) - {"strip_params"}:
            raise ConfigError(f'{path}: [hosts."{host}"] takes only strip_params')
        hosts[host.lower()] = _strings(
            settings.get("strip_params", []), f'{path}: hosts."{host}".strip_params'
        )
    classes: dict[str, tuple[str, ...]] = {}
    for url_class, settings in (data.get("url_classes") or {}).items():
        if not isinstance(settings, dict) or set(settings) - {"selectors"}:
            raise ConfigError(f"{path}: [url_classes.{url_class}] takes only selectors")
        classes[url_class] = _strings(
            settings.get("selectors", []), f"{path}: url_classes.{url_class}.selectors"
        )
    planning = data.get("planning")
    if planning is None:
        planning = {}
    if not isinstance(planning, dict) or set(planning) - PLANNING_KEYS:
        raise ConfigError(f"{path}: [planning] takes only {', '.join(sorted(PLANNING_KEYS))}")
    return PipelineConfig(
        host_strip_params=hosts,
        class_selectors=classes,
        host_buckets=_host_buckets(data.get("partitioning"), path),
        keep_runs_days=_keep_runs_days(data.get("dagster"), path),
        objective=_choice(planning, "objective", OBJECTIVES, path),
        cost_basis=_choice(planning, "cost", COST_BASES, path),
        class_credits=_credits(planning.get("credits", {}), path),
    )


def _choice(section: dict, key: str, allowed: tuple[str, ...], path: Path) -> str:
    value = section.get(key, allowed[0])
    if value not in allowed:
        raise ConfigError(
            f"{path}: planning.{key} must be one of {', '.join(allowed)}, not {value!r}"
        )
    return value


def _credits(section: object, path: Path) -> dict[str, float]:
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [planning.credits] must be a table of URL class = credits")
    credits: dict[str, float] = {}
    for url_class, value in section.items():
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value <= 0:
            raise ConfigError(
                f"{path}: planning.credits.{url_class} must be a positive number, not {value!r}"
            )
        credits[url_class.strip().lower()] = float(value)
    return credits


def _host_buckets(section: object, path: Path) -> int | None:
    if section is None:
        return None
    if not isinstance(section, dict) or set(section) - {"host_buckets"}:
        raise ConfigError(f"{path}: [partitioning] takes only host_buckets")
    n = section.get("host_buckets", AUTO)
    if n == AUTO:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_HOST_BUCKETS:
        raise ConfigError(
            f'{path}: partitioning.host_buckets must be "{AUTO}" or an integer from 0 (one '
            f"partition per host) to {MAX_HOST_BUCKETS}, not {n!r}"
        )
    return n


def _keep_runs_days(section: object, path: Path) -> float:
    if section is None:
        return 0.0
    if not isinstance(section, dict) or set(section) - {"keep_runs_days"}:
        raise ConfigError(f"{path}: [dagster] takes only keep_runs_days")
    days = section.get("keep_runs_days", 0)
    ok = isinstance(days, int | float) and not isinstance(days, bool)
    if not ok or not math.isfinite(days) or days < 0:
        raise ConfigError(
            f"{path}: dagster.keep_runs_days must be a number of days >= 0 (0: keep every "
            f"run), not {days!r}"
        )
    return float(days)
