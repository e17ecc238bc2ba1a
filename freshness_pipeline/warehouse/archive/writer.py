"""The archive writer: one per cycle and fetch process, appending gzip-per-record WARC 1.1.

Durability is the contract the fetch stage builds its tables on. A location the writer
returns points into a temporary file (``*.warc.gz.open``) until that file is complete; it is
complete when ``close()`` (or a size rotation) has fsynced it, renamed it to ``*.warc.gz`` and
fsynced the folder, and only then are its records durable (``is_durable``, ``completed``,
the ``on_complete`` callback). So the fetch stage's order is: write the records while
fetching, ``close()``, then write the table rows that carry the locations. A kill -9 before
the rename leaves a temporary file no row points into (``remove_abandoned`` deletes it); a
kill after it leaves a whole file, perhaps with no rows pointing in (harmless), perhaps with
no index yet (``ensure_indexes`` writes it).

Each exchange is built and compressed in memory first and appended with one write for both records;
the file's end after the last whole exchange is remembered, so when the file system refuses a
write (a full disk, a file size limit) the file is cut back to that end and completed with
the exchanges before the failing one, and the error says so. Nothing half-written is ever
renamed.

Calls are synchronous and cheap enough for the event loop (building and gzipping one record);
a lock makes them safe from threads too. ``close()`` and a rotation fsync and read the file
back to index it: call ``close()`` off the loop (``await asyncio.to_thread(writer.close)``)
or after it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import platform
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from json.encoder import encode_basestring_ascii as _json_str
from pathlib import Path
from types import TracebackType

from freshness_pipeline.warehouse.archive.encoding import (
    DEFAULT_COMPRESS_LEVEL,
    EncodedExchange,
    RecordEncoder,
)
from freshness_pipeline.warehouse.archive.files import (
    OPEN_SUFFIX,
    WARC_SUFFIX,
    check_name_part,
    create_locked,
    fsync_dir,
    new_token,
    new_warc_name,
    remove_abandoned,
    write_all,
)
from freshness_pipeline.warehouse.archive.index import (
    ArchiveIndex,
    IndexEntry,
    cdx_timestamp,
    ensure_indexes,
    index_name_for,
    mime_type,
    resolved_not_modified,
    url_key,
    write_index_lines,
)
from freshness_pipeline.warehouse.archive.records import (
    FETCH_KINDS,
    PROFILE_SERVER_NOT_MODIFIED,
    ArchiveClosedError,
    ArchivedOriginal,
    ArchivedRecord,
    ArchiveWriteError,
    CompletedWarc,
    FetchKind,
    HttpExchange,
    header_value,
    parse_warc_date,
    unchecked,
    warc_date,
)
from freshness_pipeline.warehouse.crashpoints import ENV as CRASH_ENV
from freshness_pipeline.warehouse.crashpoints import crash_point

__all__ = ["ArchiveWriter", "DEFAULT_MAX_FILE_BYTES", "SOFTWARE"]

log = logging.getLogger(__name__)

#: The conventional size of a WARC file; a cycle of one process rarely reaches it.
DEFAULT_MAX_FILE_BYTES = 1024**3


def _software() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:  # pragma: no cover - a checkout without metadata
            return "unknown"

    return f"freshness-pipeline/{of('freshness-pipeline')} (warcio/{of('warcio')})"


SOFTWARE = _software()


class _OpenFile:
    __slots__ = (
        "name",
        "temp",
        "fd",
        "size",
        "end",
        "records",
        "warcinfo_id",
        "name_json",
        "lines",
        "unresolved",
    )

    def __init__(self, name: str, temp: Path, fd: int) -> None:
        self.name = name
        self.temp = temp
        self.fd = fd
        self.size = 0
        self.end = 0  # end of the last whole exchange: where a failed write is cut back to
        self.records: list[ArchivedRecord] = []
        self.warcinfo_id = ""
        self.name_json = _json_str(name)
        # The file's index lines, formatted as its records are written (reading the file back
        # to index it cost more than writing it; a dict and an IndexEntry per record, turned
        # into a line at the end, cost more than the line); and the 304 revisits whose
        # original's line must still be looked up (their own line, the original's URI and
        # WARC date), resolved when the file is complete.
        self.lines: list[bytes] = []
        self.unresolved: list[tuple[IndexEntry, str, str]] = []


def recover_archive(archive_dir: Path) -> list[str]:
    """What a killed writer left, made whole before new writers start: its temporary files
    removed (a live writer's are locked and kept) and every complete file without an index
    indexed (a kill between the rename and the index). Returns what was done, for the log."""
    if not Path(archive_dir).is_dir():
        return []
    done = [f"removed abandoned {name}" for name in remove_abandoned(archive_dir)]
    done += [f"wrote missing index {name}" for name in ensure_indexes(archive_dir)]
    return done


class ArchiveWriter:
    """Writes one cycle's exchanges of one fetch process into ``archive_dir``.

    ``now`` is the cycle's time (timezone-aware): it names the files, goes into each file's
    warcinfo, and is the WARC-Date of an exchange that brings no ``fetched_at`` of its own.
    ``writer`` names the process in the file names (e.g. ``p0``, a bucket group);
    ``max_file_bytes`` rotates to a new file when the next exchange would pass it (None: one
    file per writer). ``warcinfo`` adds fields to each file's warcinfo record.
    ``on_complete`` is called with each :class:`CompletedWarc` as soon as it is durable, in
    the thread that completed it.
    """

    def __init__(
        self,
        archive_dir: Path,
        now: datetime,
        *,
        writer: str = "p0",
        prefix: str = "freshness",
        max_file_bytes: int | None = DEFAULT_MAX_FILE_BYTES,
        compress_level: int = DEFAULT_COMPRESS_LEVEL,
        warcinfo: Mapping[str, str] | None = None,
        on_complete: Callable[[CompletedWarc], None] | None = None,
    ) -> None:
        if now.utcoffset() is None:
            raise ValueError("now must be timezone-aware (the cycle's time in UTC)")
        if max_file_bytes is not None and max_file_bytes < 1:
            raise ValueError(f"max_file_bytes must be positive or None, got {max_file_bytes!r}")
        self.archive_dir = Path(archive_dir)
        self.now = now.astimezone(UTC)
        self.writer = check_name_part(writer, "writer")
        self.prefix = check_name_part(prefix, "prefix")
        self.max_file_bytes = max_file_bytes
        self._encoder = RecordEncoder(compress_level)
        self._extra_info = dict(warcinfo or {})
        self._on_complete = on_complete
        self._token = new_token()
        self._serial = 0
        self._lock = threading.RLock()
        self._file: _OpenFile | None = None
        self._completed: list[CompletedWarc] = []
        self._durable_names: set[str] = set()
        self._state = "open"  # open | closed | aborted | failed
        self._index = ArchiveIndex(self.archive_dir)
        self._cycle_date = warc_date(self.now)
        # the crash tests set FRESHNESS_CRASH_AT before the process starts: without it, the
        # per-record crash point is not even looked up
        self._crash_armed = bool(os.environ.get(CRASH_ENV))
        self.archive_dir.mkdir(parents=True, exist_ok=True)

    # -- context manager ---------------------------------------------------------------------

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # -- state -------------------------------------------------------------------------------

    @property
    def completed(self) -> tuple[CompletedWarc, ...]:
        """The files this writer has completed so far (their records are durable)."""
        with self._lock:
            return tuple(self._completed)

    @property
    def pending(self) -> tuple[ArchivedRecord, ...]:
        """Records written to the current temporary file: not durable yet."""
        with self._lock:
            return tuple(self._file.records) if self._file else ()

    def is_durable(self, record: ArchivedRecord) -> bool:
        """True once the file ``record`` is in has been completed by this writer."""
        with self._lock:
            return record.warc_filename in self._durable_names

    # -- writing -----------------------------------------------------------------------------

    def write_exchange(
        self,
        exchange: HttpExchange,
        *,
        previous: ArchivedOriginal | None = None,
        kind: FetchKind = "page",
    ) -> ArchivedRecord:
        """Archive one exchange that went on the wire: its request record and either a response
        (with the body) or a revisit (headers only).

        A 304 becomes a server-not-modified revisit of ``previous`` (the URL's last archived
        original, if known); a complete 200 whose payload digest equals ``previous``'s an
        identical-payload-digest revisit; everything else a response. ``kind`` tells pages
        from robots.txt, sitemap and feed fetches. Returns where the record went; the location
        becomes durable when its file is complete (see the module docstring).

        Raises ValueError for a bad argument (nothing written, the writer goes on),
        ArchiveClosedError after close/abort/failure, ArchiveWriteError when the file system
        refuses the write.
        """
        if kind not in FETCH_KINDS:
            raise ValueError(f"kind must be one of {FETCH_KINDS}, got {kind!r}")
        if previous is not None and not isinstance(previous, ArchivedOriginal):
            raise ValueError(
                f"previous must be an ArchivedOriginal or None, got {type(previous).__name__}"
            )
        if not isinstance(exchange, HttpExchange):
            raise ValueError(f"exchange must be an HttpExchange, got {type(exchange).__name__}")
        date = (
            warc_date(exchange.fetched_at) if exchange.fetched_at is not None else self._cycle_date
        )
        with self._lock:
            self._check_open()
            if self._file is None:
                self._open_file()
            assert self._file is not None
            warcinfo_id = self._file.warcinfo_id
        # Built and compressed outside the lock: ISA-L's deflate and sha1 release the GIL, so
        # threads that share the writer compress in parallel; only the append is serialized.
        encoded = self._encoder.exchange(
            exchange, date=date, kind=kind, warcinfo_id=warcinfo_id, previous=previous
        )
        with self._lock:
            self._check_open()
            if self._file is None:
                self._open_file()
            assert self._file is not None
            size = len(encoded.main) + len(encoded.request)
            if (
                self.max_file_bytes is not None
                and self._file.records
                and self._file.size + size > self.max_file_bytes
            ):
                self._complete_current()
                self._open_file()
                assert self._file is not None
            if encoded.warcinfo_id != self._file.warcinfo_id:
                # The file changed (a rotation, here or in another thread): the records must
                # name their own file's warcinfo.
                encoded = self._encoder.exchange(
                    exchange,
                    date=date,
                    kind=kind,
                    warcinfo_id=self._file.warcinfo_id,
                    previous=previous,
                )
                size = len(encoded.main) + len(encoded.request)
            current = self._file
            offset = current.size
            try:
                # both records in one system call; a failure cuts the file back to its last
                # whole exchange, so a partial write of either is never kept
                write_all(current.fd, encoded.main + encoded.request)
            except OSError as exc:
                raise self._fail(exc, exchange.url) from exc
            current.size += size
            current.end = current.size
            if self._crash_armed:
                crash_point("archive:record_written")
            record_date = parse_warc_date(date)
            url = exchange.url
            known = previous is not None and previous.target_uri == url
            key = (previous.urlkey if known and previous is not None else None) or url_key(url)
            main_length = len(encoded.main)
            is_response = encoded.record_type == "response"
            if is_response:
                mime = mime_type(header_value(exchange.response_pairs, "Content-Type"))
                # every value made here by the writer (record id, digest, location): the
                # dataclass's checks of them are skipped
                original: ArchivedOriginal | None = unchecked(
                    ArchivedOriginal,
                    target_uri=url,
                    date=record_date,
                    record_id=encoded.record_id,
                    payload_digest=encoded.payload_digest or "",
                    warc_filename=current.name,
                    warc_offset=offset,
                    warc_length=main_length,
                    mime=mime,
                    status=exchange.status,
                    urlkey=key,
                )
            else:
                mime = None
                original = previous
                if previous is not None and previous.urlkey is None and known:
                    original = dataclasses.replace(previous, urlkey=key)
            line = self._index_line(current, exchange, encoded, key, mime, offset, kind, previous)
            if line is not None:
                current.lines.append(line)
            record = unchecked(
                ArchivedRecord,
                warc_filename=current.name,
                warc_offset=offset,
                warc_length=main_length,
                payload_digest=encoded.payload_digest,
                record_type="response" if is_response else "revisit",
                record_id=encoded.record_id,
                warc_date=record_date,
                target_uri=url,
                kind=kind,
                request_offset=offset + main_length,
                request_length=len(encoded.request),
                profile=encoded.profile,
                truncated=exchange.truncated is not None and is_response,
                original=original,
            )
            current.records.append(record)
            return record

    def write_unanswered_request(
        self,
        url: str,
        request_headers: Iterable[tuple[str | bytes, str | bytes]],
        *,
        kind: FetchKind = "page",
        fetched_at: datetime | None = None,
        http_version: str = "1.1",
    ) -> ArchivedRecord:
        """Archive a request that went on the wire and got no answer to archive (a timeout or a
        reset before the headers, a head the client refused): its request record alone, so
        that every request sent has its record. It is not indexed (a replay has nothing to
        show for it) and is no URL's original.

        Raises as ``write_exchange`` does.
        """
        if kind not in FETCH_KINDS:
            raise ValueError(f"kind must be one of {FETCH_KINDS}, got {kind!r}")
        # the exchange's own checks of the URL, the headers, the version and the time
        checked = HttpExchange(
            url=url,
            status=200,
            request_headers=tuple(request_headers),
            http_version=http_version,
            fetched_at=fetched_at,
        )
        date = warc_date(fetched_at) if fetched_at is not None else self._cycle_date

        def encoded(warcinfo_id: str) -> tuple[bytes, str]:
            return self._encoder.unanswered_request(
                url,
                checked.request_pairs,
                date=date,
                kind=kind,
                warcinfo_id=warcinfo_id,
                http_version=http_version,
            )

        with self._lock:
            self._check_open()
            if self._file is None:
                self._open_file()
            assert self._file is not None
            member, record_id = encoded(self._file.warcinfo_id)
            if (
                self.max_file_bytes is not None
                and self._file.records
                and self._file.size + len(member) > self.max_file_bytes
            ):
                self._complete_current()
                self._open_file()
                assert self._file is not None
                member, record_id = encoded(self._file.warcinfo_id)  # the new file's warcinfo
            current = self._file
            offset = current.size
            try:
                write_all(current.fd, member)
            except OSError as exc:
                raise self._fail(exc, url) from exc
            current.size += len(member)
            current.end = current.size
            record = unchecked(
                ArchivedRecord,
                warc_filename=current.name,
                warc_offset=offset,
                warc_length=len(member),
                payload_digest=None,
                record_type="request",
                record_id=record_id,
                warc_date=parse_warc_date(date),
                target_uri=url,
                kind=kind,
                request_offset=offset,
                request_length=len(member),
                profile=None,
                truncated=False,
                original=None,
            )
            current.records.append(record)
            return record

    @staticmethod
    def _index_line(
        current: _OpenFile,
        exchange: HttpExchange,
        encoded: EncodedExchange,
        key: str,
        mime: str | None,
        offset: int,
        kind: FetchKind,
        previous: ArchivedOriginal | None,
    ) -> bytes | None:
        """The record's CDXJ line, as the index would read it back (``IndexEntry.line``,
        formatted directly): a 304 revisit's line points at its original when the original's
        place and kind are known (see index.py). None when it is not: the revisit's line is
        then kept in ``current.unresolved``, to be looked up when the file is complete."""
        j = _json_str
        stamp = cdx_timestamp(encoded.date)
        tail = f', "kind": {j(kind)}}}\n' if kind != "page" else "}\n"
        length = len(encoded.main)
        if encoded.profile == PROFILE_SERVER_NOT_MODIFIED and previous is not None:
            # previous.location's fields, without making the RecordLocation
            filename, at = previous.warc_filename, previous.warc_offset
            if (
                filename is not None
                and at is not None
                and previous.warc_length is not None
                and previous.status is not None
            ):
                # resolved_not_modified's line: the original's place, then the revisit's own
                mime_field = f'"mime": {j(previous.mime)}, ' if previous.mime else ""
                return (
                    f'{key} {stamp} {{"url": {j(exchange.url)}, {mime_field}'
                    f'"status": "{previous.status}", "digest": {j(previous.payload_digest)}, '
                    f'"length": "{previous.warc_length}", "offset": "{at}", '
                    f'"filename": {j(filename)}, '
                    f'"revisit_filename": {current.name_json}, '
                    f'"revisit_offset": "{offset}", "revisit_length": "{length}"{tail}'
                ).encode()
        if encoded.record_type == "response":
            mime_field = f', "mime": {j(mime)}' if mime else ""
        else:
            mime_field = ', "mime": "warc/revisit"'
        digest = encoded.payload_digest
        digest_field = f', "digest": {j(digest)}' if digest else ""
        line = (
            f'{key} {stamp} {{"url": {j(exchange.url)}{mime_field}, "status": "{exchange.status}"'
            f'{digest_field}, "length": "{length}", "offset": "{offset}", '
            f'"filename": {current.name_json}{tail}'
        ).encode()
        if encoded.profile == PROFILE_SERVER_NOT_MODIFIED and previous is not None:
            current.unresolved.append(
                (IndexEntry.parse(line), previous.target_uri, warc_date(previous.date))
            )
            return None
        return line

    def _index_entries(self, current: _OpenFile) -> list[bytes]:
        """The file's lines, with the 304 revisits whose original was not described looked up
        in the archive's index (the original may be in any earlier file)."""
        lines = list(current.lines)
        if not current.unresolved:
            return lines
        # Where the revisits in this file said their originals are: a hint of the index file
        # to search first.
        hints = {
            f"{r.original.target_uri} {warc_date(r.original.date)}": r.original.warc_filename
            for r in current.records
            if r.record_type == "revisit" and r.original is not None and r.original.warc_filename
        }
        own = [IndexEntry.parse(line) for line in lines]
        own += [entry for entry, _, _ in current.unresolved]
        for entry, uri, date in current.unresolved:
            hint = hints.get(f"{uri} {date}")
            prefer = [index_name_for(hint)] if hint and hint.endswith(WARC_SUFFIX) else []
            candidates = self._index.find_original(
                uri, date, entry.fields.get("digest"), prefer=prefer, extra=own
            )
            exact = [c for c in candidates if c.timestamp == cdx_timestamp(date)]
            if exact:
                entry = resolved_not_modified(entry, exact[0])
            else:
                log.warning(
                    "archive: the original of the 304 revisit of %s at %s is not in the index; "
                    "pywb will replay that time as an empty 304",
                    uri,
                    entry.timestamp,
                )
            lines.append(entry.line())
        return lines

    def close(self) -> tuple[CompletedWarc, ...]:
        """Complete the current file (fsync, rename, folder fsync, index) and take no more records.

        Returns every file this writer completed. After it returns, every location it handed
        out is durable. Closing twice is harmless; closing after abort or failure returns what
        was completed before.
        """
        with self._lock:
            if self._state == "open":
                try:
                    if self._file is not None:
                        self._complete_current()
                finally:
                    if self._state == "open":
                        self._state = "closed"
            return tuple(self._completed)

    def abort(self) -> None:
        """The cycle failed: delete the temporary file, rename nothing, take no more records.

        Files completed earlier by a size rotation stay (they are whole and may already have
        rows pointing in); their names are in ``completed``.
        """
        with self._lock:
            if self._state != "open":
                return
            self._state = "aborted"
            self._discard_current()

    # -- internals ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state != "open":
            raise ArchiveClosedError(
                f"the archive writer is {self._state}; it takes no more records"
            )

    def _open_file(self) -> None:
        for _ in range(10):
            self._serial += 1
            name = new_warc_name(self.prefix, self.now, self.writer, self._token, self._serial)
            temp = self.archive_dir / (name + OPEN_SUFFIX)
            try:
                fd = create_locked(temp)
            except FileExistsError:
                continue
            except OSError as exc:
                raise ArchiveWriteError(f"cannot create {temp}: {exc}") from exc
            if fd is not None:
                break
        else:  # pragma: no cover - ten collisions of a random token
            raise ArchiveWriteError(f"could not create a new WARC file in {self.archive_dir}")
        current = _OpenFile(name, temp, fd)
        info = {
            "software": SOFTWARE,
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
            "cycle": self._cycle_date,
            "writer": self.writer,
            "hostname": platform.node(),
            **self._extra_info,
        }
        member, warcinfo_id = self._encoder.warcinfo(name, warc_date(datetime.now(UTC)), info)
        current.warcinfo_id = warcinfo_id
        try:
            write_all(fd, member)
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temp)
            self._state = "failed"
            raise ArchiveWriteError(
                f"cannot start {temp}: {exc}; nothing was archived in it"
            ) from exc
        current.size = current.end = len(member)
        self._file = current

    def _complete_current(self) -> CompletedWarc:
        """fsync, rename, fsync the folder, then index. The lock on the temporary file is held
        until after the rename, so no cleaner can take the file for abandoned in between."""
        current = self._file
        assert current is not None
        self._file = None
        final = self.archive_dir / current.name
        try:
            try:
                os.fsync(current.fd)
                os.rename(current.temp, final)
            finally:
                os.close(current.fd)
            fsync_dir(self.archive_dir)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(current.temp)
            self._state = "failed"
            raise ArchiveWriteError(
                f"completing {current.name} failed ({exc}); its {len(current.records)} exchanges "
                "are not archived"
            ) from exc
        self._durable_names.add(current.name)
        crash_point("archive:renamed")
        index_name: str | None = None
        try:
            index_name = write_index_lines(
                self.archive_dir, current.name, self._index_entries(current)
            )
        except Exception as exc:
            log.error(
                "archive: %s is complete but its index could not be written (%s); "
                "ensure_indexes() will write it",
                current.name,
                exc,
            )
        done = CompletedWarc(current.name, current.size, tuple(current.records), index_name)
        self._completed.append(done)
        if self._on_complete is not None:
            self._on_complete(done)
        return done

    def _discard_current(self) -> None:
        current = self._file
        self._file = None
        if current is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(current.temp)
        with contextlib.suppress(OSError):
            os.close(current.fd)

    def _fail(self, exc: OSError, url: str) -> ArchiveWriteError:
        """A write was refused: keep the whole exchanges written before it, take no more."""
        current = self._file
        assert current is not None
        self._state = "failed"
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        if exc.errno == errno.EFBIG:
            reason += " (the file size limit)"
        saved: CompletedWarc | None = None
        detail = "nothing was archived in it"
        if current.records:
            try:
                os.ftruncate(current.fd, current.end)
                current.size = current.end
                self._state = "open"  # _complete_current sets "failed" itself if it fails
                saved = self._complete_current()
                detail = f"it was completed with the {len(current.records)} exchanges before ({current.name})"
            except (OSError, ArchiveWriteError) as second:
                detail = f"completing it with the exchanges before failed too ({second}); none of it was kept"
                self._discard_current()
            finally:
                self._state = "failed"
        else:
            self._discard_current()
        return ArchiveWriteError(
            f"archiving {url} failed: writing {current.temp.name} was refused: {reason}; {detail}; "
            "the writer takes no more records",
            saved=saved,
        )
