"""Dagster resources: where the warehouse is, what cycle this run is, and how to fetch.

The cycle's ``now`` is run configuration. A run launched without one (a materialization from the
UI, a backfill) uses the run's own creation time, fixed when the run was submitted, so that every
asset of the run agrees on one ``now`` and nothing below reads the wall clock for a decision.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Self, cast

import dagster as dg
from pydantic import PrivateAttr

from freshness_pipeline.config import OBJECTIVES, PipelineConfig, load_config
from freshness_pipeline.defs.cycle_time import parse_now
from freshness_pipeline.defs.partitions import launched_by_the_command
from freshness_pipeline.science.schedule import Objective
from freshness_pipeline.warehouse.locks import dagster_run_hold
from freshness_pipeline.warehouse.running import writer_at_work
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.web.client import FetchSettings
from freshness_pipeline.web.netguard import ALLOW_ENV, IPNetwork, allowed_networks

__all__ = ["CycleResource", "HttpClientResource", "WarehouseResource", "parse_now"]


class WarehouseResource(dg.ConfigurableResource):
    """The home folder; empty means ``$FRESHNESS_HOME`` or ``./data``, resolved when used.

    ``<home>/freshness.toml`` is read once when a run sets the resource up, so every step of
    the run works from the same settings even if the file is edited while it runs, and the
    next run sees the edit."""

    home: str = ""
    _config: PipelineConfig | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._config = load_config(self.warehouse().home)

    @contextlib.contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[Self]:
        """For a run, hold the home's runs lock while it runs (a ``freshness`` writer then
        refuses to start), and refuse to start beside one that holds the writer lock, unless
        the ``freshness`` command started this run for itself (warehouse/locks.py)."""
        self.setup_for_execution(context)
        run = context.run
        if run is None:  # a sensor or a schedule evaluating, not a run
            yield self
            return
        home = self.warehouse().home
        with dagster_run_hold(home):
            if not launched_by_the_command(run.tags):
                holder = writer_at_work(home)
                if holder is not None:
                    raise dg.Failure(
                        f"{home} is busy: {holder} holds it; this run would write beside it "
                        "(every page fetched twice, each change recorded twice): start it again "
                        "once that has finished"
                    )
            yield self

    def warehouse(self) -> Warehouse:
        return Warehouse(self.home or None)

    def pipeline_config(self) -> PipelineConfig:
        """``<home>/freshness.toml``: per-host strip params, per-class selectors (read when the
        run set the resource up; read now when called outside a run)."""
        if self._config is None:
            self._config = load_config(self.warehouse().home)
        return self._config


class CycleResource(dg.ConfigurableResource):
    """One cycle's parameters, passed as run config by the CLI and the schedule."""

    now: str = ""
    budget: int = -1
    dry_run: bool = False
    fetch_window_s: float = 600.0
    fetch_time_limit_s: float = 0.0
    #: "freshness" or "capture"; empty: ``[planning] objective`` of freshness.toml
    objective: str = ""

    def cycle_now(
        self, context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext
    ) -> datetime:
        if self.now:
            try:
                return parse_now(self.now, "resources.cycle.config.now")
            except ValueError as exc:  # the launchpad's field, not the command's option
                raise dg.Failure(str(exc)) from None
        # context.run: an asset check's context has no run_id of its own. A re-execution (from
        # failure, or of chosen steps) is the same cycle: its time is the first run's, or the
        # plan of one time was fetched and recorded as of another (found by an exploratory run)
        record = context.instance.get_run_record_by_id(
            context.run.root_run_id or context.run.run_id
        )
        if record is None or record.create_timestamp is None:
            raise dg.Failure("the cycle has no `now`: pass resources.cycle.config.now")
        created = record.create_timestamp
        return created.astimezone(UTC) if created.tzinfo else created.replace(tzinfo=UTC)

    def plan_objective(self, config: PipelineConfig) -> Objective:
        """This run's objective, else the home's configured one."""
        objective = self.objective or config.objective
        if objective not in OBJECTIVES:
            raise dg.Failure(
                f"resources.cycle.config.objective must be one of {', '.join(OBJECTIVES)}, "
                f"not {objective!r}"
            )
        return cast(Objective, objective)

    def window_s(self) -> float:
        """The seconds each host's share of the cycle must fit: the fetch window, or the time
        limit when that is shorter."""
        limit = self.fetch_time_limit_s
        return min(self.fetch_window_s, limit) if limit > 0 else self.fetch_window_s

    def budget_or_none(self) -> int | None:
        return None if self.budget < 0 else self.budget


class HttpClientResource(dg.ConfigurableResource):
    """How pages are fetched; networks beyond the public internet need an explicit allow-list."""

    user_agent: str = FetchSettings.user_agent
    global_concurrency: int = 16
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    max_body_bytes: int = 10 * 1024 * 1024
    # the longest one host's robots.txt and sitemap reads may take in a cycle: page fetches
    # start when discovery ends
    discovery_window_s: float = FetchSettings.discovery_window_s
    # the most sitemap files one host's walk asks for in a cycle; more are read over cycles
    max_sitemap_files: int = FetchSettings.max_sitemap_files
    allow_networks: str = ""
    # Hosts split over this many processes (global_concurrency is per process): one process is
    # CPU-bound near half a bare aiohttp loop's rate on fast hosts (docs/fetch_rate.md).
    fetch_processes: int = 1
    # Keep the crawled copy: every answer in the WARC archive under <home>/archive/, every
    # new or changed version in page_versions (False: fingerprints only).
    archive: bool = True

    def allow_list(self) -> tuple[IPNetwork, ...]:
        """``FRESHNESS_ALLOW_NETWORKS`` plus this resource's own ``allow_networks``."""
        return allowed_networks() + allowed_networks({ALLOW_ENV: self.allow_networks})

    def settings(
        self, *, time_limit_s: float | None = None, window_s: float | None = None
    ) -> FetchSettings:
        return FetchSettings(
            user_agent=self.user_agent,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            global_concurrency=self.global_concurrency,
            max_body_bytes=self.max_body_bytes,
            cycle_time_limit_s=time_limit_s or None,
            fetch_window_s=window_s or FetchSettings.fetch_window_s,
            discovery_window_s=self.discovery_window_s,
            max_sitemap_files=self.max_sitemap_files,
        )
