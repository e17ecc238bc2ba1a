"""Response bodies read in chunks and decoded by us (gzip, deflate, and brotli where it is
installed), under one cap on the bytes on the wire and another on the bytes decoded, so that a
huge body or a compression bomb cannot exhaust memory. Page fetches, robots.txt and sitemaps
all read bodies this way. The Accept-Encoding the session advertises is here because it must
name only what this module can decode."""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from freshness_pipeline.warehouse.archive import TruncatedReason

__all__ = [
    "ACCEPT_ENCODING",
    "BodyDecodeError",
    "BodyInterrupted",
    "BodyRead",
    "BodyTooLarge",
    "read_limited",
]

try:  # pragma: no cover - brotli is optional and not installed in the reference environment
    import brotli as _brotli  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover
    try:
        import brotlicffi as _brotli  # type: ignore[import-not-found,no-redef]
    except ImportError:
        _brotli = None

# Only advertise what we can decode with a bounded output size.
ACCEPT_ENCODING = "gzip, deflate, br" if _brotli is not None else "gzip, deflate"

_CHUNK = 64 * 1024


class BodyTooLarge(Exception):
    """The body (raw or decompressed) went over its cap; reading stopped there. ``partial``
    holds what was decoded up to the cap (archived as a truncated record)."""

    def __init__(self, message: str, raw_bytes: int, partial: bytes = b"") -> None:
        super().__init__(message)
        self.raw_bytes = raw_bytes
        self.partial = partial


class BodyDecodeError(Exception):
    """The Content-Encoding was unsupported or its data corrupt."""

    def __init__(self, message: str, raw_bytes: int) -> None:
        super().__init__(message)
        self.raw_bytes = raw_bytes


class BodyInterrupted(Exception):
    """The answer's head arrived and its body stopped short: the connection dropped, or a read
    timed out. ``partial`` holds what was decoded before (an archive keeps it as a record cut
    for ``reason``, in WARC-Truncated's words), ``transport_error`` the client's own error,
    which says how the host failed."""

    def __init__(
        self,
        transport_error: Exception,
        raw_bytes: int,
        partial: bytes,
        reason: Literal["disconnect", "time"],
    ) -> None:
        cut = "timed out" if reason == "time" else "was cut"
        super().__init__(f"body {cut} after {raw_bytes} bytes: {transport_error}")
        self.transport_error = transport_error
        self.raw_bytes = raw_bytes
        self.partial = partial
        self.reason: Literal["disconnect", "time"] = reason


class _OutputCap(Exception):
    pass


@dataclass
class BodyRead:
    body: bytes
    raw_bytes: int
    truncated: bool = False

    @property
    def cut_by(self) -> TruncatedReason | None:
        """Why the body is not whole, in the archive's words (a cap: "length")."""
        return "length" if self.truncated else None


class _Inflate:
    """Incremental gzip/zlib/raw-deflate whose total output is capped (bomb-proof).

    ``decompress(data, max_length)`` never returns more than asked for, so memory stays at the
    cap however large the stream claims to expand.
    """

    def __init__(self, kind: str, limit: int) -> None:
        self.kind = kind
        self.limit = limit
        self.produced = 0
        self._d: Any = None
        self._pending = b""
        self._done = False

    def _new(self, head: bytes) -> Any:
        if self.kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        # HTTP "deflate" is meant to be zlib-wrapped, but many servers send raw deflate.
        if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
            return zlib.decompressobj(zlib.MAX_WBITS)
        return zlib.decompressobj(-zlib.MAX_WBITS)

    def feed(self, data: bytes) -> bytes:
        if self._done:
            return b""
        if self._d is None:
            self._pending += data
            if len(self._pending) < 2:
                return b""
            data, self._pending = self._pending, b""
            self._d = self._new(data)
        out = bytearray()
        while data:
            piece = self._d.decompress(data, self.limit - self.produced + 1)
            self._count(piece)
            out += piece
            data = self._d.unconsumed_tail
            if self._d.eof:
                rest = self._d.unused_data
                if self.kind == "gzip" and rest[:2] == b"\x1f\x8b":
                    self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)  # next gzip member
                    data = rest
                else:
                    self._done = True
                    break
        return bytes(out)

    def flush(self) -> bytes:
        if self._d is None:
            if not self._pending:
                return b""
            self._d = self._new(self._pending)
            data, self._pending = self._pending, b""
            return self.feed(data)
        if self._done:
            return b""
        out = self._d.flush(self.limit - self.produced + 1)
        self._count(out)
        return out

    @property
    def finished(self) -> bool:
        """The stream's end was read (a gzip stream: its last member's)."""
        return self._done

    def _count(self, piece: bytes) -> None:
        self.produced += len(piece)
        if self.produced > self.limit:
            raise _OutputCap


class _Brotli:  # pragma: no cover - exercised only where brotli is installed
    """Brotli fed in small slices: its API cannot bound output per call, small input can."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.produced = 0
        self._d = _brotli.Decompressor()

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        for i in range(0, len(data), 1024):
            piece = self._d.process(data[i : i + 1024])
            self.produced += len(piece)
            if self.produced > self.limit:
                raise _OutputCap
            out += piece
        return bytes(out)

    def flush(self) -> bytes:
        return b""


#: Content codings that compress (IANA's registry and what servers send besides): one this
#: client cannot undo fails the page rather than storing compressed bytes as its content.
_COMPRESSIONS = frozenset(
    {
        "br",
        "zstd",
        "compress",
        "x-compress",
        "bzip2",
        "x-bzip2",
        "lzma",
        "xz",
        "exi",
        "pack200-gzip",
        "aes128gcm",
        "dcb",
        "dcz",
        "sdch",
    }
)


class _Decoder:
    """Undo a Content-Encoding chain, every stage's output capped at ``limit``."""

    def __init__(self, content_encoding: str | None, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.parts: list[bytes] = []
        self.stages: list[_Inflate | _Brotli] = []
        codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
        for coding in reversed(codings):  # the last coding applied is undone first
            if coding in ("gzip", "x-gzip"):
                self.stages.append(_Inflate("gzip", limit))
            elif coding == "deflate":
                self.stages.append(_Inflate("deflate", limit))
            elif coding == "br" and _brotli is not None:  # pragma: no cover
                self.stages.append(_Brotli(limit))
            elif coding in _COMPRESSIONS:
                raise ValueError(f"unsupported content-encoding {coding!r}")
            # Anything else names no compression ("identity", or a charset, "binary", "8bit"
            # written there by mistake): the bytes are the content, as browsers read them.
            # Refused, such a page could never be fetched.

    def feed(self, data: bytes) -> None:
        for stage in self.stages:
            data = stage.feed(data)
        self._take(data)

    def finish(self) -> bytes:
        data = b""
        for stage in self.stages:
            data = (stage.feed(data) if data else b"") + stage.flush()
        self._take(data)
        return b"".join(self.parts)

    def partial(self) -> bytes:
        # A truncated compressed stream cannot be flushed cleanly; keep what was decoded.
        return b"".join(self.parts)[: self.limit]

    def _take(self, data: bytes) -> None:
        if data:
            self.size += len(data)
            self.parts.append(data)
            if self.size > self.limit:
                raise _OutputCap


_GZIP_MAGIC = b"\x1f\x8b\x08"
_GZIP_TYPES = ("application/gzip", "application/x-gzip", "application/octet-stream")


def _compressed_twice(body: bytes, content_type: str | None, limit: int) -> bytes:
    """``body`` decoded once more when a server compressed it twice and said so once (its
    decoded bytes are gzip again, and the content is not a gzip file): otherwise the page is
    binary noise whose gzip header's timestamp makes it 'change' at every fetch. Under the
    same cap; a second layer that does not decode leaves the body as it was."""
    if (content_type or "").split(";")[0].strip().lower() in _GZIP_TYPES:
        return body
    inflate = _Inflate("gzip", limit)
    try:
        inner = inflate.feed(body) + inflate.flush()
    except zlib.error:
        return body
    return inner if inflate.finished else body


async def read_limited(
    resp: aiohttp.ClientResponse,
    *,
    max_bytes: int,
    max_decompressed_bytes: int,
    truncate: bool = False,
    keep_prefix: bool = False,
) -> BodyRead:
    """Read a response body in chunks, decoding Content-Encoding ourselves, with both caps.

    The session runs with ``auto_decompress=False`` so a 1 MB gzip body cannot become 1 GB in
    memory. With ``truncate`` (robots.txt: "parse at least 500 KiB, ignore the rest") going over
    a cap ends the read with what fits; otherwise it raises :class:`BodyTooLarge`. A body that
    stops short (the connection dropped, a read timed out) raises :class:`BodyInterrupted`
    with what came before it, whatever ``truncate`` says: a file cut by the network is not one
    the server meant to end there. With ``keep_prefix`` (a page) a body over ``max_bytes`` on
    the wire likewise ends with what fits, but one that decodes past ``max_decompressed_bytes``
    still raises: a page too big to keep whole is read from its first part, as Heritrix and
    Nutch read it, while a compression bomb is no page.
    """
    cut_on_wire = truncate or keep_prefix
    raw = 0
    try:
        decoder = _Decoder(resp.headers.get("Content-Encoding"), max_decompressed_bytes)
    except ValueError as exc:
        raise BodyDecodeError(str(exc), 0) from exc
    declared = resp.content_length
    if declared is not None and declared > max_bytes and not cut_on_wire:
        resp.close()
        raise BodyTooLarge(f"body exceeds {max_bytes} bytes (Content-Length {declared})", 0)
    try:
        async for chunk in resp.content.iter_chunked(_CHUNK):
            if raw + len(chunk) > max_bytes:
                if cut_on_wire:
                    chunk = chunk[: max_bytes - raw]
                    raw += len(chunk)
                    with contextlib.suppress(_OutputCap):
                        decoder.feed(chunk)
                    resp.close()
                    return BodyRead(decoder.partial(), raw, truncated=True)
                raw += len(chunk)
                resp.close()
                raise BodyTooLarge(f"body exceeds {max_bytes} bytes", raw, decoder.partial())
            raw += len(chunk)
            decoder.feed(chunk)
        body = decoder.finish()
        if decoder.stages and body[:3] == _GZIP_MAGIC:
            body = _compressed_twice(body, resp.headers.get("Content-Type"), decoder.limit)
        return BodyRead(body, raw)
    except _OutputCap:
        resp.close()
        if truncate:
            return BodyRead(decoder.partial(), raw, truncated=True)
        raise BodyTooLarge(
            f"decompressed body exceeds {max_decompressed_bytes} bytes", raw, decoder.partial()
        ) from None
    except zlib.error as exc:
        resp.close()
        raise BodyDecodeError(
            f"corrupt {resp.headers.get('Content-Encoding')} content-encoding: {exc}", raw
        ) from exc
    except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, TimeoutError) as exc:
        resp.close()
        reason: Literal["disconnect", "time"] = (
            "time" if isinstance(exc, TimeoutError) else "disconnect"
        )
        raise BodyInterrupted(exc, raw, decoder.partial(), reason) from exc
