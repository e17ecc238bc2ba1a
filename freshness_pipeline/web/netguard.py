"""Network allow-list: keep the crawler off private, loopback, link-local and metadata addresses.

A crawler fetches URLs that strangers wrote (seed lists, sitemaps, redirects), so any of them may
point at the machine's own services or a cloud metadata endpoint. Checking the URL text is not
enough: a public-looking name can resolve to 10.0.0.1, and a redirect can lead anywhere. The
check therefore runs *after* DNS resolution, on every connection aiohttp opens, by wrapping the
resolver (names) and the connector (IP literals, which aiohttp never sends to the resolver).

Loopback and private networks are opened explicitly with ``FRESHNESS_ALLOW_NETWORKS`` (the demo,
the tests and harnesses on loopback set ``127.0.0.0/8``).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

__all__ = [
    "ALLOW_ENV",
    "BLOCKED_PREFIX",
    "BlockedAddressError",
    "GuardedConnector",
    "GuardedResolver",
    "IPNetwork",
    "allowed_networks",
    "blocked_reason",
    "check_url_scheme",
    "find_blocked_error",
    "is_blocked_error",
    "literal_refusal",
    "refusal_lifted",
]

ALLOW_ENV = "FRESHNESS_ALLOW_NETWORKS"
#: how a fetch the allow-list refused begins its error (fetch_results, robots, sitemap problems)
BLOCKED_PREFIX = "blocked: "

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_IPV4_COMPAT = ipaddress.ip_network("::/96")
_LOCALHOST = "127.0.0.1"
_METADATA = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
    ipaddress.ip_address("fd00:ec2::254"),  # AWS IMDS over IPv6
}


class BlockedAddressError(OSError):
    """Every address of a host is outside the allow-list.

    An ``OSError`` because that is what aiohttp expects from a resolver; it surfaces wrapped in a
    ``ClientConnectorError`` (use :func:`is_blocked_error` to recognise it).
    """


def allowed_networks(env: Mapping[str, str] | None = None) -> tuple[IPNetwork, ...]:
    """Networks opened by ``FRESHNESS_ALLOW_NETWORKS`` (comma-separated CIDRs or bare IPs).

    A typo must fail loudly rather than silently leave the guard closed (or open), so a bad entry
    raises ``ValueError`` naming it.
    """
    source = os.environ if env is None else env
    raw = source.get(ALLOW_ENV, "") or ""
    networks: list[IPNetwork] = []
    for entry in raw.split(","):
        entry = entry.strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError as exc:
            raise ValueError(f"{ALLOW_ENV}: bad network entry {entry!r}: {exc}") from exc
    return tuple(networks)


def _parse_ip(ip: str) -> IPAddress:
    text = ip.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    text = text.split("%", 1)[0]  # IPv6 zone id ("fe80::1%eth0")
    return ipaddress.ip_address(text)


def _embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, if the stack may route it there."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr.teredo is not None:
        return addr.teredo[1]
    if addr in _NAT64 or addr in _NAT64_LOCAL or (addr in _IPV4_COMPAT and int(addr) > 1):
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return None


def _reason(addr: IPAddress) -> str | None:
    if addr in _METADATA:
        return "cloud metadata address"
    if addr.is_unspecified:
        return "unspecified address"
    if addr.is_loopback:
        return "loopback address"
    if addr.is_link_local:
        return "link-local address"
    if addr.is_multicast:
        return "multicast address"
    if isinstance(addr, ipaddress.IPv4Address) and addr in _CGNAT:
        return "carrier-grade NAT address (100.64.0.0/10)"
    if isinstance(addr, ipaddress.IPv6Address) and addr.is_site_local:
        return "site-local address"
    if addr.is_private:
        if isinstance(addr, ipaddress.IPv6Address) and addr in ipaddress.ip_network("fc00::/7"):
            return "unique local address (fc00::/7)"
        return "private address"
    if addr.is_reserved:
        return "reserved address"
    if not addr.is_global:
        return "not a globally routable address"
    return None


def blocked_reason(ip: str, allow: Iterable[IPNetwork] | None = ()) -> str | None:
    """Why a connection to ``ip`` must not be made, or ``None`` when it may.

    IPv6 forms that carry an IPv4 address (mapped, 6to4, Teredo, NAT64, compatible) are judged
    by that IPv4 address too, since they can reach it. An address inside an allowed network is
    always fine, whatever its kind.
    """
    try:
        addr = _parse_ip(ip)
    except ValueError:
        return f"{ip!r} is not an IP address"
    nets = tuple(allow or ())
    candidates: list[IPAddress] = [addr]
    if isinstance(addr, ipaddress.IPv6Address):
        inner = _embedded_ipv4(addr)
        if inner is not None:
            # Pure translation forms mean only what their IPv4 means (their own range is
            # "reserved", which says nothing); 6to4/Teredo are judged on both.
            translated = addr.ipv4_mapped is not None or addr in _NAT64 or addr in _IPV4_COMPAT
            candidates = [inner] if translated else [inner, addr]
    if any(cand in net for cand in candidates for net in nets if cand.version == net.version):
        return None
    for cand in candidates:
        why = _reason(cand)
        if why is not None:
            if cand is not addr:
                return f"{addr} embeds {cand}: {why}"
            return f"{addr} is a {why}"
    return None


def check_url_scheme(url: str) -> None:
    """Refuse anything but http(s) with a host: no file:, ftp:, data: or scheme-less surprises."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"malformed URL {url!r}: {exc}") from exc
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError(
            f"only http and https URLs are fetched, not {parts.scheme or 'no scheme'!r}"
        )
    if not parts.hostname:
        raise ValueError(f"URL {url!r} has no host")


def find_blocked_error(exc: BaseException | None) -> BlockedAddressError | None:
    """The :class:`BlockedAddressError` behind ``exc``, which aiohttp wraps one or two deep."""
    pending = [exc]
    seen: set[int] = set()
    while pending:
        cur = pending.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, BlockedAddressError):
            return cur
        inner = getattr(cur, "os_error", None)
        if isinstance(inner, BaseException):
            pending.append(inner)
        pending.extend((cur.__cause__, cur.__context__))
    return None


def is_blocked_error(exc: BaseException | None) -> bool:
    """True if ``exc`` is, or wraps, a refusal by the network allow-list."""
    return find_blocked_error(exc) is not None


#: an address as the refusals below name it: "<address> is a ..." or "<address> embeds ..."
_REFUSED_ADDRESS = re.compile(r"([0-9A-Fa-f:.]+) (?:is a|embeds) ")


def refusal_lifted(message: str, allow: Iterable[IPNetwork]) -> bool:
    """Whether ``allow`` now admits one of the addresses a refusal (:class:`BlockedAddressError`'s
    message) named: what a plan made without connecting can know of a host the allow-list
    refused before. False when the message names no address."""
    for found in _REFUSED_ADDRESS.findall(message):
        try:
            _parse_ip(found)
        except ValueError:
            continue
        if blocked_reason(found, allow) is None:
            return True
    return False


def literal_refusal(host_key: str, allow: Iterable[IPNetwork]) -> str | None:
    """Why the allow-list refuses a host written as an IP address (``host[:port]``, an IPv6
    one bracketed) or named ``localhost`` (which RFC 6761 reserves for loopback), or None:
    allowed, or another name, which only resolving could judge. What a plan made without
    connecting (a dry run before any robots.txt request) can know of a host, and a redirect's
    target before it becomes a URL of the crawl."""
    try:
        address = urlsplit(f"http://{host_key.strip()}").hostname or ""
    except ValueError:
        return None
    if address == "localhost" or address.endswith(".localhost"):
        why = blocked_reason(_LOCALHOST, allow)
        return None if why is None else f"{address} is loopback ({why})"
    try:
        _parse_ip(address)
    except ValueError:
        return None
    return blocked_reason(address, allow)


def _blocked_message(host: str, reasons: list[str]) -> str:
    detail = "; ".join(dict.fromkeys(reasons)) or "no addresses"
    return (
        f"{host}: every address is blocked by the network allow-list ({detail}); "
        f"set {ALLOW_ENV} to allow it"
    )


class GuardedResolver(AbstractResolver):
    """A resolver that drops addresses outside the allow-list after real resolution.

    Wrapping the resolver (instead of checking URLs) is what catches names that resolve to
    private addresses and redirect targets alike: every connection starts with a lookup.
    """

    def __init__(
        self,
        resolver: AbstractResolver | None = None,
        *,
        allow: Iterable[IPNetwork] | None = None,
    ) -> None:
        self._inner = resolver
        self._allow: tuple[IPNetwork, ...] = allowed_networks() if allow is None else tuple(allow)

    @property
    def allow(self) -> tuple[IPNetwork, ...]:
        return self._allow

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if self._inner is None:
            # Created lazily: ThreadedResolver binds to the running loop at construction.
            self._inner = aiohttp.ThreadedResolver()
        results = await self._inner.resolve(host, port, family)
        kept: list[ResolveResult] = []
        reasons: list[str] = []
        for res in results:
            why = blocked_reason(res["host"], self._allow)
            if why is None:
                kept.append(res)
            else:
                reasons.append(why)
        if not kept:
            raise BlockedAddressError(_blocked_message(host, reasons))
        return kept

    async def close(self) -> None:
        if self._inner is not None:
            await self._inner.close()


class GuardedConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` whose every connection passes the allow-list.

    aiohttp short-circuits IP-literal hosts (``http://10.0.0.1/``) past the resolver, so the
    connector checks those itself, and re-checks whatever the resolver (or its DNS cache)
    returns, in case a caller swapped the resolver.
    """

    def __init__(
        self,
        *,
        allow: Iterable[IPNetwork] | None = None,
        resolver: AbstractResolver | None = None,
        **kwargs: Any,
    ) -> None:
        self.allow: tuple[IPNetwork, ...] = allowed_networks() if allow is None else tuple(allow)
        guarded = resolver if isinstance(resolver, GuardedResolver) else None
        if guarded is None:
            guarded = GuardedResolver(resolver, allow=self.allow)
        super().__init__(resolver=guarded, **kwargs)

    async def _resolve_host(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        try:
            _parse_ip(host)
            literal = True
        except ValueError:
            literal = False
        if literal:
            why = blocked_reason(host, self.allow)
            if why is not None:
                raise BlockedAddressError(_blocked_message(host, [why]))
        results = await super()._resolve_host(host, port, *args, **kwargs)
        kept = [r for r in results if blocked_reason(r["host"], self.allow) is None]
        if not kept:
            reasons = [blocked_reason(r["host"], self.allow) or "" for r in results]
            raise BlockedAddressError(_blocked_message(host, reasons))
        return kept
