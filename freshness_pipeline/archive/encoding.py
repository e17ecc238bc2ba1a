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

Each gzip member uses a deflate window no larger than the record (the output is the same as
with the full window) and, for small records, less hash memory: setting up zlib's full state
costs more than compressing a revisit's few hundred bytes.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from freshness_pipeline.archive.records import (
    FETCH_KIND_FIELD,
    PROFILE_IDENTICAL_PAYLOAD,
    PROFILE_SERVER_NOT_MODIFIED,
    ArchivedOriginal,
    FetchKind,
    HttpExchange,
    warc_date,
)

__all__ = [
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
_SMALL_RECORD = 4096  # up to here a gzip member is set up with less hash memory


def _b32(digest: bytes) -> str:
    return "sha1:" + base64.b32encode(digest).decode("ascii")


def payload_digest(body: bytes) -> str:
    """``sha1:BASE32`` of the payload, exactly as WARC-Payload-Digest writes it."""
    return _b32(hashlib.sha1(body).digest())


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
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return target


def http_head(first_line: str, headers: Iterable[tuple[str, str]]) -> bytes:
    """An HTTP message head: first line, header lines, blank line; bytes as received.

    Header text decoded from bytes as ISO-8859-1 encodes back to the same bytes; a str value
    outside ISO-8859-1 (only possible from a caller that built it) is written as UTF-8.
    """
    lines = [first_line, *(f"{name}: {value}" for name, value in headers)]
    text = "\r\n".join(lines) + "\r\n\r\n"
    try:
        return text.encode("iso-8859-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


def new_record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


@dataclass(frozen=True)
class EncodedExchange:
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
    """Builds WARC records as gzip members. Holds no state but its level: safe from any thread."""

    def __init__(self, compress_level: int = 6) -> None:
        if not 0 <= compress_level <= 9:
            raise ValueError(f"compress_level must be 0-9, got {compress_level!r}")
        self.compress_level = compress_level

    # -- low level ---------------------------------------------------------------------------

    def gzip(self, parts: Iterable[bytes], size: int) -> bytes:
        """One gzip member of the concatenated ``parts`` (``size`` bytes in all)."""
        window = max(9, min(15, (size - 1).bit_length()))
        memory = 4 if size <= _SMALL_RECORD else 8
        compressor = zlib.compressobj(self.compress_level, zlib.DEFLATED, 16 + window, memory)
        out = [compressor.compress(part) for part in parts]
        out.append(compressor.flush())
        return b"".join(out)

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
        block_digest = hashlib.sha1(head)
        if payload and not headers_only:
            block_digest.update(payload)
        length = len(head) + (0 if headers_only else len(payload))
        lines = [WARC_VERSION, *(f"{name}: {value}" for name, value in fields)]
        lines.append(f"WARC-Block-Digest: {_b32(block_digest.digest())}")
        lines.append(f"Content-Type: {content_type}")
        lines.append(f"Content-Length: {length}")
        warc_head = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8")
        parts = [warc_head, head] if headers_only or not payload else [warc_head, head, payload]
        parts.append(_END)
        return self.gzip(parts, len(warc_head) + length + len(_END))

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
        """
        record_id = new_record_id()
        common: list[tuple[str, str]] = [
            ("WARC-Record-ID", record_id),
            ("WARC-Date", date),
            ("WARC-Target-URI", exchange.url),
            ("WARC-Warcinfo-ID", warcinfo_id),
        ]
        if exchange.ip_address:
            common.append(("WARC-IP-Address", exchange.ip_address))
        common.append((FETCH_KIND_FIELD, kind))

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
            main = self._revisit(common, head, profile, digest, previous, exchange.url)
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
                main = self._revisit(common, head, profile, digest, previous, exchange.url)
            else:
                fields = [("WARC-Type", "response"), *common, ("WARC-Payload-Digest", digest)]
                if exchange.truncated:
                    fields.append(("WARC-Truncated", "length"))
                main = self.record(fields, _RESPONSE_TYPE, head, body)

        request = self._request(exchange, date, record_id, warcinfo_id, kind)
        return EncodedExchange(
            main=main,
            request=request,
            record_type="revisit" if profile else "response",
            record_id=record_id,
            profile=profile,
            payload_digest=digest,
            date=date,
            warcinfo_id=warcinfo_id,
        )

    def _revisit(
        self,
        common: list[tuple[str, str]],
        head: bytes,
        profile: str,
        digest: str | None,
        previous: ArchivedOriginal | None,
        url: str,
    ) -> bytes:
        fields = [("WARC-Type", "revisit"), *common, ("WARC-Profile", profile)]
        if previous is not None:
            fields += [
                ("WARC-Refers-To", previous.record_id),
                ("WARC-Refers-To-Target-URI", previous.target_uri),
                ("WARC-Refers-To-Date", warc_date(previous.date)),
            ]
        else:  # a 304 to validators from before archiving began: the original is this URI's
            fields.append(("WARC-Refers-To-Target-URI", url))
        if digest is not None:
            fields.append(("WARC-Payload-Digest", digest))
        return self.record(fields, _RESPONSE_TYPE, head, headers_only=True)

    def _request(
        self,
        exchange: HttpExchange,
        date: str,
        concurrent_to: str,
        warcinfo_id: str,
        kind: FetchKind,
    ) -> bytes:
        request_line = (
            f"{exchange.method} {request_target(exchange.url)} HTTP/{exchange.http_version}"
        )
        fields = [
            ("WARC-Type", "request"),
            ("WARC-Record-ID", new_record_id()),
            ("WARC-Date", date),
            ("WARC-Target-URI", exchange.url),
            ("WARC-Concurrent-To", concurrent_to),
            ("WARC-Warcinfo-ID", warcinfo_id),
        ]
        if exchange.ip_address:
            fields.append(("WARC-IP-Address", exchange.ip_address))
        fields.append((FETCH_KIND_FIELD, kind))
        return self.record(fields, _REQUEST_TYPE, http_head(request_line, exchange.request_pairs))
