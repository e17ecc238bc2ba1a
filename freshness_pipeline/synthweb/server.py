"""Serve a `World` over real HTTP on loopback, one address per site, on a simulated clock.

Real sockets (not a mocked client) so the crawler's whole network stack, politeness and
validator logic are exercised exactly as on the web. Each site gets its own loopback address so
host keys look like distinct hosts (127.0.0.2:PORT, 127.0.0.3:PORT, ...). The clock is
simulated so a month of change happens in seconds and every response is a function of the
simulated `now`, which tests and the demo set explicitly.
"""

from __future__ import annotations

import asyncio
import csv
import errno
import gzip
import math
import os
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .world import Page, SiteSpec, World, http_date, to_dt, to_ts

if TYPE_CHECKING:
    from .truth import Truth

_ADS = (
    "Cheap flights to anywhere",
    "This one trick will fix your garden",
    "Subscribe now: 3 months free",
    "New phone, who dis?",
    "Local singles in your subnet",
)
_HTML = "text/html; charset=utf-8"
_TEST_PREFIX = "/_test/"


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it, so tests can check what the crawler actually sent."""

    real_time: float  # time.monotonic() when the response was ready
    sim_now: datetime
    site: str
    host: str  # authority as sent in the Host header
    path: str  # path + query
    method: str
    status: int
    if_none_match: str | None
    if_modified_since: str | None
    user_agent: str | None
    bytes_sent: int  # body bytes on the wire (after gzip, 0 for HEAD/304)


class RequestLog:
    """Append-only, thread-safe: the server thread writes while the test thread reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []

    def append(self, record: RequestRecord) -> None:
        with self._lock:
            self._records.append(record)

    def snapshot(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def for_site(self, site: str) -> list[RequestRecord]:
        return [r for r in self.snapshot() if r.site == site]

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __iter__(self) -> Iterator[RequestRecord]:
        return iter(self.snapshot())

    def __getitem__(self, i: int) -> RequestRecord:
        with self._lock:
            return self._records[i]


class SimClock:
    """Simulated time: either frozen (tests step it) or running at `speed` x real time (demo)."""

    def __init__(self, now: datetime | float) -> None:
        self._lock = threading.Lock()
        self._base = to_ts(now)
        self._speed = 0.0
        self._t0 = time.monotonic()

    def set(self, now: datetime | float) -> None:
        with self._lock:
            self._base, self._speed, self._t0 = to_ts(now), 0.0, time.monotonic()

    def run(self, speed: float, start: datetime | float | None = None) -> None:
        with self._lock:
            base = self._now_locked() if start is None else to_ts(start)
            self._base, self._speed, self._t0 = base, float(speed), time.monotonic()

    def _now_locked(self) -> float:
        return self._base + (time.monotonic() - self._t0) * self._speed

    def now_ts(self) -> float:
        with self._lock:
            return self._now_locked()


@dataclass
class _Failure:
    status: int
    remaining: int
    retry_after: str | None
    path_prefix: str | None


def _loopback_candidates() -> Iterator[str]:
    """127.0.0.2, 127.0.0.3, ... (skipping .0/.255 and 127.0.0.1), enough for thousands of sites."""
    for b in range(256):
        for c in range(256):
            for d in range(1, 255):
                if (b, c, d) != (0, 0, 1):
                    yield f"127.{b}.{c}.{d}"


def _bind(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _bind_sockets(n: int) -> list[socket.socket]:
    """One socket per site on its own loopback address where the OS allows (Linux does);
    otherwise (macOS) all on 127.0.0.1 with a port each, which still gives distinct authorities."""
    socks: list[socket.socket] = []
    try:
        for host, _ in zip(_loopback_candidates(), range(n), strict=False):
            socks.append(_bind(host))
        return socks
    except OSError as exc:
        for s in socks:
            s.close()
        if exc.errno not in (errno.EADDRNOTAVAIL, errno.EINVAL, errno.EACCES):
            raise
    return [_bind("127.0.0.1") for _ in range(n)]


def _etag_matches(header: str, etag: str) -> bool:
    # If-None-Match uses weak comparison (RFC 9110 13.1.2): W/ prefixes are ignored.
    if header.strip() == "*":
        return True
    bare = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == bare for tag in header.split(","))


def _parse_http_date(value: str | None) -> float | None:
    if not value:
        return None
    try:
        dt = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return to_ts(dt)


class SyntheticWeb:
    """The synthetic web as real HTTP servers, in a background thread with its own event loop.

    The thread lets synchronous code (the CLI demo, Dagster runs, pytest) drive a crawler that
    runs its own event loop against these servers.
    """

    def __init__(self, world: World, *, now: datetime | None = None) -> None:
        self.world = world
        self.clock = SimClock(world.start if now is None else now)
        self.request_log = RequestLog()
        self.base_urls: dict[str, str] = {}
        self.hosts: dict[str, str] = {}  # site name -> authority "127.0.0.2:PORT"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runners: list[web.AppRunner] = []
        self._failures: dict[str, list[_Failure]] = {s.name: [] for s in world.sites}
        self._fail_lock = threading.Lock()
        self._counters: dict[str, int] = {s.name: 0 for s in world.sites}
        self._bomb: bytes | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> SyntheticWeb:
        if self._thread is not None:
            raise RuntimeError("already started")
        socks = _bind_sockets(len(self.world.sites))
        for spec, sock in zip(self.world.sites, socks, strict=True):
            host, port = sock.getsockname()[:2]
            self.hosts[spec.name] = f"{host}:{port}"
            self.base_urls[spec.name] = f"http://{host}:{port}"
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        error: list[BaseException] = []

        async def setup() -> None:
            for spec, sock in zip(self.world.sites, socks, strict=True):
                app = web.Application()
                app.router.add_route("*", "/{tail:.*}", self._make_handler(spec))
                runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
                await runner.setup()
                await web.SockSite(runner, sock).start()
                self._runners.append(runner)

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(setup())
            except BaseException as exc:  # surfaced to the caller of start()
                error.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="synthweb", daemon=True)
        self._thread.start()
        ready.wait(30)
        if error:
            self._thread.join(5)
            loop.close()
            self._thread = self._loop = None
            for s in socks:
                s.close()
            raise RuntimeError("synthetic web failed to start") from error[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            for runner in self._runners:
                await runner.cleanup()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(15)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(15)
            if not thread.is_alive():
                loop.close()
            self._runners.clear()
            self._loop = self._thread = None

    def __enter__(self) -> SyntheticWeb:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ clock
    def set_now(self, now: datetime) -> None:
        """Freeze simulated time at `now`; every later response is computed as of it."""
        self.clock.set(now)

    def run_clock(self, speed: float, start: datetime | None = None) -> None:
        """Let simulated time flow at `speed` simulated seconds per real second."""
        self.clock.run(speed, start)

    @property
    def now(self) -> datetime:
        return to_dt(self.clock.now_ts())

    # ------------------------------------------------------------------ helpers for tests
    def truth(self) -> Truth:
        from .truth import Truth

        if not self.base_urls:
            raise RuntimeError("start() first: the truth is keyed by served URLs")
        return Truth(self.world, self.base_urls)

    def url(self, page: Page) -> str:
        return self.base_urls[page.site] + page.path

    def inject_failures(
        self,
        site: str,
        status: int,
        count: int = 1,
        *,
        retry_after: float | str | None = None,
        path_prefix: str | None = None,
    ) -> None:
        """Answer the next `count` matching requests to `site` with `status` (429, 503, 500...),
        so backoff and robots-unavailable handling can be tested against real responses."""
        ra = (
            None
            if retry_after is None
            else (retry_after if isinstance(retry_after, str) else f"{retry_after:g}")
        )
        with self._fail_lock:
            self._failures[site].append(_Failure(status, count, ra, path_prefix))

    def clear_failures(self) -> None:
        with self._fail_lock:
            for v in self._failures.values():
                v.clear()

    def seeds_csv(
        self,
        path: str | os.PathLike[str],
        *,
        at: datetime | None = None,
        variants: bool = True,
        invalid_rows: bool = False,
        redirects: bool = False,
    ) -> Path:
        """Write `url,value,url_class` for every page existing at `at` (default world start).

        Variants (same page, different spelling) exercise the normalizer; invalid rows exercise
        the loader's line-numbered error report; /private/ pages are included on purpose so the
        crawler has to mark them blocked.
        """
        if not self.base_urls:
            raise RuntimeError("start() first: seed URLs contain the bound ports")
        ts = to_ts(self.world.start if at is None else at)
        pages = {p.page_id: p for p in self.world.pages if p.is_alive(ts)}
        by_url = {self.url(p): p for p in pages.values()}
        rows: list[tuple[str, str, str]] = [
            (self.url(p), f"{p.value:.6g}", p.url_class) for p in pages.values()
        ]
        extra: list[tuple[str, str]] = []
        if variants:
            extra += self.world.variant_urls(self.base_urls)
        if redirects:
            extra += self.world.redirect_aliases(self.base_urls)
        for variant, canonical in extra:
            p = by_url.get(canonical)
            if p is not None:
                rows.append((variant, f"{p.value:.6g}", p.url_class))
        if invalid_rows:
            rows.insert(min(3, len(rows)), ("ftp://x/y", "1.0", "article"))
            rows.insert(min(7, len(rows)), ("not a url", "1.0", ""))
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(["url", "value", "url_class"])
            writer.writerows(rows)
        return out

    # ------------------------------------------------------------------ HTTP
    def _make_handler(self, spec: SiteSpec) -> Any:
        async def handle(request: web.Request) -> web.StreamResponse:
            # Arrival time, before rendering: politeness gaps are between request starts.
            arrived = time.monotonic()
            now = self.clock.now_ts()
            resp = await self._respond(spec, request, now)
            resp.headers.setdefault("Date", http_date(now))
            body = resp.body if isinstance(resp.body, bytes) else b""
            sent = 0 if request.method == "HEAD" or resp.status == 304 else len(body)
            self.request_log.append(
                RequestRecord(
                    real_time=arrived,
                    sim_now=to_dt(now),
                    site=spec.name,
                    host=request.host,
                    path=request.path_qs,
                    method=request.method,
                    status=resp.status,
                    if_none_match=request.headers.get("If-None-Match"),
                    if_modified_since=request.headers.get("If-Modified-Since"),
                    user_agent=request.headers.get("User-Agent"),
                    bytes_sent=sent,
                )
            )
            return resp

        return handle

    def _take_failure(self, site: str, path: str) -> _Failure | None:
        with self._fail_lock:
            for f in self._failures[site]:
                if f.remaining > 0 and (f.path_prefix is None or path.startswith(f.path_prefix)):
                    f.remaining -= 1
                    return f
        return None

    async def _respond(self, spec: SiteSpec, request: web.Request, now: float) -> web.Response:
        if request.method not in ("GET", "HEAD"):
            return web.Response(status=405, headers={"Allow": "GET, HEAD"})
        path = request.path
        failure = self._take_failure(spec.name, path)
        if failure is not None:
            headers = {"Retry-After": failure.retry_after} if failure.retry_after else {}
            return web.Response(status=failure.status, headers=headers, text="unavailable\n")
        base = self.base_urls[spec.name]
        world = self.world
        if path == "/robots.txt":
            return web.Response(text=world.robots_txt(spec.name, base), content_type="text/plain")
        if path == "/sitemap.xml":
            return web.Response(
                text=world.sitemap_xml(spec.name, base, now), content_type="application/xml"
            )
        if spec.sitemap_index:
            if path == "/sitemap_index.xml":
                return web.Response(
                    text=world.sitemap_index_xml(spec.name, base, now),
                    content_type="application/xml",
                )
            m = re.fullmatch(r"/sitemap-(\d+)\.xml\.gz", path)
            if m:
                xml = world.sitemap_chunk_xml(spec.name, base, now, int(m.group(1)))
                if xml is not None:
                    return web.Response(
                        body=gzip.compress(xml.encode(), mtime=0),
                        content_type="application/gzip",
                    )
        if path == "/":
            return web.Response(text=world.home_html(spec.name, now), content_type="text/html")
        if path.startswith(_TEST_PREFIX):
            return await self._test_endpoint(path[len(_TEST_PREFIX) :], request)
        m = re.fullmatch(r"/p/(\d+)", path)
        if m:
            alias = world.page_by_id(int(m.group(1)))
            if alias is not None and alias.site == spec.name and alias.born_at <= now:
                return web.Response(status=301, headers={"Location": alias.path})
            return _not_found(404)

        page = world.page_at(spec.name, path)
        if page is None or now < page.born_at:
            return _not_found(404)
        if now >= page.dies_at:
            return _not_found(page.death_status)
        return self._page_response(spec, page, request, now)

    def _page_response(
        self, spec: SiteSpec, page: Page, request: web.Request, now: float
    ) -> web.Response:
        world = self.world
        headers: dict[str, str] = {}
        behaviour = spec.behaviour
        volatile: dict[str, str] | None = None
        last_modified = page.last_modified_at(now)
        not_modified = False
        ims = _parse_http_date(request.headers.get("If-Modified-Since"))
        if ims is not None and ims > now:
            ims = None  # a date in the future is invalid (RFC 9110 13.1.3)
        if behaviour in ("honest", "polite"):
            etag = world.etag(page, now)
            headers["ETag"] = etag
            headers["Last-Modified"] = http_date(last_modified)
            inm = request.headers.get("If-None-Match")
            if inm is not None:
                not_modified = _etag_matches(inm, etag)
            elif ims is not None:
                not_modified = math.floor(last_modified) <= ims
        elif behaviour == "lastmod_only":
            headers["Last-Modified"] = http_date(last_modified)
            not_modified = ims is not None and math.floor(last_modified) <= ims
        elif behaviour == "stale_lastmod":
            headers["Last-Modified"] = http_date(page.born_at)
        elif behaviour == "volatile":
            self._counters[spec.name] += 1
            n = self._counters[spec.name]
            nonce = os.urandom(8).hex()
            headers["ETag"] = f'"{os.urandom(10).hex()}"'
            headers["Last-Modified"] = http_date(now)
            headers["Cache-Control"] = "no-store"
            ad = random.Random(n).randrange(len(_ADS))
            volatile = {
                "nonce": nonce,
                "counter": str(1000 + 7 * n),
                "ad": _ADS[ad],
                "ad_id": str(ad),
            }
        # no_validators: no headers, always 200.
        if not_modified:
            return web.Response(status=304, headers=headers)
        body = world.render(page, now, volatile=volatile).encode("utf-8")
        headers["Content-Type"] = _HTML
        if spec.gzip_pages and "gzip" in request.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body, mtime=0)
            headers["Content-Encoding"] = "gzip"
            headers["Vary"] = "Accept-Encoding"
        return web.Response(body=body, headers=headers)

    async def _test_endpoint(self, rest: str, request: web.Request) -> web.Response:
        """Misbehaviour on demand for fetch-layer tests; not in any sitemap or in the truth."""
        m = re.fullmatch(r"redirect/(\d+)", rest)
        if m:
            n = int(m.group(1))
            if n > 0:
                return web.Response(status=302, headers={"Location": f"/_test/redirect/{n - 1}"})
            return web.Response(
                text="<html><body><article>arrived</article></body></html>",
                content_type="text/html",
            )
        if rest == "loop":
            return web.Response(status=302, headers={"Location": "/_test/loop"})
        if rest == "bomb":  # 32 MiB of zeros in ~32 KiB of gzip: tests the decompressed cap
            if self._bomb is None:
                self._bomb = gzip.compress(b"\0" * (32 << 20), compresslevel=9, mtime=0)
            return web.Response(
                body=self._bomb, headers={"Content-Encoding": "gzip", "Content-Type": _HTML}
            )
        if rest == "big":  # 4 MiB uncompressed: tests the body-size cap
            return web.Response(
                body=b"<html><body>" + b"x" * (4 << 20) + b"</body></html>",
                headers={"Content-Type": _HTML},
            )
        if rest == "slow":
            try:
                seconds = min(float(request.query.get("seconds", "2")), 30.0)
            except ValueError:
                seconds = 2.0
            await asyncio.sleep(seconds)
            return web.Response(text="slow\n")
        if rest == "latin1":  # charset only in <meta>: tests charset sniffing
            html = (
                '<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head>'
                "<body><article>Cr\xe8me br\xfbl\xe9e</article></body></html>"
            )
            return web.Response(body=html.encode("latin-1"), headers={"Content-Type": "text/html"})
        m = re.fullmatch(r"status/(\d{3})", rest)
        if m:
            headers = {}
            if "retry_after" in request.query:
                headers["Retry-After"] = request.query["retry_after"]
            return web.Response(status=int(m.group(1)), headers=headers, text="status\n")
        return _not_found(404)


def _not_found(status: int) -> web.Response:
    reason = "Gone" if status == 410 else "Not Found"
    return web.Response(
        status=status,
        text=f"<!DOCTYPE html><html><body><h1>{status} {reason}</h1></body></html>\n",
        content_type="text/html",
    )
