"""Reading the archive back: one record at a location, a page's HTTP response for
re-extraction without fetching (following a revisit to its original), every record of a file.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from io import BytesIO
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]
from warcio.exceptions import ArchiveLoadFailed  # type: ignore[import-untyped]
from warcio.recordloader import (  # type: ignore[import-untyped]
    ArcWarcRecord,
    ArcWarcRecordLoader,
)
from warcio.statusandheaders import StatusAndHeaders  # type: ignore[import-untyped]

from freshness_pipeline.warehouse.archive.index import ArchiveIndex
from freshness_pipeline.warehouse.archive.records import (
    PROFILE_SERVER_NOT_MODIFIED,
    ArchiveFormatError,
    OriginalNotFound,
    RecordLocation,
    header_value,
    parse_warc_date,
)

__all__ = [
    "ArchiveReader",
    "ArchivedResponse",
    "StoredRecord",
    "iter_records",
    "read_record",
    "read_response",
]

#: Readers refuse a stored record longer than this (a bad length would otherwise ask for
#: gigabytes); the fetcher's own body caps are far below.
MAX_RECORD_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class StoredRecord:
    """One WARC record as stored: its place, its WARC headers, its HTTP head, its payload."""

    warc_filename: str
    offset: int
    length: int
    record_type: str
    warc_headers: tuple[tuple[str, str], ...]
    http_status: int | None
    http_reason: str | None
    http_headers: tuple[tuple[str, str], ...]
    payload: bytes

    def header(self, name: str) -> str | None:
        return header_value(self.warc_headers, name)

    @property
    def record_id(self) -> str | None:
        return self.header("WARC-Record-ID")

    @property
    def target_uri(self) -> str | None:
        return self.header("WARC-Target-URI")

    @property
    def date(self) -> datetime | None:
        value = self.header("WARC-Date")
        return parse_warc_date(value) if value else None

    @property
    def location(self) -> RecordLocation:
        return RecordLocation(self.warc_filename, self.offset, self.length)


def _stored(record: ArcWarcRecord, where: RecordLocation, payload: bytes) -> StoredRecord:
    """A record warcio parsed, as this package reads it."""
    http: StatusAndHeaders | None = record.http_headers
    status: int | None = None
    reason: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    if http:
        code, _, reason = http.statusline.partition(" ")
        with contextlib.suppress(ValueError):
            status = int(code)
        headers = tuple((str(k), str(v)) for k, v in http.headers)
    return StoredRecord(
        warc_filename=where.warc_filename,
        offset=where.warc_offset,
        length=where.warc_length,
        record_type=record.rec_type,
        warc_headers=tuple((str(k), str(v)) for k, v in record.rec_headers.headers),
        http_status=status,
        http_reason=reason,
        http_headers=headers,
        payload=payload,
    )


def _resolve(archive_dir: Path, warc_filename: str) -> Path:
    root = Path(archive_dir).resolve()
    if not warc_filename or Path(warc_filename).is_absolute():
        raise ValueError(
            f"warc_filename must be relative to the archive folder, got {warc_filename!r}"
        )
    path = (root / warc_filename).resolve()
    if root not in path.parents:
        raise ValueError(f"warc_filename {warc_filename!r} points outside {root}")
    return path


def iter_records(
    path: Path, *, warc_filename: str | None = None, payloads: bool = True
) -> Iterator[StoredRecord]:
    """Every record of a WARC file, in order, with its offset and stored length (and its
    payload unless ``payloads`` is False: then ``payload`` is empty and nothing is held)."""
    name = warc_filename or Path(path).name
    try:
        with open(path, "rb") as fh:
            iterator = ArchiveIterator(fh)
            for record in iterator:
                payload = record.raw_stream.read() if payloads else b""
                yield _stored(
                    record,
                    RecordLocation(
                        name, iterator.get_record_offset(), iterator.get_record_length()
                    ),
                    payload,
                )
    except (ArchiveLoadFailed, EOFError, zlib.error) as exc:
        raise ArchiveFormatError(f"{path} is not a whole WARC file: {exc}") from exc


def read_record(
    archive_dir: Path, warc_filename: str, offset: int, length: int | None = None
) -> StoredRecord:
    """The record whose gzip member starts at ``offset`` of ``warc_filename``.

    With ``length`` (as the index and the writer report it) exactly that many bytes are read
    and must be one whole gzip member; without it the member is read to its end.
    """
    if offset < 0 or (length is not None and not 0 < length <= MAX_RECORD_BYTES):
        raise ValueError(f"bad record location: offset {offset!r}, length {length!r}")
    path = _resolve(archive_dir, warc_filename)
    where = f"{warc_filename} at offset {offset}"
    with open(path, "rb") as fh:
        fh.seek(offset)
        if length is None:
            try:
                iterator = ArchiveIterator(fh)
                record = next(iter(iterator))
                payload = record.raw_stream.read()
                length = iterator.get_record_length()
            except (StopIteration, ArchiveLoadFailed, EOFError, zlib.error) as exc:
                raise ArchiveFormatError(f"no WARC record starts in {where}: {exc}") from exc
        else:
            member = fh.read(length)
            if len(member) != length:
                raise ArchiveFormatError(
                    f"{where}: the file ends before the record's {length} bytes"
                )
            decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16)
            try:
                raw = decompressor.decompress(member)
            except zlib.error as exc:
                raise ArchiveFormatError(f"no gzip member starts in {where}: {exc}") from exc
            if not decompressor.eof or decompressor.unused_data:
                raise ArchiveFormatError(f"{where}: {length} bytes are not exactly one gzip member")
            try:
                record = ArcWarcRecordLoader().parse_record_stream(
                    BytesIO(raw), known_format="warc"
                )
            except (ArchiveLoadFailed, EOFError, ValueError) as exc:
                raise ArchiveFormatError(f"{where} is not a WARC record: {exc}") from exc
            payload = record.raw_stream.read()
    return _stored(record, RecordLocation(warc_filename, offset, length), payload)


@dataclass(frozen=True)
class ArchivedResponse:
    """A page's HTTP response as the archive has it at one capture time.

    ``status``/``headers``/``body`` are what replay serves for that time: for a response its
    own; for an identical-payload revisit the revisit's headers (the 200 received then) with
    the original's body; for a server-not-modified revisit the original's status, headers and
    body (the 304 said they were still current), the 304's own head in ``record_status`` and
    ``record_headers``. ``body`` is as stored (Content-Encoding as the stored headers say; see
    ``decoded_body``). ``original`` is the record the body came from.
    """

    url: str
    fetched_at: datetime | None
    record_type: str
    profile: str | None
    status: int | None
    reason: str | None
    headers: tuple[tuple[str, str], ...]
    body: bytes
    truncated: bool
    location: RecordLocation
    original: RecordLocation
    record_status: int | None
    record_headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        return header_value(self.headers, name)

    def decoded_body(self, limit: int = 64 * 1024 * 1024) -> bytes:
        """The body with its stored Content-Encoding undone (gzip, deflate), at most ``limit`` bytes."""
        body = self.body
        codings = [
            c.strip().lower()
            for c in (self.header("Content-Encoding") or "").split(",")
            if c.strip()
        ]
        for coding in reversed(codings):
            if coding == "identity":
                continue
            if coding in ("gzip", "x-gzip"):
                decompressor = zlib.decompressobj(zlib.MAX_WBITS | 16)
            elif coding == "deflate":
                decompressor = zlib.decompressobj(
                    zlib.MAX_WBITS if body[:1] == b"\x78" else -zlib.MAX_WBITS
                )
            else:
                raise ArchiveFormatError(f"{self.url}: cannot decode Content-Encoding {coding!r}")
            try:
                body = decompressor.decompress(body, limit)
            except zlib.error as exc:
                raise ArchiveFormatError(
                    f"{self.url}: the stored {coding} body is corrupt: {exc}"
                ) from exc
            if decompressor.unconsumed_tail:
                raise ArchiveFormatError(f"{self.url}: the decoded body is over {limit} bytes")
        return body


class ArchiveReader:
    """Reads responses out of one archive folder, keeping its index cached between calls."""

    def __init__(self, archive_dir: Path) -> None:
        self.archive_dir = Path(archive_dir)
        self.index = ArchiveIndex(self.archive_dir)

    def read_response(
        self, warc_filename: str, offset: int, length: int | None = None
    ) -> ArchivedResponse:
        """The HTTP response of the record at (warc_filename, offset), revisits followed.

        Raises OriginalNotFound when a revisit's original is not in the archive,
        ArchiveFormatError when the location holds no response or revisit record.
        """
        record = read_record(self.archive_dir, warc_filename, offset, length)
        if record.record_type not in ("response", "revisit"):
            raise ArchiveFormatError(
                f"{warc_filename} at offset {offset} is a {record.record_type} record, not a response"
            )
        if record.record_type == "response":
            original, use, profile = record, record, None
        else:
            original = self.find_original(record)
            profile = record.header("WARC-Profile")
            not_modified = profile == PROFILE_SERVER_NOT_MODIFIED or record.http_status == 304
            # a 304 revisit's own headers say "not modified": the original's describe the page
            use = original if not_modified or not record.http_headers else record
        return ArchivedResponse(
            url=record.target_uri or "",
            fetched_at=record.date,
            record_type=record.record_type,
            profile=profile,
            status=use.http_status,
            reason=use.http_reason,
            headers=use.http_headers,
            body=original.payload,
            truncated=original.header("WARC-Truncated") is not None,
            location=record.location,
            original=original.location,
            record_status=record.http_status,
            record_headers=record.http_headers,
        )

    def find_original(self, revisit: StoredRecord) -> StoredRecord:
        """The response record a revisit refers to: looked up in the index by the referred URI,
        date and digest, and checked against WARC-Refers-To (the record id) when present."""
        uri = revisit.header("WARC-Refers-To-Target-URI") or revisit.target_uri
        date = revisit.header("WARC-Refers-To-Date")
        digest = revisit.header("WARC-Payload-Digest")
        refers_to = revisit.header("WARC-Refers-To")
        what = f"the original of the revisit at {revisit.warc_filename}:{revisit.offset}"
        if not uri:
            raise OriginalNotFound(f"{what} names no WARC-Refers-To-Target-URI")
        for entry in self.index.find_original(uri, date, digest):
            try:
                candidate = read_record(
                    self.archive_dir, entry.filename, entry.offset, entry.length
                )
            except (OSError, ArchiveFormatError):
                continue
            if candidate.record_type != "response":
                continue
            if refers_to and candidate.record_id != refers_to:
                continue
            return candidate
        raise OriginalNotFound(
            f"{what} ({uri}, {date or 'no date'}, {refers_to or 'no record id'}) is not in the archive"
        )


def read_response(
    archive_dir: Path, warc_filename: str, offset: int, length: int | None = None
) -> ArchivedResponse:
    """One-off :meth:`ArchiveReader.read_response` (use an ArchiveReader for many)."""
    return ArchiveReader(archive_dir).read_response(warc_filename, offset, length)
