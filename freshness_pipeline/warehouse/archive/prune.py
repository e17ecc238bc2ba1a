"""Retention: remove whole expired WARC files without breaking a revisit that is kept.

A revisit record holds no body: replay takes the body from the original it refers to, so an
expired file cannot simply go if a kept revisit refers into it. Pruning is two steps, because
the caller's tables point into the files too:

1. :func:`prepare_prune` finds the files whose cycle is before the cut-off and the originals in
   them that kept revisits refer to; it copies those records, byte for byte (same record id,
   same WARC-Date, same digest), into a new complete file ``*-retained-*.warc.gz`` with its
   own index, rewrites the kept index lines that pointed into the expired files, and deletes
   nothing. The returned plan says where every carried record is now.
2. The caller moves its table rows off the expired files (``PrunePlan.relocate`` for a URL's
   kept original; rows of records in expired files lose their location).
3. :func:`commit_prune` deletes the expired files, each index before its WARC.

Every step leaves the archive consistent, so a crash anywhere only means running it again:
an original already carried into a kept file is found there through the index and not
copied twice. A retained file's cycle is the cut-off it was made for, so it stays until a
later cut-off passes it, when what is still referred to in it is carried over again.
Files without this writer's warcinfo (``cycle``) are not touched.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from freshness_pipeline.warehouse.archive.encoding import RecordEncoder
from freshness_pipeline.warehouse.archive.files import (
    OPEN_SUFFIX,
    create_locked,
    fsync_dir,
    index_name_for,
    list_warcs,
    new_token,
    new_warc_name,
    warc_name_for_index,
    write_all,
)
from freshness_pipeline.warehouse.archive.index import (
    ArchiveIndex,
    IndexEntry,
    cdx_timestamp,
    ensure_indexes,
    index_warc,
    url_key,
    write_index,
)
from freshness_pipeline.warehouse.archive.reader import iter_records, read_record
from freshness_pipeline.warehouse.archive.records import (
    ArchivedOriginal,
    ArchiveFormatError,
    RecordLocation,
    parse_warc_date,
    warc_date,
)
from freshness_pipeline.warehouse.archive.writer import SOFTWARE
from freshness_pipeline.warehouse.crashpoints import crash_point

__all__ = ["PrunePlan", "commit_prune", "file_cycle", "prepare_prune", "prune_archive"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrunePlan:
    """What :func:`prepare_prune` did and what :func:`commit_prune` will delete.

    ``expired``: the WARC files to delete. ``relocated``: (old file, old offset) -> where each
    original that kept revisits refer to is now (a copy in ``retained_file``, or one made by an
    earlier prune). ``skipped``: files left alone and why.
    """

    archive_dir: Path
    expire_before: datetime
    expired: tuple[str, ...] = ()
    retained_file: str | None = None
    relocated: Mapping[tuple[str, int], RecordLocation] = field(default_factory=dict)
    rewritten_indexes: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()

    def relocate(self, original: ArchivedOriginal) -> ArchivedOriginal | None:
        """A URL's kept original after the prune: unchanged if its file stays, moved if it was
        carried over, None if it goes (the URL's next body must be archived in full again)."""
        if original.warc_filename is None or original.warc_offset is None:
            return original
        if original.warc_filename not in self.expired:
            return original
        moved = self.relocated.get((original.warc_filename, original.warc_offset))
        return original.relocated(moved) if moved is not None else None

    def is_removed(self, warc_filename: str) -> bool:
        return warc_filename in self.expired


def warcinfo_fields(archive_dir: Path, warc_filename: str) -> dict[str, str]:
    """The fields of the warcinfo record a WARC file opens with."""
    record = read_record(archive_dir, warc_filename, 0)
    if record.record_type != "warcinfo":
        raise ArchiveFormatError(f"{warc_filename} does not start with a warcinfo record")
    fields: dict[str, str] = {}
    for line in record.payload.decode("utf-8", "replace").splitlines():
        name, colon, value = line.partition(":")
        if colon:
            fields[name.strip()] = value.strip()
    return fields


def file_cycle(archive_dir: Path, warc_filename: str) -> datetime:
    """The cycle a WARC file belongs to, from the ``cycle`` field of its warcinfo record."""
    value = warcinfo_fields(archive_dir, warc_filename).get("cycle")
    if not value:
        raise ArchiveFormatError(f"the warcinfo of {warc_filename} names no cycle")
    return parse_warc_date(value)


@dataclass(frozen=True)
class _Reference:
    record_id: str | None
    uri: str
    date: str | None
    digest: str | None


def _revisit_locations(entries: Iterable[IndexEntry]) -> list[tuple[str, int, int]]:
    found = []
    for entry in entries:
        if entry.is_resolved_revisit:
            found.append(
                (
                    entry.fields["revisit_filename"],
                    int(entry.fields["revisit_offset"]),
                    int(entry.fields["revisit_length"]),
                )
            )
        elif entry.is_revisit:
            found.append((entry.filename, entry.offset, entry.length))
    return found


def prepare_prune(
    archive_dir: Path, *, expire_before: datetime, prefix: str = "freshness"
) -> PrunePlan:
    """Step 1 of a prune (see the module docstring): carry what kept revisits need, delete nothing."""
    if expire_before.utcoffset() is None:
        raise ValueError("expire_before must be timezone-aware (UTC)")
    archive_dir = Path(archive_dir)
    ensure_indexes(archive_dir)
    index = ArchiveIndex(archive_dir)
    skipped: list[tuple[str, str]] = []
    expired: list[str] = []
    kept: list[str] = []
    retained_before: list[str] = []  # kept files an earlier prune carried originals into
    for name in list_warcs(archive_dir):
        try:
            info = warcinfo_fields(archive_dir, name)
            if not info.get("cycle"):
                raise ArchiveFormatError(f"the warcinfo of {name} names no cycle")
            cycle = parse_warc_date(info["cycle"])
        except (ArchiveFormatError, OSError) as exc:
            skipped.append((name, str(exc)))
            continue
        if cycle < expire_before:
            expired.append(name)
        else:
            kept.append(name)
            if "retainedFrom" in info:
                retained_before.append(index_name_for(name))
    if not expired:
        return PrunePlan(archive_dir, expire_before, skipped=tuple(skipped))
    expired_set = set(expired)
    kept_indexes = [index_name_for(n) for n in kept if (archive_dir / index_name_for(n)).exists()]

    # What the kept revisits refer to.
    references: dict[tuple[str | None, str, str | None, str | None], _Reference] = {}
    for index_name in kept_indexes:
        for filename, offset, length in _revisit_locations(index.entries(index_name)):
            try:
                revisit = read_record(archive_dir, filename, offset, length)
            except (ArchiveFormatError, OSError) as exc:
                skipped.append((filename, f"revisit at {offset} unreadable: {exc}"))
                continue
            uri = revisit.header("WARC-Refers-To-Target-URI") or revisit.target_uri
            if not uri:
                continue
            ref = _Reference(
                revisit.header("WARC-Refers-To"),
                uri,
                revisit.header("WARC-Refers-To-Date"),
                revisit.header("WARC-Payload-Digest"),
            )
            references[(ref.record_id, ref.uri, ref.date, ref.digest)] = ref
    if not references:
        return PrunePlan(archive_dir, expire_before, expired=tuple(expired), skipped=tuple(skipped))

    # The response records of the expired files, one pass over each. A record can be there
    # twice, byte for byte: in its own file and in a retained file an interrupted prune made
    # (both expired once a later cut-off passes that one); rows may point at either copy, so
    # every copy is moved to wherever the one carried goes.
    by_id: dict[str, RecordLocation] = {}
    copies: dict[str, list[RecordLocation]] = {}
    id_at: dict[tuple[str, int], str] = {}
    by_capture: dict[tuple[str, str, str | None], RecordLocation] = {}
    newest: dict[str, tuple[str, RecordLocation]] = {}
    for name in expired:
        for record in iter_records(archive_dir / name, payloads=False):
            if record.record_type != "response" or not record.target_uri:
                continue
            location = record.location
            key = url_key(record.target_uri)
            stamp = cdx_timestamp(record.header("WARC-Date") or "")
            if record.record_id:
                by_id[record.record_id] = location
                copies.setdefault(record.record_id, []).append(location)
                id_at[(location.warc_filename, location.warc_offset)] = record.record_id
            by_capture[(key, stamp, record.header("WARC-Payload-Digest"))] = location
            if key not in newest or newest[key][0] < stamp:
                newest[key] = (stamp, location)

    def in_expired(ref: _Reference) -> RecordLocation | None:
        if ref.record_id is not None:
            return by_id.get(ref.record_id)
        key = url_key(ref.uri)
        if ref.date is not None:
            return by_capture.get((key, cdx_timestamp(ref.date), ref.digest))
        return newest[key][1] if key in newest else None  # a 304 that named no capture

    # Where each referred original is: already copied into a kept file by an earlier prune
    # (a crash before that prune's commit), or to be carried out of its expired file now.
    relocated: dict[tuple[str, int], RecordLocation] = {}
    copying: dict[tuple[str, int], RecordLocation] = {}
    for ref in references.values():
        found = in_expired(ref)
        if found is None:
            continue
        where = (found.warc_filename, found.warc_offset)
        if where in relocated or where in copying:
            continue
        earlier = (
            _find_in(index, archive_dir, ref, among=retained_before) if retained_before else None
        )
        if earlier is not None:
            relocated[where] = earlier
        else:
            copying[where] = found
    to_copy: list[tuple[RecordLocation, bytes]] = []
    for found in sorted(copying.values(), key=lambda loc: (loc.warc_filename, loc.warc_offset)):
        with open(archive_dir / found.warc_filename, "rb") as fh:
            fh.seek(found.warc_offset)
            to_copy.append((found, fh.read(found.warc_length)))

    retained_file: str | None = None
    if to_copy:
        retained_file, new_offsets = _write_retained(
            archive_dir, prefix, expire_before, expired, to_copy
        )
        for (old, member), new_offset in zip(to_copy, new_offsets, strict=True):
            relocated[(old.warc_filename, old.warc_offset)] = RecordLocation(
                retained_file, new_offset, len(member)
            )
        write_index(archive_dir, retained_file, index_warc(archive_dir, retained_file, index=index))
    for where, carried_to in list(relocated.items()):
        for twin in copies.get(id_at.get(where, ""), ()):
            relocated.setdefault((twin.warc_filename, twin.warc_offset), carried_to)

    # Kept index lines that point into expired files (304 revisits resolved to their original).
    rewritten: list[str] = []
    for index_name in kept_indexes + ([index_name_for(retained_file)] if retained_file else []):
        entries = index.entries(index_name)
        changed = False
        new_entries: list[IndexEntry] = []
        for entry in entries:
            if entry.filename in expired_set:
                changed = True
                moved = relocated.get((entry.filename, entry.offset))
                if moved is not None:
                    fields = dict(entry.fields)
                    fields.update(
                        filename=moved.warc_filename,
                        offset=str(moved.warc_offset),
                        length=str(moved.warc_length),
                    )
                    new_entries.append(IndexEntry(entry.urlkey, entry.timestamp, fields))
                elif entry.is_resolved_revisit:  # back to the revisit's own, unresolved line
                    new_entries.append(_unresolved(entry))
                continue
            new_entries.append(entry)
        if changed:
            write_index(archive_dir, warc_name_for_index(index_name), new_entries)
            rewritten.append(index_name)
    return PrunePlan(
        archive_dir,
        expire_before,
        expired=tuple(expired),
        retained_file=retained_file,
        relocated=relocated,
        rewritten_indexes=tuple(rewritten),
        skipped=tuple(skipped),
    )


def _unresolved(entry: IndexEntry) -> IndexEntry:
    fields = {
        "url": entry.fields["url"],
        "mime": "warc/revisit",
        "status": "304",
        "length": entry.fields["revisit_length"],
        "offset": entry.fields["revisit_offset"],
        "filename": entry.fields["revisit_filename"],
    }
    if "kind" in entry.fields:
        fields["kind"] = entry.fields["kind"]
    return IndexEntry(entry.urlkey, entry.timestamp, fields)


def _find_in(
    index: ArchiveIndex, archive_dir: Path, ref: _Reference, *, among: list[str]
) -> RecordLocation | None:
    """The location of the response record ``ref`` names, searched in the given index files."""
    for entry in index.find_original(ref.uri, ref.date, ref.digest, among=among):
        if ref.date is not None and entry.timestamp != cdx_timestamp(ref.date):
            continue
        if ref.record_id is not None:
            try:
                record = read_record(archive_dir, entry.filename, entry.offset, entry.length)
            except (ArchiveFormatError, OSError):
                continue
            if record.record_id != ref.record_id:
                continue
        return RecordLocation(entry.filename, entry.offset, entry.length)
    return None


def _write_retained(
    archive_dir: Path,
    prefix: str,
    cycle: datetime,
    expired: list[str],
    members: list[tuple[RecordLocation, bytes]],
) -> tuple[str, list[int]]:
    """A new complete WARC of verbatim record members, written like the writer writes files."""
    encoder = RecordEncoder()
    name = new_warc_name(prefix, cycle, "retained", new_token(), 1)
    temp = archive_dir / (name + OPEN_SUFFIX)
    fd = create_locked(temp)
    if fd is None:  # pragma: no cover - a cleaner raced a brand-new random name
        raise OSError(f"could not create {temp}")
    try:
        info = {
            "software": SOFTWARE,
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
            "cycle": warc_date(cycle),
            "description": "originals carried out of expired files because kept revisits refer to them",
            "retainedFrom": " ".join(sorted({m[0].warc_filename for m in members})),
        }
        member, _ = encoder.warcinfo(name, warc_date(datetime.now(UTC)), info)
        write_all(fd, member)
        offsets: list[int] = []
        position = len(member)
        for _location, data in members:
            offsets.append(position)
            write_all(fd, data)
            position += len(data)
        os.fsync(fd)
        os.rename(temp, archive_dir / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    finally:
        os.close(fd)
    fsync_dir(archive_dir)
    log.info(
        "archive: carried %d originals out of %d expired files into %s",
        len(members),
        len(expired),
        name,
    )
    return name, offsets


def commit_prune(plan: PrunePlan) -> tuple[str, ...]:
    """Step 3: delete the expired WARC files (each index first, so no index line ever points at
    a missing file). Returns the WARC files deleted."""
    removed: list[str] = []
    for name in plan.expired:
        (plan.archive_dir / index_name_for(name)).unlink(missing_ok=True)
        (plan.archive_dir / name).unlink(missing_ok=True)
        removed.append(name)
        crash_point("prune:warc_removed")
    if removed:
        fsync_dir(plan.archive_dir)
    return tuple(removed)


def prune_archive(archive_dir: Path, *, expire_before: datetime) -> PrunePlan:
    """Both steps at once, for an archive no table points into (or whose tables are rebuilt)."""
    plan = prepare_prune(archive_dir, expire_before=expire_before)
    commit_prune(plan)
    return plan
