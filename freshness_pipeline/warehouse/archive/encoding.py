"""Turning one HTTP exchange into WARC 1.1 records, each its own gzip member.

This module decides which record type an exchange becomes and what the stored HTTP headers
say, and serializes and compresses each record separately (gzip per record is what lets a
reader seek to an offset and read one record).

The records are serialized here rather than with warcio's writer because the fetch stage
calls this on its event loop for every request, most of them 304s: warcio's record builder
spends its time in generic header handling (case-insensitive lookups and rewrites, digest
passes, BytesIO plumbing) and always gzips at level 9, which on a 304 adds a large share on top
of writing the two short records directly. A WARC record is a short, fixed layout
(version line, named fields, block, two CRLFs), and every record written here is read back
by warcio in the tests (``warcio check`` verifies both digests, ``warcio index`` the
framing) and replayed by pywb; warcio remains the reader. HTTP headers are stored as
received: a header read as bytes is written back as the same bytes (ISO-8859-1 round trip),
where warcio's writer would percent-encode the non-ASCII ones.

The members are deflated with ISA-L (``isal_zlib``) rather than zlib. Every record must be its
own member, so each pays a deflate stream's fixed cost (set-up, a Huffman table per block), and
most records are a 304's few hundred bytes, where zlib's fixed cost was more than compressing
them. ISA-L's fixed cost is well below zlib's, and on bodies its cost per byte is a fraction of
zlib's fast matcher's, for about the same output size. zlib-ng, the other drop-in, sets up a
larger state per stream and costs more than zlib on records this small. The members are
ordinary gzip: readers (warcio, pywb, gzip, zcat and this package's own) decompress them with
zlib, and what a member holds does not depend on the compressor.
"""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from collections.abc import Iterable, Mapping
from operator import itemgetter
from typing import NamedTuple
from urllib.parse import urlsplit

from isal import isal_zlib

from freshness_pipeline.warehouse.archive.records import (
    FETCH_KIND_FIELD,
    PROFILE_IDENTICAL_PAYLOAD,
    PROFILE_SERVER_NOT_MODIFIED,
    ArchivedOriginal,
    FetchKind,
    HttpExchange,
    warc_date,
)

__all__ = [
    "DEFAULT_COMPRESS_LEVEL",
    "ORIG_HEADER_PREFIX",
    "EncodedExchange",
    "RecordEncoder",
    "payload_digest",
    "stored_response_headers",
]

#: Prefix under which a stored response keeps a header whose original value no longer
#: describes the stored body (Transfer-Encoding the client undid, a Content-Encoding the caller
#: decoded, a Content-Length that the stored body no longer has).
ORIG_HEADER_PREFIX = "X-Freshness-Orig-"
WARC_VERSION = "WARC/1.1"
_RESPONSE_TYPE = "application/http; msgtype=response"
_REQUEST_TYPE = "application/http; msgtype=request"
_END = b"\r\n\r\n"
#: ISA-L's level for every record (it has 0-3). Level 0 uses fixed Huffman codes: cheapest,
#: but much larger output on short records. Levels 1 and 2 cost the same on records of a few
#: kilobytes and level 2's output is smaller on whole pages, about zlib level 2's size; level 3
#: costs more on every record. The fetch stage compresses every answer it gets on its event loop.
DEFAULT_COMPRESS_LEVEL = 2
_MAX_LEVEL = 3
#: gzip container, 32 KiB window: ISA-L's memory does not depend on the window, so a smaller one
#: for a small record saves nothing (and the output is the same).
_GZIP_WBITS = 16 + 15
_first = itemgetter(0)


# A SHA-1 is 160 bits: four 40-bit groups, each four 10-bit pairs of base32 characters from
# this table. base64.b32encode is written in Python and cost more than the digest it encodes.
_B32_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = tuple(a + b for a in _B32_ALPHABET for b in _B32_ALPHABET)


def _b32(digest: bytes) -> str:
    if len(digest) != 20:
        return "sha1:" + base64.b32encode(digest).decode("ascii")
    # 40-bit groups stay machine-sized integers, which a 160-bit one shifted sixteen times
    # did not
    p, n = _B32_PAIRS, int.from_bytes
    a, b, c, d = n(digest[:5]), n(digest[5:10]), n(digest[10:15]), n(digest[15:])
    return (
        f"sha1:{p[a >> 30]}{p[(a >> 20) & 1023]}{p[(a >> 10) & 1023]}{p[a & 1023]}"
        f"{p[b >> 30]}{p[(b >> 20) & 1023]}{p[(b >> 10) & 1023]}{p[b & 1023]}"
        f"{p[c >> 30]}{p[(c >> 20) & 1023]}{p[(c >> 10) & 1023]}{p[c & 1023]}"
        f"{p[d >> 30]}{p[(d >> 20) & 1023]}{p[(d >> 10) & 1023]}{p[d & 1023]}"
    )


def payload_digest(body: bytes) -> str:
    """``sha1:BASE32`` of the payload, exactly as WARC-Payload-Digest writes it."""
    global _LAST_DIGEST
    last = _LAST_DIGEST
    if body is last[0]:
        return last[1]
    digest = _b32(hashlib.sha1(body).digest())
    if type(body) is bytes and len(body) <= _MEMO_MAX_BYTES:
        _LAST_DIGEST = (body, digest)
    return digest


# The last body digested and its digest: the fetcher digests a refetched body to compare it
# with the archived original's, and the archive then digests the same bytes object again for
# the record. Only an immutable bytes object, and the very same object (``is``, held here so
# its identity cannot be reused), is answered from it; a small body, so that holding it
# keeps little memory alive.
_LAST_DIGEST: tuple[object, str] = (None, "")
_MEMO_MAX_BYTES = 1 << 20


def stored_response_headers(
    headers: tuple[tuple[str, str], ...],
    *,
    body_length: int | None,
    body_decoded: bool,
) -> list[tuple[str, str]]:
    """The response headers as stored, consistent with the stored body.

    The client always undoes Transfer-Encoding (the stored body has no chunk framing), and the
    caller may have undone Content-Encoding; a header that no longer holds is renamed with
    ORIG_HEADER_PREFIX rather than dropped, so nothing that was received is lost, and
    Content-Length then says the stored length. ``body_length`` None (a 304) leaves lengths alone.
    """
    # Most answers hold none of the headers rewritten below (a 304 never has a length to
    # check): one search of the names, lower-cased together, tells so. A name only containing
    # one of them (X-Transfer-Encoding) goes the long way, which compares whole names.
    names = "\n".join(map(_first, headers)).lower()
    if (
        "transfer-encoding" not in names
        and not (body_decoded and "content-encoding" in names)
        and (body_length is None or "content-length" not in names)
    ):
        return list(headers)
    return _rewritten_headers(headers, body_length=body_length, body_decoded=body_decoded)


def _rewritten_headers(
    headers: tuple[tuple[str, str], ...],
    *,
    body_length: int | None,
    body_decoded: bool,
) -> list[tuple[str, str]]:
    """:func:`stored_response_headers` header by header (what it gives for every input)."""
    stored: list[tuple[str, str]] = []
    rewritten = False
    lengths: list[str] = []
    for name, value in headers:
        lower = name.lower()
        if lower == "transfer-encoding" or (lower == "content-encoding" and body_decoded):
            stored.append((ORIG_HEADER_PREFIX + name, value))
            rewritten = True
        elif lower == "content-length" and body_length is not None:
            lengths.append(value)
            if value.strip() == str(body_length):
                stored.append((name, value))
            else:
                stored.append((ORIG_HEADER_PREFIX + name, value))
                rewritten = True
        else:
            stored.append((name, value))
    if body_length is not None and (rewritten or len(lengths) > 1):
        if len(lengths) > 1:  # duplicates: keep none as the stored length, all as originals
            stored = [
                (ORIG_HEADER_PREFIX + n, v) if n.lower() == "content-length" else (n, v)
                for n, v in stored
            ]
        stored.append(("Content-Length", str(body_length)))
    return stored


def request_target(url: str) -> str:
    """The request line's target of ``url``: path and query, as ``urlsplit`` reads them."""
    start = 7 if url.startswith("http://") else 8 if url.startswith("https://") else 0
    if not start or "#" in url or "[" in url:
        parts = urlsplit(url)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        return target
    # An http(s) URL without a fragment or an IPv6 literal (which urlsplit checks): the
    # authority ends at the first "/" or "?", the query at the end.
    slash, mark = url.find("/", start), url.find("?", start)
    if slash < 0 or 0 <= mark < slash:
        path, query = "/", url[mark + 1 :] if mark >= 0 else ""
    elif mark < 0:
        path, query = url[slash:], ""
    else:
        path, query = url[slash:mark], url[mark + 1 :]
    return f"{path}?{query}" if query else path


def http_head(first_line: str, headers: Iterable[tuple[str, str]]) -> bytes:
    """An HTTP message head: first line, header lines, blank line; bytes as received.

    Header text decoded from bytes as ISO-8859-1 encodes back to the same bytes; a str value
    outside ISO-8859-1 (only possible from a caller that built it) is written as UTF-8.
    """
    # ": ".join of each (name, value) pair: the lines are made in C, not in a loop of frames
    text = "\r\n".join((first_line, *map(": ".join, headers))) + "\r\n\r\n"
    try:
        return text.encode("iso-8859-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


class _RandomPool(threading.local):
    """Random bytes drawn from the OS a few thousand at a time, per thread, as hex: a system
    call for each of an exchange's two record ids cost more than formatting them."""

    def __init__(self) -> None:
        self.hex = ""
        self.at = 0


_POOL = _RandomPool()
_POOL_BYTES = 4096


def _new_pool() -> None:
    # a forked child must not hand out the ids its parent holds
    global _POOL
    _POOL = _RandomPool()


os.register_at_fork(after_in_child=_new_pool)


# a hex digit -> the digit whose top two bits are the variant's (10) and low two bits its own
_VARIANT = {f"{n:x}": "89ab"[n & 3] for n in range(16)}


def new_record_id() -> str:
    """``<urn:uuid:...>`` of a random (version 4) UUID, as ``uuid.uuid4()`` makes it (16 bytes
    of ``os.urandom``, version and variant bits set), formatted without building a UUID
    object: two of these go into every exchange."""
    pool = _POOL
    at = pool.at
    if at + 32 > len(pool.hex):
        pool.hex, at = os.urandom(_POOL_BYTES).hex(), 0
    pool.at = at + 32
    h = pool.hex[at : at + 32]
    # byte 6's high nibble is the version (4); byte 8's top two bits the variant (10)
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}>"


class EncodedExchange(NamedTuple):
    """The gzip members of one exchange, ready to append: the response or revisit, then the request."""

    main: bytes
    request: bytes
    record_type: str
    record_id: str
    profile: str | None
    payload_digest: str | None
    date: str
    warcinfo_id: str


class RecordEncoder:
    """Builds WARC records as gzip members. Holds no state but its level: safe from any thread.

    The default level is DEFAULT_COMPRESS_LEVEL (see there for why). Every record is one
    member, compressed on its own, so a reader can start at any record's offset.
    """

    def __init__(self, compress_level: int = DEFAULT_COMPRESS_LEVEL) -> None:
        if not 0 <= compress_level <= _MAX_LEVEL:
            raise ValueError(f"compress_level must be 0-{_MAX_LEVEL}, got {compress_level!r}")
        self.compress_level = compress_level

    # -- low level ---------------------------------------------------------------------------

    def _block_record(self, fields: str, content_type: str, head: bytes, payload: bytes) -> bytes:
        """A record whose WARC head is ``fields`` (the version line and every field line before
        the digest, each ending in CRLF) and whose block is ``head`` + ``payload``."""
        block_digest = hashlib.sha1(head)
        if payload:
            block_digest.update(payload)
        warc_head = (
            f"{fields}WARC-Block-Digest: {_b32(block_digest.digest())}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(head) + len(payload)}\r\n\r\n"
        ).encode()
        # one call, one gzip member (header, deflate stream, CRC-32 and size); it releases the
        # GIL while it deflates, so threads sharing a writer compress in parallel
        return isal_zlib.compress(
            b"".join((warc_head, head, payload, _END)), self.compress_level, _GZIP_WBITS
        )

    def record(
        self,
        fields: list[tuple[str, str]],
        content_type: str,
        head: bytes,
        payload: bytes = b"",
        *,
        headers_only: bool = False,
    ) -> bytes:
        """A whole record as a gzip member: WARC fields, then ``head`` + ``payload`` as the
        block (just ``head`` for a revisit, whose payload stays in the original)."""
        lines = "".join(f"{name}: {value}\r\n" for name, value in fields)
        return self._block_record(
            f"{WARC_VERSION}\r\n{lines}", content_type, head, b"" if headers_only else payload
        )

    # -- records -----------------------------------------------------------------------------

    def warcinfo(self, filename: str, date: str, info: Mapping[str, str]) -> tuple[bytes, str]:
        """The warcinfo member that opens a file, and its record id."""
        record_id = new_record_id()
        block = "".join(f"{name}: {value}\r\n" for name, value in info.items() if value).encode()
        fields = [
            ("WARC-Type", "warcinfo"),
            ("WARC-Record-ID", record_id),
            ("WARC-Filename", filename),
            ("WARC-Date", date),
        ]
        return self.record(fields, "application/warc-fields", block), record_id

    def exchange(
        self,
        exchange: HttpExchange,
        *,
        date: str,
        kind: FetchKind,
        warcinfo_id: str,
        previous: ArchivedOriginal | None,
    ) -> EncodedExchange:
        """The records of one exchange: a response, or a revisit when the body need not be stored.

        A 304 becomes a server-not-modified revisit; a complete 200 whose payload digest equals
        ``previous``'s an identical-payload-digest revisit; anything else a response with the
        body. The request record always follows, WARC-Concurrent-To the first.

        The WARC heads are formatted in one go, field by field in a fixed order: this runs for
        every request the fetcher sends, most of them 304s whose records are a few hundred
        bytes, where assembling lists of fields cost more than compressing them.
        """
        record_id = new_record_id()
        url = exchange.url
        ip = f"WARC-IP-Address: {exchange.ip_address}\r\n" if exchange.ip_address else ""
        common = (
            f"WARC-Record-ID: {record_id}\r\nWARC-Date: {date}\r\nWARC-Target-URI: {url}\r\n"
            f"WARC-Warcinfo-ID: {warcinfo_id}\r\n{ip}{FETCH_KIND_FIELD}: {kind}\r\n"
        )
        status_line = f"HTTP/{exchange.http_version} {exchange.status} {exchange.reason}"
        body = exchange.body if isinstance(exchange.body, bytes) else bytes(exchange.body)
        profile: str | None = None
        digest: str | None
        if exchange.status == 304:
            profile = PROFILE_SERVER_NOT_MODIFIED
            digest = previous.payload_digest if previous is not None else None
            head = http_head(
                status_line,
                stored_response_headers(
                    exchange.response_pairs, body_length=None, body_decoded=False
                ),
            )
            main = self._revisit(common, head, profile, digest, previous, url)
        else:
            digest = payload_digest(body)
            head = http_head(
                status_line,
                stored_response_headers(
                    exchange.response_pairs,
                    body_length=len(body),
                    body_decoded=exchange.body_decoded,
                ),
            )
            if (
                exchange.status == 200
                and not exchange.truncated
                and previous is not None
                and previous.payload_digest == digest
            ):
                profile = PROFILE_IDENTICAL_PAYLOAD
                main = self._revisit(common, head, profile, digest, previous, url)
            else:
                truncated = (
                    f"WARC-Truncated: {exchange.truncated}\r\n" if exchange.truncated else ""
                )
                fields = (
                    f"{WARC_VERSION}\r\nWARC-Type: response\r\n{common}"
                    f"WARC-Payload-Digest: {digest}\r\n{truncated}"
                )
                main = self._block_record(fields, _RESPONSE_TYPE, head, body)

        request_line = f"{exchange.method} {request_target(url)} HTTP/{exchange.http_version}"
        request = self._request_record(
            f"WARC-Record-ID: {new_record_id()}\r\n"
            f"WARC-Date: {date}\r\nWARC-Target-URI: {url}\r\n"
            f"WARC-Concurrent-To: {record_id}\r\nWARC-Warcinfo-ID: {warcinfo_id}\r\n"
            f"{ip}{FETCH_KIND_FIELD}: {kind}\r\n",
            http_head(request_line, exchange.request_pairs),
        )
        return EncodedExchange(
            main,
            request,
            "revisit" if profile else "response",
            record_id,
            profile,
            digest,
            date,
            warcinfo_id,
        )

    def unanswered_request(
        self,
        url: str,
        request_pairs: Iterable[tuple[str, str]],
        *,
        date: str,
        kind: FetchKind,
        warcinfo_id: str,
        method: str = "GET",
        http_version: str = "1.1",
    ) -> tuple[bytes, str]:
        """The request record of a request that went on the wire and got no answer this client
        could read (a timeout, a reset before the headers, a head it refuses): what was asked
        and when, with no response beside it to be concurrent to. Returns the member and its
        record id."""
        record_id = new_record_id()
        request_line = f"{method} {request_target(url)} HTTP/{http_version}"
        member = self._request_record(
            f"WARC-Record-ID: {record_id}\r\nWARC-Date: {date}\r\nWARC-Target-URI: {url}\r\n"
            f"WARC-Warcinfo-ID: {warcinfo_id}\r\n{FETCH_KIND_FIELD}: {kind}\r\n",
            http_head(request_line, request_pairs),
        )
        return member, record_id

    def _request_record(self, fields: str, head: bytes) -> bytes:
        return self._block_record(
            f"{WARC_VERSION}\r\nWARC-Type: request\r\n{fields}", _REQUEST_TYPE, head, b""
        )

    def _revisit(
        self,
        common: str,
        head: bytes,
        profile: str,
        digest: str | None,
        previous: ArchivedOriginal | None,
        url: str,
    ) -> bytes:
        if previous is not None:
            refers = (
                f"WARC-Refers-To: {previous.record_id}\r\n"
                f"WARC-Refers-To-Target-URI: {previous.target_uri}\r\n"
                f"WARC-Refers-To-Date: {warc_date(previous.date)}\r\n"
            )
        else:  # a 304 to validators from before archiving began: the original is this URI's
            refers = f"WARC-Refers-To-Target-URI: {url}\r\n"
        payload = f"WARC-Payload-Digest: {digest}\r\n" if digest is not None else ""
        fields = (
            f"{WARC_VERSION}\r\nWARC-Type: revisit\r\n{common}"
            f"WARC-Profile: {profile}\r\n{refers}{payload}"
        )
        return self._block_record(fields, _RESPONSE_TYPE, head, b"")
