"""The client's entry points: :func:`fetch_all` takes a cycle's planned pages, refuses those
whose scheme is not allowed, and runs every host's queue in one session; :func:`fetch_all_sync`
and :func:`run_sync` serve synchronous callers (Dagster assets, the CLI, discovery)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, ParamSpec, TypeVar

from aiohttp.abc import AbstractResolver

from freshness_pipeline.science.normalize import normalize_url
from freshness_pipeline.warehouse.archive import ArchiveWriter
from freshness_pipeline.web.client.context import CycleContext
from freshness_pipeline.web.client.fetches import (
    FetchRequest,
    FetchResult,
    Fingerprinter,
    host_key,
)
from freshness_pipeline.web.client.hosts import HostRun
from freshness_pipeline.web.client.outcomes import default_fingerprinter
from freshness_pipeline.web.client.session import open_session
from freshness_pipeline.web.client.settings import FetchSettings
from freshness_pipeline.web.netguard import IPNetwork, allowed_networks, check_url_scheme
from freshness_pipeline.web.throttle import Throttles

__all__ = ["blocking", "fetch_all", "fetch_all_sync", "run_sync"]

T = TypeVar("T")
P = ParamSpec("P")


async def fetch_all(
    requests: Sequence[FetchRequest],
    settings: FetchSettings,
    *,
    allow: Iterable[IPNetwork] | None = None,
    fingerprint: Fingerprinter | None = None,
    resolver: AbstractResolver | None = None,
    throttles: Throttles | None = None,
    archive: ArchiveWriter | None = None,
    robots_allow: Callable[[str], bool] | None = None,
    url_key: Callable[[str], str] | None = None,
) -> list[FetchResult]:
    """Fetch a cycle's planned pages politely; one result per request, in request order.

    ``allow`` defaults to ``FRESHNESS_ALLOW_NETWORKS``; ``fingerprint(body, content_type)``
    defaults to the science module's extractor with each request's selectors; ``resolver``
    replaces DNS (tests). Robots rules are the caller's job: only planned URLs arrive here,
    and a redirect to another spelling of a page is followed only to a URL ``robots_allow``
    says robots.txt allows (without it, never); ``url_key`` keys a redirect's target as the
    candidates do (default: the common normalization rules).
    ``throttles`` (default: fresh, built from ``settings``) holds what the per-host throttles
    learn; pass one to read host health afterwards or to carry it across calls. ``archive``:
    where every answer is recorded (the fetch stage's writer for the cycle); the results say
    where. A write the disk refuses (ArchiveWriteError) fails the call.
    """
    started = time.monotonic()
    policy = settings.throttle
    results: list[FetchResult | None] = [None] * len(requests)
    groups: dict[str, list[int]] = {}
    for i, req in enumerate(requests):
        key = req.host or host_key(req.url)
        try:
            check_url_scheme(req.url)
        except ValueError as exc:
            results[i] = FetchResult.unsent(req.url, key, "error", str(exc))
            continue
        groups.setdefault(key, []).append(i)

    if groups:
        nets = allowed_networks() if allow is None else tuple(allow)
        limit = settings.cycle_time_limit_s
        async with open_session(settings, allow=nets, resolver=resolver) as session:
            ctx = CycleContext(
                session=session,
                settings=settings,
                slots=asyncio.Semaphore(settings.global_concurrency),
                deadline=None if limit is None else started + limit,
                pause_deadline=started + (settings.fetch_window_s if limit is None else limit),
                fingerprint=fingerprint,
                throttles=throttles if throttles is not None else Throttles(policy),
                default_fp=None if fingerprint is not None else default_fingerprinter(),
                archive=archive,
                robots_allow=robots_allow,
                url_key=normalize_url if url_key is None else url_key,
                allow=nets,
            )
            runs = [HostRun(key, idx, requests, results, ctx) for key, idx in groups.items()]
            await asyncio.gather(*(run.run() for run in runs))

    missing = [i for i, r in enumerate(results) if r is None]
    if missing:  # pragma: no cover - every path above fills its slot
        raise RuntimeError(f"fetch_all lost results for requests {missing[:5]}")
    return [r for r in results if r is not None]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous code (Dagster assets, the CLI).

    Inside an already running loop (a notebook, an async test) ``asyncio.run`` would refuse, so
    the coroutine then runs on a helper thread with its own loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def blocking(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """``fn`` for synchronous callers, same arguments: each call runs through :func:`run_sync`."""

    @functools.wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(fn(*args, **kwargs))

    return call


#: :func:`fetch_all` for synchronous callers.
fetch_all_sync = blocking(fetch_all)
