"""URL normalization: one spelling per page, so that state, dedup and host partitions agree.

Two spellings of the same page would be fetched twice, estimated twice and split the change
history between them; a tracking parameter would make every newsletter link look like a new
page. The normalized URL is the key every table joins on, so the function must be idempotent
(re-normalizing a stored key never moves it) and total (any string either normalizes or raises
:class:`InvalidURL` with a reason a person can act on).

Rules, in order: strip surrounding whitespace; reject anything over 2048 characters; accept only
``http`` and ``https``; require a host; **reject** userinfo (``user:pass@``) rather than silently
dropping it, because credentials must not end up in the warehouse and the page behind them is not
the page without them; lower-case scheme and host; IDN hosts to punycode (UTS #46, the encoding
aiohttp/yarl use when they send the request); compress IPv6 literals; drop a trailing dot on the
host and the default port; drop the fragment; percent-encoding normalization, dot segments and
query sorting by :func:`w3lib.url.canonicalize_url` (a query's ';' and an '=' inside a value
kept as written); remove tracking and session parameters (and
a servlet's ``;jsessionid=`` path parameter); empty path -> ``/``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import SplitResult, unquote_plus, urlsplit, urlunsplit

import idna
import polars as pl
from w3lib.url import canonicalize_url, safe_url_string

__all__ = [
    "MAX_URL_LENGTH",
    "as_discovered",
    "as_discovered_column",
    "RULES_VERSION",
    "TRACKING_PARAMS",
    "InvalidURL",
    "normalize_url",
    "normalize_url_column",
    "request_spelling",
    "url_authority",
    "url_path",
    "url_route",
]

MAX_URL_LENGTH = 2048

#: Raise whenever a rule here changes what a URL normalizes to: cached canonical forms
#: (table url_canonical) made under another version are normalized again.
RULES_VERSION = "3"

#: Query parameters that identify a campaign, a click, a mail recipient or a visit, never the
#: content.
#: Names are matched case-insensitively; an entry ending in ``*`` is a prefix (``utm_*`` is every
#: Google Analytics campaign parameter). ``ref`` is deliberately absent: on code hosts it selects
#: a branch, i.e. different content.
TRACKING_PARAMS: frozenset[str] = frozenset(
    {
        # Google Analytics / Ads, Matomo/Piwik, HubSpot ads campaign families
        "utm_*",
        "pk_*",
        "mtm_*",
        "hsa_*",
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "srsltid",
        "_ga",
        "_gl",
        # click ids of other ad networks
        "fbclid",
        "msclkid",
        "yclid",
        "twclid",
        "ttclid",
        "li_fat_id",
        "epik",
        "rb_clickid",
        "s_cid",
        "_openstat",
        # mail and marketing automation
        "mc_cid",
        "mc_eid",
        "_hsenc",
        "_hsmi",
        "__hstc",
        "__hssc",
        "__hsfp",
        "hsctatracking",
        "mkt_tok",
        "oly_anon_id",
        "oly_enc_id",
        "vero_id",
        "vero_conv",
        "_kx",
        "ml_subscriber",
        "ml_subscriber_hash",
        # social shares
        "igshid",
        "ref_src",
        "ref_url",
        "spm",
        "scm",
        # session identifiers of servers that keep sessions in URLs when no cookie comes back
        # (a crawler's case): Java servlets, PHP, classic ASP, ColdFusion, osCommerce, Zen
        # Cart. Kept, every visit mints another URL of the same page. A server that insists
        # redirects to its spelling, which the fetcher follows within the fetch. (``sid``
        # alone is absent: on some sites it names a story.)
        "jsessionid",
        "phpsessid",
        "aspsessionid*",
        "cfid",
        "cftoken",
        "oscsid",
        "zenid",
    }
)
#: A servlet's session in a path parameter (``/page;jsessionid=...``), the same visit id.
_SESSION_PATH_PARAM = re.compile(r";jsessionid=[^/;?#]*", re.IGNORECASE)


class InvalidURL(ValueError):
    """A string that cannot be a crawlable page address; ``str(exc)`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_ASCII_HOST_CHARS = re.compile(r"^[A-Za-z0-9._-]+$")
_NUMBER = re.compile(r"0x[0-9a-f]*|[0-9]+")
_OCTAL = re.compile(r"0[0-7]+")


class _ParamMatcher:
    """Compiled form of a ``strip_params`` argument (names, ``prefix*`` globs or a regex)."""

    __slots__ = ("_names", "_prefixes", "_pattern")

    def __init__(self, spec: Iterable[str] | re.Pattern[str] | None) -> None:
        self._pattern: re.Pattern[str] | None = None
        self._names: frozenset[str] = frozenset()
        self._prefixes: tuple[str, ...] = ()
        if spec is None:
            return
        if isinstance(spec, re.Pattern):
            self._pattern = spec
            return
        if isinstance(spec, str):
            spec = [spec]
        names = []
        prefixes = []
        for item in spec:
            item = item.lower()
            if item.endswith("*"):
                prefixes.append(item[:-1])
            else:
                names.append(item)
        self._names = frozenset(names)
        self._prefixes = tuple(prefixes)

    def __bool__(self) -> bool:
        return bool(self._pattern or self._names or self._prefixes)

    def matches(self, key: str) -> bool:
        if self._pattern is not None:
            return self._pattern.fullmatch(key) is not None
        key = key.lower()
        return key in self._names or key.startswith(self._prefixes)


_DEFAULT_MATCHER = _ParamMatcher(TRACKING_PARAMS)


def _matcher_for(spec: Iterable[str] | re.Pattern[str] | _ParamMatcher | None) -> _ParamMatcher:
    if isinstance(spec, _ParamMatcher):
        return spec
    if spec is TRACKING_PARAMS:
        return _DEFAULT_MATCHER
    return _ParamMatcher(spec)


def _normalize_host(host: str) -> str:
    """Lower-case, punycode and validate a registered name or IP literal (without brackets)."""
    if not host:
        raise InvalidURL("missing host")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in host):
        raise InvalidURL("control character or space in host")
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except UnicodeError:
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError as exc:
                raise InvalidURL(f"invalid internationalized host name ({exc})") from None
        if host.endswith("."):
            host = host[:-1]
    if not _ASCII_HOST_CHARS.match(host):
        bad = next((ch for ch in host if not _ASCII_HOST_CHARS.match(ch)), "?")
        raise InvalidURL(f"invalid character {bad!r} in host")
    host = host.lower()
    numeric = _numeric_ipv4(host)
    if numeric is not None:
        return numeric
    if len(host) > 253:
        raise InvalidURL("host name longer than 253 characters")
    for label in host.split("."):
        if not label:
            raise InvalidURL("empty label in host name")
        if not _HOST_LABEL.match(label):
            raise InvalidURL(f"invalid host label {label!r}")
    return host


def _numeric_ipv4(host: str) -> str | None:
    """A host whose last label is a number (``2130707721``, ``0x7f.1``, ``127.0.0.1``) is an
    IPv4 address in the WHATWG URL standard's spellings (decimal, ``0x`` hex, ``0`` octal, the
    last part filling the bytes left): its dotted quad, so that every spelling is one host and
    one politeness queue, and the client (which takes only the dotted quad) can reach it.
    None for a registered name; InvalidURL for a number that is no address."""
    parts = host.split(".")
    if not _NUMBER.fullmatch(parts[-1]):
        return None
    if len(parts) > 4:
        raise InvalidURL(f"{host!r} ends in a number but is not an IPv4 address")
    numbers = []
    for part in parts:
        if not _NUMBER.fullmatch(part):
            raise InvalidURL(f"{host!r} ends in a number but is not an IPv4 address")
        if part.startswith("0x"):
            numbers.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not _OCTAL.fullmatch(part):
                raise InvalidURL(f"{part!r} in {host!r} is not an octal number")
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        raise InvalidURL(f"{host!r} is out of the IPv4 range")
    value = last + sum(n << (8 * (3 - i)) for i, n in enumerate(head))
    return str(ipaddress.IPv4Address(value))


def _split_authority(scheme: str, netloc: str) -> tuple[str, int | None]:
    """Return ``(host, port)``; host keeps IPv6 brackets, port is None when default/absent."""
    if "@" in netloc:
        raise InvalidURL("credentials (user:password@) in URL are rejected, not dropped")
    if netloc.startswith("["):
        end = netloc.find("]")
        if end < 0:
            raise InvalidURL("unterminated IPv6 literal in host")
        literal = netloc[1:end]
        rest = netloc[end + 1 :]
        if "%" in literal:
            raise InvalidURL("IPv6 zone identifiers are not supported in URLs")
        try:
            ip = ipaddress.IPv6Address(literal)
        except ValueError:
            raise InvalidURL(f"invalid IPv6 address {literal!r}") from None
        host = f"[{ip.compressed}]"
        if rest and not rest.startswith(":"):
            raise InvalidURL("unexpected characters after IPv6 literal")
        port_text = rest[1:] if rest else ""
    else:
        host_text, sep, port_text = netloc.rpartition(":")
        if not sep:
            host_text, port_text = netloc, ""
        if ":" in host_text:
            raise InvalidURL("IPv6 address must be in brackets")
        host = _normalize_host(host_text)
    port: int | None = None
    if port_text:
        if not port_text.isascii() or not port_text.isdigit():
            raise InvalidURL(f"invalid port {port_text!r}")
        port = int(port_text)
        if not 0 < port <= 65535:
            raise InvalidURL(f"port {port} out of range")
        if port == _DEFAULT_PORTS.get(scheme):
            port = None
    return host, port


def _authority(host: str, port: int | None) -> str:
    return host if port is None else f"{host}:{port}"


def _strip_query(query: str, matcher: _ParamMatcher) -> str:
    if not query or not matcher:
        return query
    kept = []
    for part in query.split("&"):
        key = unquote_plus(part.split("=", 1)[0])
        if not matcher.matches(key):
            kept.append(part)
    return "&".join(kept)


# A query's ';' (a separator to the servers of HTML 4's day, Perl's CGI and many Java apps) and
# an '=' inside a value are what the site wrote: w3lib encodes them as %3B and %3D, and the key is
# what goes on the wire, so `/item?id=1;color=red` was asked for as `id=1%3Bcolor%3Dred`, a 404,
# and the page marked gone (found by an exploratory run). They pass w3lib as private-use
# characters (encoded as below, which no URL holds) and are put back after it.
_KEPT = {";": "\ue000", "=": "\ue001"}
_KEPT_ENCODED = {"%EE%80%80": ";", "%EE%80%81": "="}


def _protect_separators(query: str) -> tuple[str, bool]:
    """``query`` with its ';' and the '=' inside values as private-use characters, and whether
    it had any."""
    if ";" not in query and query.count("=") <= query.count("&") + 1:
        return query, False
    parts = []
    for part in query.split("&"):
        key, sep, value = part.partition("=")
        key = key.replace(";", _KEPT[";"])
        value = value.replace(";", _KEPT[";"]).replace("=", _KEPT["="])
        parts.append(f"{key}{sep}{value}")
    protected = "&".join(parts)
    return protected, protected != query


def _restore_separators(query: str) -> str:
    for encoded, char in _KEPT_ENCODED.items():
        query = query.replace(encoded, char)
    return query


def _split_web_url(url: str) -> tuple[SplitResult, str]:
    """The parts of an http(s) URL with a host, and its lower-cased scheme; InvalidURL naming
    what is missing or wrong otherwise."""
    if not isinstance(url, str):
        raise InvalidURL(f"not a string: {type(url).__name__}")
    url = url.strip()
    if not url:
        raise InvalidURL("empty URL")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidURL(f"URL longer than {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidURL(f"unparseable URL ({exc})") from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidURL("missing scheme (expected http:// or https://)")
    if scheme not in _DEFAULT_PORTS:
        raise InvalidURL(f"unsupported scheme {scheme!r}")
    if not parts.netloc:
        raise InvalidURL("missing host")
    return parts, scheme


def _normalize_once(url: str, matcher: _ParamMatcher) -> tuple[str, str]:
    parts, scheme = _split_web_url(url)
    host, port = _split_authority(scheme, parts.netloc)
    authority = _authority(host, port)
    query, kept = _protect_separators(parts.query)
    rebuilt = urlunsplit((scheme, authority, parts.path, query, ""))
    try:
        canonical = canonicalize_url(rebuilt, keep_fragments=False)
    except (ValueError, UnicodeError) as exc:
        raise InvalidURL(f"cannot canonicalize URL ({exc})") from None
    out = urlsplit(canonical)
    query = _strip_query(_restore_separators(out.query) if kept else out.query, matcher)
    path = out.path
    if ";" in path and matcher.matches("jsessionid"):
        path = _SESSION_PATH_PARAM.sub("", path)
    # canonicalize_url never touches an already-normalized ASCII authority; we keep ours so that a
    # change in w3lib's host handling cannot move a partition key.
    result = urlunsplit((scheme, authority, path or "/", query, ""))
    if len(result) > MAX_URL_LENGTH:
        raise InvalidURL(f"URL longer than {MAX_URL_LENGTH} characters after normalization")
    return result, authority


def _normalize_with_host(
    url: str,
    strip_params: Iterable[str] | re.Pattern[str] | _ParamMatcher | None = TRACKING_PARAMS,
) -> tuple[str, str]:
    matcher = _matcher_for(strip_params)
    try:
        first, authority = _normalize_once(url, matcher)
        # Re-running until a fixed point makes idempotence a guarantee rather than a hope about
        # w3lib's percent-encoding rules on odd inputs.
        second, _ = _normalize_once(first, matcher)
        if second == first:
            return first, authority
        third, _ = _normalize_once(second, matcher)
        if third == second:
            return second, authority
    except InvalidURL:
        raise
    except (ValueError, UnicodeError, TypeError) as exc:
        raise InvalidURL(f"malformed URL ({exc})") from None
    raise InvalidURL("URL does not normalize to a stable form")


def normalize_url(
    url: str, *, strip_params: Iterable[str] | re.Pattern[str] | None = TRACKING_PARAMS
) -> str:
    """The canonical spelling of a page address, or :class:`InvalidURL` saying why not.

    ``strip_params`` lists query parameters to drop (case-insensitive names, ``prefix*`` globs, or
    a compiled regex matched against the whole decoded name); ``None`` keeps every parameter.
    """
    return _normalize_with_host(url, strip_params)[0]


def as_discovered(
    url: str, *, strip_params: Iterable[str] | re.Pattern[str] | None = TRACKING_PARAMS
) -> str:
    """``url`` as the site wrote it, less what never names content: the fragment, and the
    tracking and session parameters (``strip_params``, in the query and a servlet's path
    parameter); its query order and percent-encoding as written. robots.txt rules are written
    against such spellings: a key's sorted query (``/?lang=en&s=drill``) escaped the
    ``Disallow: /?s=`` its site meant for it, while a rule against a tracking parameter
    (``Disallow: /*utm_``) is about a spelling the key never asks for."""
    parts = urlsplit(url.strip())
    matcher = _matcher_for(strip_params)
    path = parts.path
    if ";" in path and matcher.matches("jsessionid"):
        path = _SESSION_PATH_PARAM.sub("", path)
    return urlunsplit(
        (parts.scheme, parts.netloc, path or "/", _strip_query(parts.query, matcher), "")
    )


def as_discovered_column(urls: pl.Series) -> pl.Series:
    """:func:`as_discovered` of each URL of a column (the default tracking and session
    parameters). Only a URL with a query, a path parameter or a fragment can differ, so only
    those are rewritten, one call each; one that does not split stays as it is."""

    def written(url: str) -> str:
        try:
            return as_discovered(url)
        except ValueError:
            return url

    values = urls.cast(pl.String)
    marked = values.str.contains(r"[;?#]").fill_null(False)
    if not marked.any():
        return values
    frame = pl.DataFrame({"url": values, "_marked": marked})
    return frame.select(
        pl.when(pl.col("_marked"))
        .then(pl.col("url").map_elements(written, return_dtype=pl.String, skip_nulls=True))
        .otherwise(pl.col("url"))
        .alias(urls.name)
    ).to_series()


def request_spelling(
    written: str,
    key: str,
    *,
    strip_params: Iterable[str] | re.Pattern[str] | None = TRACKING_PARAMS,
) -> str | None:
    """What to ask a server for when the site never wrote the key: the key's scheme and
    authority with the path and query as ``written`` (:func:`as_discovered`); None when that is
    the key itself or ``written`` does not parse.

    The key is a spelling for joining tables, not always one the server answers:
    ``/index.php?/blog/post`` keys as ``?%2Fblog%2Fpost=``, ``/tag/c%2B%2B`` as ``/tag/c++``
    (``+`` is a space to many path decoders), ``?flag`` as ``?flag=``, and an order-sensitive
    query is sorted. The authority is the key's, so the Host header and TLS name stay in the
    one form the host is keyed, paced and allowed under."""
    try:
        site = urlsplit(as_discovered(written, strip_params=strip_params))
        canonical = urlsplit(key)
        # percent-encoded as it goes on the wire, so that a spelling differing from the key
        # only there (``?q=café``) is the key
        sent = safe_url_string(
            urlunsplit((canonical.scheme, canonical.netloc, site.path or "/", site.query, ""))
        )
    except ValueError:
        return None
    return None if sent == key else sent


def url_authority(url: str) -> str:
    """The host partition key: lower-case ``host[:port]``, default port dropped, IPv6 bracketed.

    Accepts raw or normalized URLs so that the key for a seed line and for its stored normalized
    form can never disagree.
    """
    parts, scheme = _split_web_url(url)
    try:
        return _authority(*_split_authority(scheme, parts.netloc))
    except InvalidURL:
        raise
    except (ValueError, UnicodeError) as exc:
        raise InvalidURL(f"malformed host ({exc})") from None


def url_path(url: pl.Expr) -> pl.Expr:
    """The path of each URL (between its authority and its query or fragment; "" when it has
    none, null when it is no absolute URL): what tells one item of a site from another where
    the query only spells it differently."""
    return url.str.extract(r"^[a-z][a-z0-9+.-]*://[^/?#]*([^?#]*)", 1)


# A path or query that names a sitemap or a feed: sitemap*.xml (.txt, .gz), *.rss, *.atom,
# *.rdf, /feed/, /rss/, /atom/ (WordPress's /feed/atom/ too), /feed.xml, /rss.xml, /atom.xml,
# /index.xml, /feed.json and WordPress's ?feed=rss2.
_LISTING_SHAPE = (
    r"(?i)^[a-z][a-z0-9+.-]*://[^/?#]*(?:"
    r"[^?#]*/(?:feeds?|rss2?|atom)/?"
    r"|[^?#]*/[^/?#]*sitemap[^/?#]*\.(?:xml|txt)(?:\.gz)?"
    r"|[^?#]*\.(?:rss|atom|rdf)"
    r"|[^?#]*/(?:feed|rss2?|atom|index)\.(?:xml|json)"
    r")(?:[?#]|$)|[?&]feed=(?:rss2?|atom|rdf)(?:[&#]|$)"
)


def looks_like_listing(url: pl.Expr) -> pl.Expr:
    """Whether each URL reads as a sitemap or a feed. Only a guess (the fetch tells, by the
    body), but a good one to act on early: the plan fetches such a seed first among the pages
    never fetched, since it lists pages that wait to be found until it is read."""
    return url.str.contains(_LISTING_SHAPE)


def url_route(url: pl.Expr) -> pl.Expr:
    """The first directory of each URL's path ("/deals/" for ".../deals/42" and ".../deals/";
    "/" for a page at the root; null when it is no absolute URL): the part of a site that one
    application or one cache rule usually serves, so that what is learnt of a server's
    behaviour on some of its pages may be scoped to their neighbours."""
    absolute = url.str.contains(r"^[a-z][a-z0-9+.-]*://")
    first = url.str.extract(r"^[a-z][a-z0-9+.-]*://[^/?#]*(/[^/?#]*/)", 1)
    return pl.when(absolute).then(first.fill_null("/"))


def normalize_url_column(
    urls: pl.Series, *, strip_params: Iterable[str] | re.Pattern[str] | None = TRACKING_PARAMS
) -> pl.DataFrame:
    """Normalize a whole column; bad rows become a reason instead of an exception.

    Returns columns ``url`` (normalized or null), ``host`` (authority or null) and ``error``
    (reason or null) in input order. Each distinct string is normalized once (seed files and
    sitemaps repeat URLs a lot); the per-string call is w3lib's, so this is the one per-row loop.
    """
    values = urls.cast(pl.String, strict=False)
    uniques = values.unique().to_list()
    matcher = _matcher_for(strip_params)  # built once for the column, not per URL
    out_url: list[str | None] = []
    out_host: list[str | None] = []
    out_err: list[str | None] = []
    for raw in uniques:
        if raw is None:
            out_url.append(None)
            out_host.append(None)
            out_err.append("empty URL")
            continue
        try:
            norm, host = _normalize_with_host(raw, matcher)
        except InvalidURL as exc:
            out_url.append(None)
            out_host.append(None)
            out_err.append(exc.reason)
        else:
            out_url.append(norm)
            out_host.append(host)
            out_err.append(None)
    lookup = pl.DataFrame(
        {"_raw": uniques, "url": out_url, "host": out_host, "error": out_err},
        schema={"_raw": pl.String, "url": pl.String, "host": pl.String, "error": pl.String},
    )
    frame = pl.DataFrame({"_raw": values})
    return frame.join(
        lookup, on="_raw", how="left", nulls_equal=True, maintain_order="left"
    ).select("url", "host", "error")
