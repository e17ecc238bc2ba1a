"""Latency-aware throttling: the policy on its own (no sleeping), then the client against real
loopback servers (slow hosts, failing hosts, the breaker, the cycle limit, isolation)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from freshness_pipeline.web.client import FetchRequest, FetchResult, FetchSettings, fetch_all
from freshness_pipeline.web.throttle import (
    HostThrottle,
    Signal,
    ThrottlePolicy,
    Throttles,
    classify_status,
)
from freshness_pipeline_tests.test_client import LOOPBACK, Server, fp, req, serve, text

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def throttle(floor: float = 0.0, **policy: Any) -> HostThrottle:
    kw: dict[str, Any] = {"backoff_jitter": 0.0, **policy}
    return HostThrottle("h", ThrottlePolicy(**kw), floor=floor, rng=random.Random(1))


# ------------------------------------------------------------------ the policy, no clock


def test_classify_status() -> None:
    assert classify_status(None) == "failure"
    assert [classify_status(s) for s in (200, 204, 304)] == ["ok"] * 3
    assert [classify_status(s) for s in (301, 404, 410, 403)] == ["other"] * 4
    assert [classify_status(s) for s in (429, 503)] == ["throttled"] * 2
    assert [classify_status(s) for s in (500, 502, 504)] == ["failure"] * 3


def test_delay_follows_latency_over_target_concurrency() -> None:
    one = throttle(target_concurrency=1.0)
    two = throttle(target_concurrency=2.0)
    for t in (one, two):
        for _ in range(12):
            t.observe("ok", now=0, latency_s=0.8)
    assert one.delay == pytest.approx(0.8)
    assert two.delay == pytest.approx(0.4)
    # A slower answer raises the gap at once (no averaging upwards) ...
    one.observe("ok", now=0, latency_s=3.0)
    assert one.delay == pytest.approx(3.0)
    # ... a faster one lowers it only halfway, so one lucky response does not unleash us.
    one.observe("ok", now=0, latency_s=0.2)
    assert one.delay == pytest.approx(1.6)


def test_crawl_delay_is_a_floor_even_above_the_cap() -> None:
    t = throttle(floor=2.0, max_delay_s=1.0)
    assert t.delay == 2.0
    for _ in range(5):
        t.observe("ok", now=0, latency_s=0.001)
    assert t.delay == 2.0
    t.observe("failure", now=0, latency_s=0.001)
    assert t.delay == 2.0  # the cap would say 1 s, but robots.txt asked for 2
    relaxed = throttle(floor=0.5, max_delay_s=10.0)
    relaxed.raise_floor(0.1)  # a laxer Crawl-delay never relaxes an earlier, stricter one
    assert relaxed.floor == 0.5
    relaxed.raise_floor(1.5)
    assert relaxed.delay == 1.5


def test_cheap_non_page_answers_never_speed_us_up() -> None:
    t = throttle()
    t.observe("ok", now=0, latency_s=1.0)
    for _ in range(5):
        t.observe("other", now=0, latency_s=0.001)  # fast 404s and redirects
    assert t.delay == pytest.approx(1.0)
    t.observe("other", now=0, latency_s=4.0)  # but a slow one still slows us
    assert t.delay == pytest.approx(4.0)


def test_failures_back_off_exponentially_capped_and_never_lower_the_delay() -> None:
    t = throttle(backoff_base_s=0.5, max_delay_s=5.0, failure_limit=None)
    delays = []
    for _ in range(6):
        before = t.delay
        t.observe("failure", now=0, latency_s=0.0)
        assert t.delay >= before
        delays.append(t.delay)
    assert delays == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    # A slow host that then fails is slowed further, not reset to the back-off base.
    slow = throttle(backoff_base_s=0.5, failure_limit=None)
    slow.observe("ok", now=0, latency_s=3.0)
    slow.observe("failure", now=0, latency_s=0.01, detail="HTTP 500")
    assert slow.delay == pytest.approx(6.0) and slow.last_failure == "HTTP 500"
    # A timeout's latency is the time it took: it counts as very slow.
    timed_out = throttle(backoff_base_s=0.1, failure_limit=None)
    timed_out.observe("failure", now=0, latency_s=7.0)
    assert timed_out.delay == pytest.approx(7.0)
    # Retry-After on a 429 is a lower bound for the gap (within the cap).
    asked = throttle(backoff_base_s=0.1, max_delay_s=60)
    asked.observe("throttled", now=0, latency_s=0.01, retry_after_s=30)
    assert asked.delay == pytest.approx(30.0) and asked.failures == 1


def test_an_answer_to_a_request_sent_before_a_throttle_does_not_bring_the_gap_down() -> None:
    """A request in flight when its host said "slower" says nothing of the pace asked for
    since: its served answer halved the gap the throttle had just raised. One sent after the
    throttling answer speeds up as any served answer does. A Retry-After holds the host until
    its end whatever comes in meanwhile."""
    t = throttle(backoff_base_s=0.5, failure_limit=None, backoff_jitter=0)
    t.observe("throttled", now=10.0, latency_s=0.05, retry_after_s=1.0)
    raised = t.delay
    assert t.not_before == pytest.approx(11.0) and t.throttled_at == 10.0
    t.observe("ok", now=10.2, latency_s=0.05, sent_at=9.9)  # left before the 429 came in
    assert t.delay == raised and t.not_before == pytest.approx(11.0)
    t.observe("ok", now=11.5, latency_s=0.05, sent_at=11.1)  # left after it
    assert t.delay < raised


def test_jitter_only_adds_and_stays_within_its_fraction() -> None:
    seen = []
    for seed in range(50):
        t = HostThrottle(
            "h", ThrottlePolicy(backoff_base_s=1.0, backoff_jitter=0.25), rng=random.Random(seed)
        )
        t.observe("failure", now=0)
        seen.append(t.delay)
    assert all(1.0 <= d <= 1.25 for d in seen)
    assert len(set(seen)) > 40  # actually spread


def test_successes_forgive_failures_one_at_a_time() -> None:
    t = throttle(backoff_base_s=1.0, failure_limit=None)
    for _ in range(3):
        t.observe("failure", now=0)
    assert (t.failures, t.delay) == (3, 4.0)
    t.observe("ok", now=0, latency_s=0.0)
    assert (t.failures, t.delay) == (2, 2.0)
    t.observe("other", now=0, latency_s=0.0)  # a 404 forgives but never lowers the gap
    assert (t.failures, t.delay) == (1, 2.0)
    for _ in range(8):
        t.observe("ok", now=0, latency_s=0.0)
    assert t.failures == 0 and t.delay < 0.01
    # Forgiven failures shorten the next back-off too: it restarts low, not at 2^3.
    t.observe("failure", now=0)
    assert t.delay == pytest.approx(1.0)


def test_breaker_opens_then_lets_one_probe_through_after_the_cool_down() -> None:
    # no short retries: the long cool-down alone (what a host that keeps failing gets)
    t = throttle(backoff_base_s=0.1, failure_limit=3, breaker_cooldown_s=100.0, breaker_retries=0)
    t.observe("failure", now=0)
    t.observe("ok", now=1, latency_s=0.0)  # 1 - 1 = 0
    t.observe("failure", now=2)
    t.observe("failure", now=3)
    assert t.allows(3) and not t.tripped
    t.observe("failure", now=4, detail="connect failed")
    assert t.tripped and t.n_trips == 1
    assert not t.allows(5) and not t.allows(103.9)
    assert "circuit breaker" in t.breaker_reason() and "connect failed" in t.breaker_reason()
    assert t.allows(104)  # half-open
    t.started(104)
    assert not t.allows(104.5)  # one probe at a time
    t.observe("failure", now=105)  # the probe failed: open again, cool-down restarts
    assert not t.allows(200) and t.allows(205)
    t.started(205)
    t.observe("ok", now=206, latency_s=0.01)
    assert not t.tripped and t.allows(206)
    assert t.snapshot()["n_trips"] == 1 and t.snapshot()["breaker_open"] is False


def test_a_flaky_hosts_breaker_retries_soon_and_a_down_hosts_waits_long() -> None:
    """A run of failures on a host that answers well otherwise is bad luck: short cool-downs,
    doubling, a few times; a host that never answered, or fails every probe, is down."""
    t = throttle(failure_limit=3, breaker_cooldown_s=600.0, breaker_retry_s=5.0, breaker_retries=2)
    t.observe("ok", now=0, latency_s=0.01)
    for k in range(3):
        t.observe("failure", now=1 + k)
    assert t.tripped and t.retries_soon() and t.reopens_at() == pytest.approx(3 + 5.0)
    t.started(8)
    t.observe("failure", now=8.5)  # the probe failed: a longer pause
    assert t.reopens_at() == pytest.approx(8.5 + 10.0)
    t.started(18.5)
    t.observe("failure", now=19)  # third opening: past the retries, taken for down
    assert not t.retries_soon() and t.reopens_at() == pytest.approx(19 + 600.0)
    down = throttle(failure_limit=3, breaker_cooldown_s=600.0, breaker_retry_s=5.0)
    for k in range(3):
        down.observe("failure", now=k)
    assert not down.retries_soon() and down.reopens_at() == pytest.approx(2 + 600.0)


def test_autothrottle_off_keeps_the_static_gap_but_still_backs_off() -> None:
    t = throttle(floor=0.2, autothrottle=False, backoff_base_s=1.0)
    t.observe("ok", now=0, latency_s=5.0)
    assert t.delay == pytest.approx(0.2)
    t.observe("failure", now=0, latency_s=0.0)
    assert t.delay == pytest.approx(1.0)
    t.observe("ok", now=0, latency_s=5.0)
    assert t.delay == pytest.approx(0.6)  # halfway back to the static gap (the Crawl-delay)


def test_settings_validate_the_throttle_knobs() -> None:
    policy = FetchSettings().throttle
    assert policy.autothrottle and 1.0 <= policy.target_concurrency <= 2.0
    assert policy.max_delay_s == 60.0 and policy.failure_limit == 3
    assert FetchSettings(throttle=ThrottlePolicy(failure_limit=None)).throttle.failure_limit is None
    for bad in (
        {"target_concurrency": 0},
        {"max_delay_s": -1},
        {"backoff_jitter": 2},
        {"failure_limit": 0},
    ):
        with pytest.raises(ValueError):
            ThrottlePolicy(**bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ against real servers


def sleeps(seconds: float, body: str = "page") -> Handler:
    async def handler(request: web.Request) -> web.Response:
        await asyncio.sleep(seconds)
        return web.Response(text=body, content_type="text/html")

    return handler


def fails(code: int = 500) -> Handler:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=code, text="oops")

    return handler


def starts(server: Server) -> list[float]:
    return [t for t, _, _ in server.log]


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def recorded(throttles: Throttles, host: str, floor: float = 0.0) -> list[tuple[Signal, float]]:
    """Record (signal, delay after it) for every observation of ``host``."""
    t = throttles.for_host(host, floor=floor)
    history: list[tuple[Signal, float]] = []
    observe = t.observe

    def spy(signal: Signal, **kw: Any) -> None:
        observe(signal, **kw)
        history.append((signal, t.delay))

    t.observe = spy  # type: ignore[method-assign]
    return history


async def run(
    requests: list[FetchRequest], cfg: FetchSettings, throttles: Throttles | None = None
) -> list[FetchResult]:
    return await fetch_all(requests, cfg, allow=LOOPBACK, fingerprint=fp, throttles=throttles)


def test_a_slow_host_gets_its_delay_raised() -> None:
    latency = 0.25

    async def scenario(autothrottle: bool) -> tuple[list[float], Throttles, list[FetchResult]]:
        async with serve({"/p": sleeps(latency)}) as srv:
            cfg = FetchSettings(
                host_concurrency=2, throttle=ThrottlePolicy(autothrottle=autothrottle)
            )
            throttles = Throttles(cfg.throttle)
            results = await run([req(srv, f"/p?i={i}") for i in range(5)], cfg, throttles)
            return starts(srv), throttles, results

    async def both() -> Any:
        return await asyncio.gather(scenario(True), scenario(False))

    (on, on_throttles, on_results), (off, _, off_results) = asyncio.run(both())
    assert all(r.outcome == "new" for r in on_results + off_results)
    # Nothing known at first: two go out together. Then one request per latency, i.e. about
    # target_concurrency (1) in flight instead of host_concurrency (2).
    assert gaps(on)[0] < latency * 0.6
    assert min(gaps(on)[1:]) >= latency * 0.9, gaps(on)
    snap = on_throttles.snapshot()[0]
    assert snap["delay_s"] >= latency * 0.9 and snap["latency_s"] >= latency * 0.9
    assert snap["n_ok"] == 5 and snap["failures"] == 0
    # Without autothrottle the host gets host_concurrency at a time, back to back.
    assert sum(1 for g in gaps(off) if g < latency * 0.6) >= 2


def test_errors_raise_the_delay_and_never_lower_it() -> None:
    async def scenario() -> tuple[list[float], list[tuple[Signal, float]], list[FetchResult]]:
        async with serve({"/slow": sleeps(0.1), "/err": fails(500), "/ok": text("ok")}) as srv:
            cfg = FetchSettings(
                host_concurrency=1,
                throttle=ThrottlePolicy(backoff_base_s=0.05, backoff_jitter=0, failure_limit=None),
            )
            throttles = Throttles(cfg.throttle)
            history = recorded(throttles, srv.host)
            paths = ["/slow", "/err", "/err", "/ok", "/ok"]
            results = await run(
                [req(srv, f"{p}?i={i}") for i, p in enumerate(paths)], cfg, throttles
            )
            return starts(srv), history, results

    times, history, results = asyncio.run(scenario())
    assert [r.http_status for r in results] == [200, 500, 500, 200, 200]
    signals = [s for s, _ in history]
    delays = [d for _, d in history]
    assert signals == ["ok", "failure", "failure", "ok", "ok"]
    # 0.1 s latency; two fast 500s double it (they must not pull it towards their ~0 latency);
    # then fast successes halve it step by step.
    assert delays[0] == pytest.approx(0.1, abs=0.03)
    assert delays[1] == pytest.approx(2 * delays[0]) and delays[2] == pytest.approx(4 * delays[0])
    assert delays[3] == pytest.approx(delays[2] / 2, rel=0.05)
    assert delays[4] == pytest.approx(delays[3] / 2, rel=0.05)
    # And the server saw those gaps between request starts.
    for gap, delay in zip(gaps(times)[1:], delays[1:], strict=False):
        assert gap >= delay * 0.95, (gaps(times), delays)


def test_timeouts_count_as_slow_failures() -> None:
    async def scenario() -> tuple[list[float], Throttles, list[FetchResult]]:
        async with serve({"/stall": sleeps(2.0), "/ok": text("ok")}) as srv:
            cfg = FetchSettings(
                host_concurrency=1,
                read_timeout=0.3,
                throttle=ThrottlePolicy(backoff_base_s=0.05, backoff_jitter=0),
            )
            throttles = Throttles(cfg.throttle)
            requests = [req(srv, "/stall?i=1"), req(srv, "/stall?i=2"), req(srv, "/ok")]
            results = await run(requests, cfg, throttles)
            return starts(srv), throttles, results

    times, throttles, results = asyncio.run(scenario())
    first, second, ok = results
    for stall in (first, second):
        assert stall.outcome == "error" and "timeout" in (stall.error or "")
    assert ok.outcome == "new"
    # One at a time (two in flight raced: the next request could start between their two
    # timeouts). Each timed out after 0.3 s, its latency; the second failure doubled the
    # gap that latency set, so the next request waited 0.6 s after it started, not 0.3 s.
    assert gaps(times)[1] >= 0.6 * 0.95, gaps(times)
    assert throttles.snapshot()[0]["max_delay_s"] >= 0.6 * 0.95


def test_breaker_trips_and_defers_the_rest_while_other_hosts_carry_on() -> None:
    async def scenario() -> tuple[Server, Server, Throttles, list[FetchResult]]:
        async with serve({"/x": fails(502)}) as bad, serve({"/y": text("fine")}) as good:
            cfg = FetchSettings(
                throttle=ThrottlePolicy(failure_limit=3, backoff_base_s=0.02, backoff_jitter=0)
            )
            throttles = Throttles(cfg.throttle)
            requests = []
            for i in range(6):
                requests += [req(bad, f"/x?i={i}"), req(good, f"/y?i={i}")]
            results = await run(requests, cfg, throttles)
            return bad, good, throttles, results

    bad, good, throttles, results = asyncio.run(scenario())
    bad_results = [r for r in results if r.host == bad.host]
    good_results = [r for r in results if r.host == good.host]
    assert len(bad.log) == 3
    assert [r.outcome for r in bad_results[:3]] == ["error"] * 3
    assert all(r.http_status == 502 and r.sent for r in bad_results[:3])
    for deferred in bad_results[3:]:
        assert deferred.outcome == "deferred" and not deferred.sent
        assert "circuit breaker" in (deferred.error or "") and "502" in (deferred.error or "")
    assert [r.outcome for r in good_results] == ["new"] * 6
    assert throttles[bad.host].tripped and not throttles[good.host].tripped


def test_a_slow_or_backing_off_host_never_holds_up_a_fast_one() -> None:
    async def scenario() -> dict[str, Any]:
        async with (
            serve({"/s": sleeps(0.6)}) as slow,
            serve({"/e": fails(500)}) as failing,
            serve({"/f": text("fast")}) as fast,
        ):
            # Two global slots for three hosts: a host waiting out its gap or back-off must
            # not sit on a slot, or the fast host would starve.
            cfg = FetchSettings(
                global_concurrency=2,
                host_concurrency=1,
                throttle=ThrottlePolicy(backoff_base_s=0.5, failure_limit=None),
            )
            requests = []
            for i in range(3):  # interleaved, the troubled hosts first
                requests += [req(slow, f"/s?i={i}")] if i < 2 else []
                requests += [req(failing, f"/e?i={i}")]
            requests += [req(fast, f"/f?i={i}") for i in range(4)]
            started = time.monotonic()
            results = await run(requests, cfg)
            return {
                "results": results,
                "fast": [t - started for t in starts(fast)],
                "slow": [t - started for t in starts(slow)],
                "failing": [t - started for t in starts(failing)],
            }

    out = asyncio.run(scenario())
    # Had the failing host kept a slot through its back-off, the slow one would hold the other
    # for 0.6 s and the fast host could not start before then.
    assert len(out["fast"]) == 4 and max(out["fast"]) < 0.45, out["fast"]
    assert len(out["slow"]) == 2 and max(out["slow"]) >= 0.55  # paced at its latency
    assert len(out["failing"]) == 3 and min(gaps(out["failing"])) >= 0.5
    assert [r.outcome for r in out["results"] if "/f" in r.url] == ["new"] * 4


def test_a_throttled_host_is_deferred_at_the_cycle_limit_instead_of_waited_for() -> None:
    async def scenario() -> tuple[float, list[FetchResult], Server]:
        async with serve({"/e": fails(500)}) as failing, serve({"/f": text("f")}) as fast:
            cfg = FetchSettings(
                cycle_time_limit_s=2.0,
                host_concurrency=1,
                throttle=ThrottlePolicy(backoff_base_s=5.0, failure_limit=None),
            )
            started = time.monotonic()
            results = await run(
                [req(failing, f"/e?i={i}") for i in range(4)]
                + [req(fast, f"/f?i={i}") for i in range(3)],
                cfg,
            )
            return time.monotonic() - started, results, failing

    elapsed, results, failing = asyncio.run(scenario())
    assert elapsed < 1.0  # not parked until the deadline, let alone for the back-off
    assert len(failing.log) == 1
    assert results[0].outcome == "error"
    assert [r.outcome for r in results[1:4]] == ["deferred"] * 3
    assert all("time limit" in (r.error or "") for r in results[1:4])
    assert [r.outcome for r in results[4:]] == ["new"] * 3


def test_a_retry_after_longer_than_the_window_stops_the_host_and_raises_its_delay() -> None:
    async def scenario() -> tuple[list[FetchResult], Throttles]:
        async def limited(request: web.Request) -> web.Response:
            return web.Response(status=429, headers={"Retry-After": "7"})

        async with serve({"/l": limited, "/a": text("a")}) as srv:
            cfg = FetchSettings(host_concurrency=1, fetch_window_s=5.0)
            throttles = Throttles(cfg.throttle)
            results = await run([req(srv, "/l"), req(srv, "/a")], cfg, throttles)
            return results, throttles

    (limited, after), throttles = asyncio.run(scenario())
    assert (limited.http_status, limited.retry_after_s) == (429, 7.0)
    assert after.outcome == "deferred" and after.retry_after_s == 7.0
    assert "429" in (after.error or "")
    snap = throttles.snapshot()[0]
    assert snap["delay_s"] >= 7.0 and snap["n_failures"] == 1


def test_a_carried_over_open_breaker_defers_without_sending() -> None:
    async def scenario() -> tuple[list[FetchResult], Server]:
        async with serve({"/y": text("fine")}) as srv:
            cfg = FetchSettings()
            throttles = Throttles(cfg.throttle)
            t = throttles.for_host(srv.host)
            for _ in range(3):
                t.observe("failure", now=time.monotonic(), detail="connect failed")
            results = await run([req(srv, "/y")], cfg, throttles)
            return results, srv

    (result,), srv = asyncio.run(scenario())
    assert result.outcome == "deferred" and not result.sent and srv.log == []
    assert "circuit breaker" in (result.error or "")


def test_a_short_retry_after_pauses_the_host_and_resumes_it() -> None:
    """A pause that fits the cycle is waited out: the host's other fetches go out after it
    (none during it), and none is deferred."""

    async def scenario() -> tuple[list[FetchResult], Server, Throttles]:
        answered = {"n": 0}

        async def once_limited(request: web.Request) -> web.Response:
            answered["n"] += 1
            if answered["n"] == 2:
                return web.Response(status=429, headers={"Retry-After": "1"})
            return web.Response(text=f"page {request.path_qs}", content_type="text/html")

        async with serve({"/p": once_limited}) as srv:
            cfg = FetchSettings(host_concurrency=1, throttle=ThrottlePolicy(backoff_jitter=0))
            throttles = Throttles(cfg.throttle)
            results = await run([req(srv, f"/p?i={i}") for i in range(5)], cfg, throttles)
            return results, srv, throttles

    results, srv, throttles = asyncio.run(scenario())
    assert [r.http_status for r in results] == [200, 429, 200, 200, 200]
    assert not [r for r in results if r.outcome == "deferred"]
    times = starts(srv)
    answered_429 = times[1]
    assert min(t for t in times[2:]) >= answered_429 + 1.0  # nothing within the pause
    snap = throttles.snapshot()[0]
    assert snap["n_pauses"] == 1 and snap["n_throttled"] == 1


def test_no_request_goes_inside_a_retry_after_whatever_answers_arrive_meanwhile() -> None:
    """A host that serves one request at a time and answers an overlapping one 429 with
    Retry-After: 1. The request in flight beside the refused one came back served, the gap
    moved halfway down to its latency, and the next request left 0.75-0.86 s after the 429,
    inside the pause (found by an outside held-out web, four times in forty cycles). The pause
    now holds from the answer that asked for it, whatever is learned meanwhile."""

    async def scenario() -> tuple[list[FetchResult], list[tuple[float, int]]]:
        busy = {"n": 0}
        seen: list[tuple[float, int]] = []

        async def one_at_a_time(request: web.Request) -> web.Response:
            if busy["n"]:
                seen.append((time.monotonic(), 429))
                return web.Response(status=429, headers={"Retry-After": "1"})
            busy["n"] += 1
            seen.append((time.monotonic(), 200))
            try:
                await asyncio.sleep(0.3)
            finally:
                busy["n"] -= 1
            return web.Response(text=f"page {request.path_qs}", content_type="text/html")

        async with serve({"/p": one_at_a_time}) as srv:
            cfg = FetchSettings(host_concurrency=2, throttle=ThrottlePolicy(backoff_jitter=0))
            results = await run([req(srv, f"/p?i={i}") for i in range(6)], cfg)
            return results, seen

    results, seen = asyncio.run(scenario())
    refused = [t for t, status in seen if status == 429]
    assert refused, seen  # the two first requests overlapped
    for at in refused:
        inside = [t - at for t, _ in seen if at < t < at + 1.0]
        assert not inside, (inside, seen)
    assert not [r for r in results if r.outcome == "deferred"]


def test_a_host_that_throttles_bursts_is_paced_below_its_limit() -> None:
    """A server that answers 429 to two requests closer than 0.3 s: the fetcher learns a gap
    above that from one or two answers, waits out each pause, and fetches every other page
    (the old client sent two at once and deferred the rest of the host after the first 429)."""
    min_gap = 0.3

    async def scenario() -> tuple[list[FetchResult], Server, Throttles]:
        last = {"t": None}

        async def bursty(request: web.Request) -> web.Response:
            now, before = time.monotonic(), last["t"]
            last["t"] = now
            if before is not None and now - before < min_gap:
                return web.Response(status=429, headers={"Retry-After": "1"})
            return web.Response(text=f"page {request.path_qs}", content_type="text/html")

        async with serve({"/p": bursty}) as srv:
            cfg = FetchSettings()  # default concurrency: two to a host that has not throttled
            throttles = Throttles(cfg.throttle)
            results = await run([req(srv, f"/p?i={i}") for i in range(12)], cfg, throttles)
            return results, srv, throttles

    results, srv, throttles = asyncio.run(scenario())
    throttled = [r for r in results if r.http_status == 429]
    assert len(throttled) <= 2, [r.http_status for r in results]
    assert not [r for r in results if r.outcome == "deferred"]
    assert sum(r.outcome == "new" for r in results) == 12 - len(throttled)
    snap = throttles.snapshot()[0]
    assert snap["gap_s"] >= min_gap
    # after the last 429 every request kept the learned gap
    times = starts(srv)
    last_429 = max(i for i, r in enumerate(results) if r.http_status == 429)
    assert min(gaps(times[last_429 + 1 :])) >= min_gap


def test_a_learned_gap_paces_a_host_from_its_first_request() -> None:
    """What earlier cycles learned (the request's min_gap_s and concurrency) holds from the
    start: no burst, so no throttling answer at all."""

    async def scenario() -> list[float]:
        async with serve({"/p": text("p")}) as srv:
            cfg = FetchSettings()
            requests = [req(srv, f"/p?i={i}", min_gap_s=0.2, concurrency=1) for i in range(5)]
            await run(requests, cfg)
            return starts(srv)

    times = asyncio.run(scenario())
    assert len(times) == 5 and min(gaps(times)) >= 0.2


def test_a_throttling_answer_raises_the_learned_gap_and_it_never_drops_under_it() -> None:
    t = throttle()
    assert t.min_gap == 0
    t.observe("ok", now=0.0, latency_s=0.001)
    t.observe("throttled", now=0.1, latency_s=0.001, gap_s=0.05, retry_after_s=2.0)
    assert t.min_gap == pytest.approx(0.25)  # one step: doubling 0 and 0.05 gives less
    assert t.delay >= 2.0  # the pause
    for i in range(20):
        t.observe("ok", now=1.0 + i, latency_s=0.001)
    assert t.delay == pytest.approx(
        0.25, abs=1e-3
    )  # back down to the learned gap, not to the latency
    t.observe("throttled", now=30.0, latency_s=0.001, gap_s=0.25)
    assert t.min_gap == pytest.approx(0.5)
    assert t.snapshot()["n_throttled"] == 2 and t.snapshot()["gap_s"] == pytest.approx(0.5)


def test_a_flaky_host_is_paused_and_probed_not_deferred() -> None:
    """A host that fails three times in a row after answering well gets a short pause and a
    probe, and the rest of its pages are fetched (the breaker used to defer them all)."""

    async def scenario() -> tuple[list[FetchResult], Server]:
        answered = {"n": 0}

        async def flaky(request: web.Request) -> web.Response:
            answered["n"] += 1
            if answered["n"] in (3, 4, 5):
                return web.Response(status=500, text="oops")
            return web.Response(text=f"page {request.path_qs}", content_type="text/html")

        async with serve({"/p": flaky}) as srv:
            cfg = FetchSettings(
                host_concurrency=1,
                throttle=ThrottlePolicy(backoff_base_s=0.02, backoff_jitter=0, breaker_retry_s=0.3),
            )
            return await run([req(srv, f"/p?i={i}") for i in range(8)], cfg), srv

    results, srv = asyncio.run(scenario())
    assert [r.http_status for r in results] == [200, 200, 500, 500, 500, 200, 200, 200]
    assert not [r for r in results if r.outcome == "deferred"]
    times = starts(srv)
    assert times[5] - times[4] >= 0.3  # the pause before the probe


def test_an_outage_teaches_no_minute_long_gap() -> None:
    """A host answering 503 for two cycles came out of them with a learned gap of a minute,
    recovered 10 % a cycle (the fifth exploratory run): every 503 after the first came after
    our own back-off, and each probe through the open breaker after its cool-down, and those
    waits were taken for gaps the host had refused. Only an answer to a request sent at our
    own pace teaches the pace."""
    t = throttle()
    for i in range(3):
        t.observe("ok", now=float(i), latency_s=0.01)
    now = 10.0
    t.observe("throttled", now=now, latency_s=0.01, gap_s=0.3)  # at our pace: too fast?
    learned = t.min_gap
    assert learned == pytest.approx(0.6)
    while not t.tripped:  # the outage goes on, each request after a longer back-off
        now += 5.0
        t.observe("throttled", now=now, latency_s=0.01, gap_s=5.0)
    assert t.min_gap < 5.0
    after_backoff = t.min_gap
    for _ in range(4):  # probes after each cool-down, the host still down
        reopens = t.reopens_at()
        assert reopens is not None
        now = reopens + 0.1
        t.started(now)
        t.observe("throttled", now=now, latency_s=0.01, gap_s=60.0)
    assert t.min_gap == after_backoff


def test_a_503_at_a_pace_the_host_served_well_is_a_failure_not_a_word_about_pace() -> None:
    """A flaky backend's 503s say nothing of our pace: taken for throttling, each doubled the
    learned gap, and a host failing 15 % of its requests at random was paced to a minute a
    request and starved (found by an outside held-out web)."""
    t = throttle(backoff_base_s=0.5)
    t.observe("ok", now=0.0, latency_s=0.001, gap_s=0.2)
    taken = t.observe("throttled", now=1.0, latency_s=0.001, gap_s=0.3, http_status=503)
    assert taken == "failure"
    assert (t.min_gap, t.n_throttled, t.n_unpaced_503) == (0.0, 0, 1)
    assert t.delay >= 0.5  # it still backs off, as after any failure
    # twice as fast as the host ever served, or faster: it may mean us
    assert t.observe("throttled", now=2.0, gap_s=0.05, http_status=503) == "throttled"
    assert t.min_gap > 0
    # the host's own word: a Retry-After, or a 429
    assert t.observe("throttled", now=3.0, gap_s=5.0, http_status=503, retry_after_s=1.0) == (
        "throttled"
    )
    assert t.observe("throttled", now=9.0, gap_s=5.0, http_status=429) == "throttled"
    assert t.snapshot()["n_unpaced_503"] == 1


def refusing_every(
    nth: int, refusal: Callable[[], web.Response], pages: int, start_delay_s: float
) -> tuple[list[FetchResult], Throttles]:
    """``pages`` requests at a steady pace (on loopback, latency-driven gaps are a millisecond's
    noise) to a host that answers every ``nth`` request with ``refusal()``, whatever our pace."""

    async def scenario() -> tuple[list[FetchResult], Throttles]:
        answered = {"n": 0}

        async def refusing(request: web.Request) -> web.Response:
            answered["n"] += 1
            if answered["n"] % nth == 0:
                return refusal()
            return web.Response(text=f"page {request.path_qs}", content_type="text/html")

        async with serve({"/p": refusing}) as srv:
            cfg = FetchSettings(
                host_concurrency=1,
                cycle_time_limit_s=30.0,
                throttle=ThrottlePolicy(
                    autothrottle=False,
                    start_delay_s=start_delay_s,
                    backoff_base_s=0.05,
                    backoff_jitter=0,
                ),
            )
            throttles = Throttles(cfg.throttle)
            results = await fetch_all(
                [req(srv, f"/p?i={i}") for i in range(pages)],
                cfg,
                throttles=throttles,
                allow=LOOPBACK,
                fingerprint=fp,
            )
            return results, throttles

    return asyncio.run(scenario())


def test_a_host_failing_a_share_of_requests_at_random_keeps_its_pace() -> None:
    results, throttles = refusing_every(
        5, lambda: web.Response(status=503, text="busy backend"), pages=40, start_delay_s=0.02
    )
    assert all(r.sent for r in results)
    assert [r.http_status for r in results].count(503) == 8
    (health,) = throttles.snapshot()
    assert health["gap_s"] == 0.0  # nothing learned of its pace
    assert health["n_unpaced_503"] == 8


def test_a_host_that_names_its_wait_is_paced_no_slower_than_it_asked() -> None:
    """A host that refuses a share of requests whatever our pace (here every third) with 503
    and Retry-After: 1. Each refusal is waited out and teaches at most the wait it named, or a
    step: doubled at each, and twice the gap the refused request came after, the pace grew
    without bound, and a host with two busy hours a day ended at one fetch a cycle (found by
    an outside held-out web)."""
    results, throttles = refusing_every(
        3,
        lambda: web.Response(status=503, headers={"Retry-After": "1"}, text="busy"),
        pages=6,
        start_delay_s=0.6,
    )
    assert all(r.sent for r in results)
    assert [r.http_status for r in results].count(503) == 2
    (health,) = throttles.snapshot()
    assert health["n_throttled"] == 2 and health["n_pauses"] >= 1
    # the named second, then a step more (doubling, twice the 0.6 s gap: 1.2, then 2.4)
    assert health["gap_s"] <= 1.0 + 0.25 + 0.05, health["gap_s"]
