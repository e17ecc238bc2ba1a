"""The values that cross the archive's boundary: what the fetch stage hands in, what it gets back.

They are plain frozen dataclasses so the fetch stage can keep them in its tables: a caller stores
an :class:`ArchivedOriginal` per URL (``to_json`` gives one string column) and passes it back
the next time the URL is fetched, which is how the writer can turn an unchanged page into a
revisit record instead of a second copy of the body.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii
from typing import Any, Literal, TypeVar

__all__ = [
    "ArchiveClosedError",
    "ArchiveError",
    "ArchiveFormatError",
    "ArchiveWriteError",
    "ArchivedOriginal",
    "ArchivedRecord",
    "CompletedWarc",
    "FETCH_KIND_FIELD",
    "FetchKind",
    "FETCH_KINDS",
    "HttpExchange",
    "OriginalNotFound",
    "PROFILE_IDENTICAL_PAYLOAD",
    "PROFILE_SERVER_NOT_MODIFIED",
    "RecordLocation",
    "TruncatedReason",
    "header_value",
    "parse_warc_date",
    "unchecked",
    "warc_date",
]

#: WARC 1.1 revisit profiles (section 6.7.2 and 6.7.3 of the WARC 1.1 specification).
PROFILE_IDENTICAL_PAYLOAD = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
PROFILE_SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"

#: What a fetch was for. robots.txt, sitemaps and feeds are archived like pages, but a count of
#: "pages archived" must be able to leave them out, so every record of a fetch carries this in
#: the WARC-level field FETCH_KIND_FIELD (and the CDXJ line of a non-page fetch in "kind").
FetchKind = Literal["page", "robots", "sitemap", "feed"]
FETCH_KINDS: tuple[str, ...] = ("page", "robots", "sitemap", "feed")
FETCH_KIND_FIELD = "WARC-Freshness-Fetch-Kind"

#: Why a record holds less than the server sent, in WARC-Truncated's words (WARC 1.1 5.13): a
#: size cap ("length", also a body the client chose not to read), a read that timed out
#: ("time"), a connection that dropped mid-body ("disconnect").
TruncatedReason = Literal["length", "time", "disconnect"]

_DIGEST_RE = re.compile(r"^sha1:[A-Z2-7]{32}$")
_RECORD_ID_RE = re.compile(r"^<[^<>\s]+>$")
_TOKEN_RE = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # RFC 9110 token (method, field name)


class ArchiveError(Exception):
    """Base of the archive's own errors."""


class ArchiveWriteError(ArchiveError):
    """Writing to the archive failed on the file system (a full disk, a file size limit).

    ``saved`` is the file the writer completed from the records written before the failure
    (None when there were none, or completing it failed too); records in it are durable, the
    failed exchange and everything after it are not archived.
    """

    def __init__(self, message: str, *, saved: CompletedWarc | None = None) -> None:
        super().__init__(message)
        self.saved = saved


class ArchiveClosedError(ArchiveError):
    """The writer was closed, aborted or failed earlier and takes no more records."""


class ArchiveFormatError(ArchiveError, ValueError):
    """A file or record is not what the archive expects (not WARC, cut short, wrong offset)."""


class OriginalNotFound(ArchiveError, LookupError):
    """A revisit record's original is not in the archive (pruned, or never archived here)."""


# Cached: a cycle stamps all its records with one date, and every record and index line
# formats and parses it again (datetimes and strings are immutable, so a hit is exact).
@functools.lru_cache(maxsize=4096)
def warc_date(when: datetime) -> str:
    """WARC 1.1 date: UTC, with microseconds when there are any (WARC 1.1 allows fractions)."""
    if when.utcoffset() is None:
        raise ValueError(f"the datetime {when!r} must be timezone-aware (UTC)")
    utc = when.astimezone(UTC).replace(tzinfo=None)
    text = utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds")
    return text + "Z"


@functools.lru_cache(maxsize=4096)
def parse_warc_date(text: str) -> datetime:
    """The datetime of a WARC-Date (with or without fraction, 'Z' or an offset)."""
    value = text.strip()
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ArchiveFormatError(f"not a WARC date: {text!r}") from exc
    if parsed.utcoffset() is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


_T = TypeVar("_T")


def unchecked(cls: type[_T], **values: Any) -> _T:
    """An instance of the frozen dataclass ``cls`` with ``values`` for its fields, every field
    given, made without its ``__init__``: for values the archive has just made itself (a
    record id it drew, a digest it formatted, the place it wrote a record at), which the
    writer returns with every exchange. A frozen dataclass's ``__init__`` sets each field
    through ``object.__setattr__`` and ``__post_init__`` checks them again, which cost more
    than formatting the record's index line. Equality, hashing and ``repr`` are the
    dataclass's own (they read the fields)."""
    made = object.__new__(cls)
    made.__dict__.update(values)
    return made


def _check_digest(name: str, value: str) -> None:
    # 32 characters of the base32 alphabet are 160 bits, a SHA-1, and always decode: the
    # pattern is the whole check.
    if not _DIGEST_RE.match(value):
        raise ValueError(f"{name} must look like 'sha1:' + 32 base32 characters, got {value!r}")


def _json(value: object) -> str:
    """``json.dumps(value)`` of a str, an int or None (anything else goes to json.dumps)."""
    if value is None:
        return "null"
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)  # type: ignore[arg-type]
    if kind is int:
        return int.__repr__(value)  # type: ignore[arg-type]
    return json.dumps(value)


# Header names seen valid, as given (str or bytes) -> as str: a crawl sends and receives the
# same few dozen names on every request, and checking each against the token pattern again
# was a large share of building an exchange.
_VALID_NAMES: dict[str | bytes, str] = {}
_MAX_VALID_NAMES = 4096


def header_value(pairs: Iterable[tuple[str, str]], name: str) -> str | None:
    """The first value of header ``name`` (any case) among ``pairs``; None when absent."""
    lower = name.lower()
    return next((value for key, value in pairs if key.lower() == lower), None)


def _header_pairs(
    name: str, headers: Iterable[tuple[str | bytes, str | bytes]]
) -> tuple[tuple[str, str], ...]:
    """Headers as (str, str), bytes read as ISO-8859-1 (how HTTP/1.1 carries them)."""
    pairs: list[tuple[str, str]] = []
    valid = _VALID_NAMES
    for item in headers:
        try:
            key, value = item
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"{name}: each header must be a (name, value) pair, got {item!r}"
            ) from exc
        value_s = value.decode("iso-8859-1") if isinstance(value, bytes) else value
        try:
            key_s = valid.get(key)
        except TypeError:  # unhashable: not a name, said below
            key_s = None
        if key_s is None or not isinstance(value_s, str):
            key_s = key.decode("iso-8859-1") if isinstance(key, bytes) else key
            if not isinstance(key_s, str) or not isinstance(value_s, str):
                raise ValueError(
                    f"{name}: header names and values must be str or bytes, got {item!r}"
                )
            if not _TOKEN_RE.match(key_s):
                raise ValueError(f"{name}: {key_s!r} is not a valid header name")
            if len(valid) < _MAX_VALID_NAMES:
                valid[key] = key_s
        # three substring searches in C: this runs for every header of every request
        if "\r" in value_s or "\n" in value_s or "\x00" in value_s:
            raise ValueError(f"{name}: the value of {key_s!r} contains CR, LF or NUL")
        pairs.append((key_s, value_s))
    return tuple(pairs)


# Whitespace and control characters, which no URL in a WARC-Target-URI may hold.
_URL_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")
_HTTP_VERSION_RE = re.compile(r"^\d\.\d$|^\d$")
_BODY_TYPES = (bytes, bytearray, memoryview)


@dataclass(frozen=True)
class HttpExchange:
    """One HTTP request that went on the wire and what came back, as the fetcher saw them.

    ``response_headers`` are the headers as received, in order, duplicates kept (aiohttp's
    ``response.raw_headers`` fits as is). ``body`` is the body as read: Transfer-Encoding is
    always undone by the HTTP client; with ``body_decoded`` the caller also undid the
    Content-Encoding (the stored headers then say so, see the writer). ``truncated`` says why
    the body is not whole, if it is not: the record carries it as ``WARC-Truncated``. For a 304 the
    body is empty. ``fetched_at`` is the capture time written as WARC-Date (the writer's cycle
    time when None), ``ip_address`` the peer's address when known.
    """

    url: str
    status: int
    reason: str = ""
    request_headers: Sequence[tuple[str | bytes, str | bytes]] = ()
    response_headers: Sequence[tuple[str | bytes, str | bytes]] = ()
    body: bytes = b""
    method: str = "GET"
    http_version: str = "1.1"
    body_decoded: bool = False
    truncated: TruncatedReason | None = None
    fetched_at: datetime | None = None
    ip_address: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or "://" not in self.url or _URL_UNSAFE.search(self.url):
            raise ValueError(
                f"url must be an absolute URL without spaces or control characters, got {self.url!r}"
            )
        if (
            isinstance(self.status, bool)
            or not isinstance(self.status, int)
            or not 100 <= self.status <= 999
        ):
            raise ValueError(f"status must be an HTTP status code (100-999), got {self.status!r}")
        if not isinstance(self.reason, str) or "\r" in self.reason or "\n" in self.reason:
            raise ValueError(f"reason must be one line of text, got {self.reason!r}")
        if not isinstance(self.body, _BODY_TYPES):
            raise ValueError(f"body must be bytes, got {type(self.body).__name__}")
        # the common values first: a regular expression each costs more than the comparison
        if self.method != "GET" and not _TOKEN_RE.match(self.method or ""):
            raise ValueError(f"method must be an HTTP method token, got {self.method!r}")
        if self.http_version != "1.1" and not _HTTP_VERSION_RE.match(self.http_version or ""):
            raise ValueError(f"http_version must look like '1.1', got {self.http_version!r}")
        if self.fetched_at is not None and self.fetched_at.utcoffset() is None:
            raise ValueError("fetched_at must be timezone-aware (UTC)")
        if self.status == 304 and self.body:
            raise ValueError(f"a 304 response has no body; got {len(self.body)} bytes")
        object.__setattr__(
            self, "request_headers", _header_pairs("request_headers", self.request_headers)
        )
        object.__setattr__(
            self, "response_headers", _header_pairs("response_headers", self.response_headers)
        )

    @property
    def request_pairs(self) -> tuple[tuple[str, str], ...]:
        """The request headers as (str, str) pairs (the constructor normalized them)."""
        return self.request_headers  # type: ignore[return-value]

    @property
    def response_pairs(self) -> tuple[tuple[str, str], ...]:
        """The response headers as (str, str) pairs (the constructor normalized them)."""
        return self.response_headers  # type: ignore[return-value]


@dataclass(frozen=True)
class RecordLocation:
    """Where a record is stored: a gzip member of ``warc_filename`` (relative to the archive
    folder) starting at ``warc_offset``, ``warc_length`` bytes long as stored (compressed)."""

    warc_filename: str
    warc_offset: int
    warc_length: int


@dataclass(frozen=True)
class ArchivedOriginal:
    """The record that holds a URL's last archived body: what a revisit refers to.

    The writer returns one with every record (``ArchivedRecord.original``); the caller keeps it
    per URL and hands it back as ``previous`` on the next fetch of that URL. Without the
    location fields a revisit can still be written, but replay must find the original through
    the index by URI, date and digest.
    """

    target_uri: str
    date: datetime
    record_id: str
    payload_digest: str
    warc_filename: str | None = None
    warc_offset: int | None = None
    warc_length: int | None = None
    # What the original's index line says of it (its mime type and HTTP status) and the URI's
    # index key, so that later records of the URL are indexed without reading the original
    # back or computing the key again (absent in rows written before they were kept).
    mime: str | None = None
    status: int | None = None
    urlkey: str | None = None

    def __post_init__(self) -> None:
        if self.date.utcoffset() is None:
            raise ValueError("ArchivedOriginal.date must be timezone-aware (UTC)")
        if not _RECORD_ID_RE.match(self.record_id):
            raise ValueError(f"record_id must look like '<urn:uuid:...>', got {self.record_id!r}")
        _check_digest("payload_digest", self.payload_digest)
        located = (self.warc_filename, self.warc_offset, self.warc_length)
        if any(v is not None for v in located) and any(v is None for v in located):
            raise ValueError("warc_filename, warc_offset and warc_length go together (all or none)")
        if self.warc_offset is not None and (self.warc_offset < 0 or (self.warc_length or 0) <= 0):
            raise ValueError("warc_offset must be >= 0 and warc_length > 0")

    @property
    def location(self) -> RecordLocation | None:
        if self.warc_filename is None or self.warc_offset is None or self.warc_length is None:
            return None
        return RecordLocation(self.warc_filename, self.warc_offset, self.warc_length)

    def to_json(self) -> str:
        """One compact JSON string, for a table column (what ``json.dumps`` with compact
        separators writes; formatted directly, since the fetch stage makes one per answer)."""
        return (
            f'{{"uri":{_json(self.target_uri)},"date":{_json(warc_date(self.date))},'
            f'"id":{_json(self.record_id)},"digest":{_json(self.payload_digest)},'
            f'"file":{_json(self.warc_filename)},"offset":{_json(self.warc_offset)},'
            f'"length":{_json(self.warc_length)},"mime":{_json(self.mime)},'
            f'"status":{_json(self.status)},"key":{_json(self.urlkey)}}}'
        )

    @classmethod
    def from_json(cls, text: str) -> ArchivedOriginal:
        try:
            data: dict[str, Any] = json.loads(text)
            # every field given, then the constructor's checks (the fetch stage reads one of
            # these for every planned URL the archive holds)
            made = unchecked(
                cls,
                target_uri=data["uri"],
                date=parse_warc_date(data["date"]),
                record_id=data["id"],
                payload_digest=data["digest"],
                warc_filename=data.get("file"),
                warc_offset=data.get("offset"),
                warc_length=data.get("length"),
                mime=data.get("mime"),
                status=data.get("status"),
                urlkey=data.get("key"),
            )
        except (KeyError, TypeError, json.JSONDecodeError, ArchiveFormatError) as exc:
            raise ValueError(f"not an ArchivedOriginal JSON string: {text!r} ({exc})") from exc
        made.__post_init__()
        return made

    def relocated(self, location: RecordLocation) -> ArchivedOriginal:
        """The same record at another place (after pruning copied it into a kept file)."""
        return ArchivedOriginal(
            self.target_uri,
            self.date,
            self.record_id,
            self.payload_digest,
            location.warc_filename,
            location.warc_offset,
            location.warc_length,
            self.mime,
            self.status,
            self.urlkey,
        )


RecordType = Literal["response", "revisit", "request"]


@dataclass(frozen=True)
class ArchivedRecord:
    """What the writer made of one exchange, and where it went.

    ``warc_filename``/``warc_offset``/``warc_length`` locate the response or revisit record;
    ``request_offset``/``request_length`` the request record beside it in the same file. A
    request that got no answer has its request record alone (``record_type`` "request", both
    locations that record's).
    ``payload_digest`` is the WARC-Payload-Digest (for a revisit, the original's: the payload
    it stands for; None for a 304 with no known original). ``original`` is what to keep for the
    URL and pass as ``previous`` next time (the record itself for a response, the referred
    original for a revisit). The location is durable only once the file is complete: see
    ``ArchiveWriter.is_durable`` and ``CompletedWarc``.
    """

    warc_filename: str
    warc_offset: int
    warc_length: int
    payload_digest: str | None
    record_type: RecordType
    record_id: str
    warc_date: datetime
    target_uri: str
    kind: FetchKind
    request_offset: int
    request_length: int
    profile: str | None = None
    truncated: bool = False
    original: ArchivedOriginal | None = None

    @property
    def location(self) -> RecordLocation:
        return RecordLocation(self.warc_filename, self.warc_offset, self.warc_length)


@dataclass(frozen=True)
class CompletedWarc:
    """A WARC file that is complete: fsynced, renamed to ``*.warc.gz``, folder fsynced.

    Every record in ``records`` exists at its location from now on (until pruning removes the
    file). ``index_filename`` is its CDXJ index beside it, or None if writing the index failed
    (``ensure_indexes`` writes it later; the WARC is whole either way).
    """

    warc_filename: str
    size: int
    records: tuple[ArchivedRecord, ...] = field(default=(), repr=False)
    index_filename: str | None = None
