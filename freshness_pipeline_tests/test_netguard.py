"""The allow-list must hold after DNS and for IP literals, without ever touching a real network."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from freshness_pipeline.web.netguard import (
    ALLOW_ENV,
    BlockedAddressError,
    GuardedConnector,
    GuardedResolver,
    allowed_networks,
    blocked_reason,
    check_url_scheme,
    find_blocked_error,
    is_blocked_error,
    refusal_lifted,
)

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)


class StubResolver(AbstractResolver):
    """Answers from a table; never does a real lookup."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.calls.append(host)
        out: list[ResolveResult] = []
        for ip in self.table[host]:
            fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
            out.append(
                ResolveResult(hostname=host, host=ip, port=port, family=fam, proto=0, flags=0)
            )
        return out

    async def close(self) -> None:
        return None


def install_tripwire(loop: asyncio.AbstractEventLoop) -> list[object]:
    """Fail loudly if anything tries to connect outside loopback."""
    attempts: list[object] = []
    real = loop.sock_connect

    async def guarded(sock: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else str(address)
        if not (str(host).startswith("127.") or host == "::1"):
            attempts.append(address)
            raise AssertionError(f"test tried to connect to {address}")
        return await real(sock, address)

    loop.sock_connect = guarded  # type: ignore[method-assign]
    return attempts


# ------------------------------------------------------------------ allowed_networks


def test_allowed_networks_parses_and_names_bad_entries() -> None:
    assert allowed_networks({}) == ()
    nets = allowed_networks({ALLOW_ENV: " 127.0.0.0/8, ::1/128 ,,10.1.2.3"})
    assert [str(n) for n in nets] == ["127.0.0.0/8", "::1/128", "10.1.2.3/32"]
    assert allowed_networks({ALLOW_ENV: "10.0.0.1/8"})[0] == ipaddress.ip_network("10.0.0.0/8")
    with pytest.raises(ValueError, match="not-a-net"):
        allowed_networks({ALLOW_ENV: "127.0.0.0/8,not-a-net"})


def test_allowed_networks_reads_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_ENV, "127.0.0.0/8")
    assert allowed_networks() == LOOPBACK
    monkeypatch.delenv(ALLOW_ENV)
    assert allowed_networks() == ()


# ------------------------------------------------------------------ blocked_reason


@pytest.mark.parametrize(
    ("ip", "word"),
    [
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("127.0.0.1", "loopback"),
        ("169.254.169.254", "metadata"),
        ("169.254.1.1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", ""),
        ("255.255.255.255", ""),
        ("100.64.0.1", "carrier-grade"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("[fe80::1%eth0]", "link-local"),
        ("fd00::1", "unique local"),
        ("fd00:ec2::254", "metadata"),
        ("ff02::1", "multicast"),
        ("::ffff:10.0.0.1", "10.0.0.1"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::a00:1", "private"),
        ("2002:a00:1::", "private"),  # 6to4 wrapping 10.0.0.1
        ("192.0.2.1", ""),  # documentation range: not globally routable
        ("not-an-ip", "not an IP"),
    ],
)
def test_blocked_reason_blocks_non_public(ip: str, word: str) -> None:
    reason = blocked_reason(ip, ())
    assert reason is not None
    assert word in reason


@pytest.mark.parametrize("ip", ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"])
def test_blocked_reason_passes_public(ip: str) -> None:
    assert blocked_reason(ip, ()) is None


def test_allow_list_opens_only_its_networks() -> None:
    assert blocked_reason("127.0.0.1", LOOPBACK) is None
    assert blocked_reason("127.8.9.10", LOOPBACK) is None
    assert blocked_reason("::ffff:127.0.0.1", LOOPBACK) is None
    assert blocked_reason("::1", LOOPBACK) is not None  # IPv6 loopback is another network
    assert blocked_reason("10.0.0.1", LOOPBACK) is not None
    assert blocked_reason("169.254.169.254", LOOPBACK) is not None
    metadata = (ipaddress.ip_network("169.254.169.254/32"),)
    assert blocked_reason("169.254.169.254", metadata) is None


def test_check_url_scheme() -> None:
    check_url_scheme("http://example.com/")
    check_url_scheme("HTTPS://example.com/a?b")
    for bad in [
        "file:///etc/passwd",
        "ftp://example.com/",
        "javascript:alert(1)",
        "example.com",
        "http:///nohost",
        "gopher://x/",
    ]:
        with pytest.raises(ValueError):
            check_url_scheme(bad)


# ------------------------------------------------------------------ resolver and connector


def test_guarded_resolver_drops_blocked_addresses() -> None:
    async def scenario() -> None:
        stub = StubResolver(
            {
                "mixed.test": ["10.0.0.1", "93.184.216.34"],
                "inside.test": ["10.0.0.1", "169.254.169.254"],
                "meta.test": ["169.254.169.254"],
                "local.test": ["127.0.0.1"],
            }
        )
        guard = GuardedResolver(stub, allow=())
        kept = await guard.resolve("mixed.test", 80)
        assert [r["host"] for r in kept] == ["93.184.216.34"]
        with pytest.raises(BlockedAddressError, match="inside.test") as info:
            await guard.resolve("inside.test", 80)
        assert "private" in str(info.value) and "metadata" in str(info.value)
        assert isinstance(info.value, OSError)
        with pytest.raises(OSError, match=ALLOW_ENV):
            await guard.resolve("meta.test", 80)
        opened = GuardedResolver(stub, allow=LOOPBACK)
        assert [r["host"] for r in await opened.resolve("local.test", 80)] == ["127.0.0.1"]
        await guard.close()

    asyncio.run(scenario())


def test_connector_blocks_names_and_literals_without_connecting() -> None:
    async def scenario() -> None:
        attempts = install_tripwire(asyncio.get_running_loop())
        stub = StubResolver({"intranet.test": ["10.0.0.1"], "metadata.test": ["169.254.169.254"]})
        connector = GuardedConnector(allow=LOOPBACK, resolver=stub)
        refusals = {}
        async with aiohttp.ClientSession(connector=connector) as session:
            for url in [
                "http://intranet.test/",
                "http://metadata.test/latest/meta-data/",
                "http://10.0.0.1/",
                "http://169.254.169.254/latest/meta-data/",
                "http://[::ffff:10.0.0.1]/",
                "http://[fd00::1]:8080/",
            ]:
                with pytest.raises(aiohttp.ClientConnectorError) as info:
                    async with session.get(url):
                        pass
                assert is_blocked_error(info.value), url
                refusals[url] = str(find_blocked_error(info.value))
        assert attempts == []
        assert stub.calls == ["intranet.test", "metadata.test"]  # literals never hit DNS
        # what a plan made without connecting can tell once the allow-list was opened
        ten = allowed_networks({ALLOW_ENV: "10.0.0.0/8"})
        lifted = {url for url, message in refusals.items() if refusal_lifted(message, ten)}
        assert lifted == {"http://intranet.test/", "http://10.0.0.1/", "http://[::ffff:10.0.0.1]/"}
        assert not any(refusal_lifted(m, LOOPBACK) for m in refusals.values())
        assert refusal_lifted(
            refusals["http://[fd00::1]:8080/"], allowed_networks({ALLOW_ENV: "fd00::/8"})
        )
        assert not refusal_lifted("connection refused", ten)  # names no address

    asyncio.run(scenario())


def test_connector_allows_loopback_when_listed() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def scenario() -> None:
        app = web.Application()
        app.router.add_get("/", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        try:
            stub = StubResolver({"loop.test": ["127.0.0.1"]})
            async with aiohttp.ClientSession(
                connector=GuardedConnector(allow=LOOPBACK, resolver=stub)
            ) as session:
                async with session.get(f"http://127.0.0.1:{port}/") as resp:
                    assert await resp.text() == "ok"
                async with session.get(f"http://loop.test:{port}/") as resp:
                    assert await resp.text() == "ok"
            # The same server is refused when loopback is not on the list.
            async with aiohttp.ClientSession(
                connector=GuardedConnector(allow=(), resolver=stub)
            ) as session:
                with pytest.raises(aiohttp.ClientConnectorError) as info:
                    async with session.get(f"http://127.0.0.1:{port}/"):
                        pass
                assert is_blocked_error(info.value)
        finally:
            await runner.cleanup()

    asyncio.run(scenario())


def test_a_host_written_as_an_address_or_named_localhost_is_judged_without_resolving() -> None:
    """What a plan and a redirect's target can be told without connecting: IP literals in any
    spelling the normalizer writes, and localhost, which RFC 6761 keeps for loopback; any
    other name waits for its resolution."""
    from freshness_pipeline.web.netguard import literal_refusal

    none = allowed_networks({})
    loopback = allowed_networks({"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"})
    assert "loopback" in (literal_refusal("127.0.0.1:8080", none) or "")
    assert "embeds 127.0.0.1" in (literal_refusal("[::ffff:7f00:1]", none) or "")
    for name in ("localhost", "localhost:3000", "api.localhost"):
        assert "is loopback" in (literal_refusal(name, none) or ""), name
        assert literal_refusal(name, loopback) is None, name
    assert literal_refusal("example.com", none) is None
    assert literal_refusal("localhost.example.com", none) is None
