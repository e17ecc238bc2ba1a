"""The benchmark web on loopback: one aiohttp application per host, all in one background thread.

Each host listens on its own loopback address (``127.0.60.N`` by default) on a free port, so a
crawler sees twenty hosts with their own politeness rules. Every answer is a function of the
simulated time the harness sets before each cycle (held fixed during the cycle); the politeness
behaviours (burst throttling, and the Crawl-delay the scorer checks) act in real monotonic time.
Every request is recorded: the log is where the scorer learns what the crawler holds.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import polars as pl
from aiohttp import web

from . import content
from .truth import PAGE_ID_REGEX, Truth, request_fails

_PAGE_ID = re.compile(PAGE_ID_REGEX)
_ERROR_STATUSES = (500, 502, 504)

#: the request log's columns (one row per request, in arrival order)
LOG_SCHEMA = {
    "serial": pl.Int64,
    "arrived_s": pl.Float64,  # real monotonic seconds since the server started
    "answered_s": pl.Float64,
    "sim_s": pl.Float64,
    "cycle": pl.Int64,
    "host": pl.Int64,
    "path": pl.String,  # path and query as requested
    "kind": pl.String,  # page, robots, sitemap, feed, other
    "page_id": pl.Int64,
    "status": pl.Int64,
    "served_version": pl.Int64,  # the content version in a 200's body
    "live_version": pl.Int64,  # the version live at sim_s (also on a 304)
    "if_none_match": pl.String,
    "if_modified_since": pl.String,
    "user_agent": pl.String,
    "retry_after_s": pl.Float64,
    "bytes": pl.Int64,
}


def page_id_of(path_qs: str) -> int | None:
    """The page a request or URL names, by the web's one URL rule (truth.PAGE_ID_REGEX)."""
    m = _PAGE_ID.search(path_qs)
    if m is None:
        return None
    return int(m.group(1) or m.group(2))


@dataclass
class _HostState:
    last_arrival: float | None = None
    pause_until: float = 0.0
    attempts: dict[tuple[int, int], int] = field(default_factory=dict)


class WebServer:
    """Serve ``truth`` on loopback until :meth:`stop`; use as a context manager."""

    def __init__(self, truth: Truth, *, address_prefix: str = "127.0.60.") -> None:
        self.truth = truth
        self.address_prefix = address_prefix
        self.host_keys: list[str] = []
        self.base_urls: list[str] = []
        self._now_s = 0.0
        self._log: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()
        self._serial = 0
        self._states = [_HostState() for _ in truth.hosts]
        self._cache: dict[tuple[int, str, float], bytes] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runners: list[web.AppRunner] = []
        self._t0 = time.monotonic()

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> WebServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        sockets = []
        for h in range(len(self.truth.hosts)):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            address = f"{self.address_prefix}{h + 1}"
            try:
                sock.bind((address, 0))
            except OSError as exc:
                sock.close()
                raise RuntimeError(f"cannot listen on {address}: {exc}") from exc
            sock.listen(128)
            sock.setblocking(False)
            port = sock.getsockname()[1]
            self.host_keys.append(f"{address}:{port}")
            self.base_urls.append(f"http://{address}:{port}")
            sockets.append(sock)
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve(sockets))
            except BaseException as exc:  # reported to start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._shutdown())
            loop.close()

        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=run, name="e2e-web", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise RuntimeError(f"the web did not start: {failure[0]}") from failure[0]

    async def _serve(self, sockets: list[socket.socket]) -> None:
        for h, sock in enumerate(sockets):
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._handler_for(h))
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            await web.SockSite(runner, sock).start()
            self._runners.append(runner)

    async def _shutdown(self) -> None:
        for runner in self._runners:
            await runner.cleanup()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        self._loop = None
        self._thread = None

    # -- the harness's side ------------------------------------------------------------------
    def set_time(self, t_s: float) -> None:
        """Move the web's clock (seconds of simulated time); call it between cycles only."""
        self._now_s = float(t_s)
        self._cache.clear()

    def log(self) -> pl.DataFrame:
        with self._lock:
            rows = list(self._log)
        return pl.DataFrame(rows, schema=LOG_SCHEMA, orient="row")

    # -- serving -----------------------------------------------------------------------------
    def _handler_for(self, h: int):
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._handle(h, request)

        return handle

    async def _handle(self, h: int, request: web.Request) -> web.StreamResponse:
        arrived = time.monotonic()
        with self._lock:
            self._serial += 1
            serial = self._serial
        now_s = self._now_s
        host = self.truth.hosts[h]
        state = self._states[h]
        path = request.path_qs
        kind, page_id = self._classify(h, request.path, path)
        record: dict[str, Any] = {"kind": kind, "page_id": page_id}

        throttled = False
        if host.burst_min_gap_s is not None:
            close = (
                state.last_arrival is not None
                and arrived - state.last_arrival < host.burst_min_gap_s
            )
            throttled = close or arrived < state.pause_until
            state.last_arrival = arrived
            if throttled:
                state.pause_until = arrived + host.retry_after_s
        if host.latency_s:
            await asyncio.sleep(host.latency_s)

        if throttled:
            response = web.Response(
                status=429,
                text="Too Many Requests\n",
                headers={"Retry-After": str(host.retry_after_s)},
            )
            record["retry_after_s"] = float(host.retry_after_s)
        else:
            response = self._answer(h, kind, page_id, request, now_s, serial, record)
        response.headers["Date"] = content.http_date(self.truth.clock.at(now_s))
        answered = time.monotonic()
        body = response.body if isinstance(response.body, bytes) else b""
        row = (
            serial,
            arrived - self._t0,
            answered - self._t0,
            now_s,
            self.truth.clock.cycle_of(now_s),
            h,
            path,
            kind,
            page_id,
            response.status,
            record.get("served_version"),
            record.get("live_version"),
            request.headers.get("If-None-Match"),
            request.headers.get("If-Modified-Since"),
            request.headers.get("User-Agent"),
            record.get("retry_after_s"),
            len(body),
        )
        with self._lock:
            self._log.append(row)
        return response

    def _classify(self, h: int, path: str, path_qs: str) -> tuple[str, int | None]:
        if path == "/robots.txt":
            return "robots", None
        if path in (
            "/sitemap.xml",
            "/sitemap_index.xml",
            "/sitemaps/pages-1.xml.gz",
            "/sitemaps/pages-2.xml",
        ):
            return "sitemap", None
        if path in ("/feed.rss", "/atom.xml"):
            return "feed", None
        page_id = page_id_of(path_qs)
        if page_id is not None:
            row = self.truth.page(page_id)
            if row is not None and row["host"] == h:
                return "page", page_id
        return "other", None

    def _cached(self, h: int, name: str, now_s: float, make) -> bytes:
        key = (h, name, now_s)
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def _answer(
        self,
        h: int,
        kind: str,
        page_id: int | None,
        request: web.Request,
        now_s: float,
        serial: int,
        record: dict[str, Any],
    ) -> web.Response:
        host = self.truth.hosts[h]
        base = self.base_urls[h]
        path = request.path
        if kind == "robots":
            if host.robots_missing:
                return web.Response(status=404, text="Not Found\n")
            return web.Response(text=content.robots_txt(host, base), content_type="text/plain")
        if kind == "sitemap":
            if host.sitemap == "plain" and path == "/sitemap.xml":
                body = self._cached(
                    h, path, now_s, lambda: content.urlset(self.truth, h, now_s, base)
                )
                return web.Response(body=body, content_type="application/xml")
            if host.sitemap == "index_gz":
                if path == "/sitemap_index.xml":
                    body = self._cached(
                        h, path, now_s, lambda: content.sitemap_index(self.truth, now_s, base)
                    )
                    return web.Response(body=body, content_type="application/xml")
                if path == "/sitemaps/pages-1.xml.gz":
                    body = self._cached(
                        h,
                        path,
                        now_s,
                        lambda: content.gzipped(content.urlset(self.truth, h, now_s, base, part=1)),
                    )
                    return web.Response(body=body, content_type="application/gzip")
                if path == "/sitemaps/pages-2.xml":
                    body = self._cached(
                        h, path, now_s, lambda: content.urlset(self.truth, h, now_s, base, part=2)
                    )
                    return web.Response(body=body, content_type="application/xml")
            return web.Response(status=404, text="Not Found\n")
        if kind == "feed":
            wanted = {"rss": "/feed.rss", "atom": "/atom.xml"}.get(host.feed or "")
            if path != wanted:
                return web.Response(status=404, text="Not Found\n")
            body = self._cached(h, path, now_s, lambda: content.feed(self.truth, h, now_s, base))
            kind_type = "application/rss+xml" if host.feed == "rss" else "application/atom+xml"
            return web.Response(body=body, content_type=kind_type)
        if kind != "page" or page_id is None:
            return web.Response(status=404, text="Not Found\n")
        return self._page(h, page_id, request, now_s, serial, record)

    def _page(
        self,
        h: int,
        page_id: int,
        request: web.Request,
        now_s: float,
        serial: int,
        record: dict[str, Any],
    ) -> web.Response:
        truth = self.truth
        host = truth.hosts[h]
        row = truth.page(page_id)
        assert row is not None
        if now_s < row["appear_s"]:
            return web.Response(status=404, text="Not Found\n")
        if now_s >= row["gone_s"]:
            return web.Response(status=int(row["gone_status"]), text="Gone\n")
        cycle = truth.clock.cycle_of(now_s)
        state = self._states[h]
        attempt = state.attempts.get((page_id, cycle), 0)
        state.attempts[(page_id, cycle)] = attempt + 1
        version = truth.version_at(page_id, now_s)
        record["live_version"] = version
        if host.error_share and bool(
            request_fails(truth.seed, page_id, cycle, attempt, host.error_share)
        ):
            status = _ERROR_STATUSES[(page_id + cycle + attempt) % len(_ERROR_STATUSES)]
            return web.Response(status=status, text="Server Error\n")

        etag, last_modified = self._validators(h, page_id, version, now_s, serial)
        headers: dict[str, str] = {}
        if etag is not None:
            headers["ETag"] = etag
        if last_modified is not None:
            headers["Last-Modified"] = last_modified
        if _not_modified(request, etag, last_modified):
            return web.Response(status=304, headers=headers)
        html = content.render_page(
            truth,
            h,
            page_id,
            version,
            serial=serial,
            now=truth.clock.at(now_s),
            base_url=self.base_urls[h],
        )
        record["served_version"] = version
        return web.Response(text=html, content_type="text/html", charset="utf-8", headers=headers)

    def _validators(
        self, h: int, page_id: int, version: int, now_s: float, serial: int
    ) -> tuple[str | None, str | None]:
        """(ETag, Last-Modified) as the host's validator mode writes them."""
        truth = self.truth
        mode = truth.hosts[h].validators
        changed = content.http_date(truth.clock.at(truth.last_change_s(page_id, now_s)))
        if mode == "honest":
            return f'"{page_id:x}-{version}"', changed
        if mode == "last_modified_only":
            return None, changed
        if mode == "etag_per_response":
            return f'"r{serial:x}"', None
        if mode == "last_modified_now":
            return None, content.http_date(truth.clock.at(now_s))
        if mode == "stuck_304":
            return f'"{page_id:x}"', content.http_date(
                truth.clock.at(truth.row(page_id)["birth_s"])
            )
        return None, None


def _not_modified(request: web.Request, etag: str | None, last_modified: str | None) -> bool:
    """RFC 9110 §13.1: If-None-Match wins over If-Modified-Since when both are sent."""
    inm = request.headers.get("If-None-Match")
    if inm is not None:
        if etag is None:
            return False
        wanted = etag.removeprefix("W/")
        tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
        return "*" in tags or wanted in tags
    ims = request.headers.get("If-Modified-Since")
    if ims is None or last_modified is None:
        return False
    try:
        return parsedate_to_datetime(ims) >= parsedate_to_datetime(last_modified)
    except (TypeError, ValueError):
        return False
