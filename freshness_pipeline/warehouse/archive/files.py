"""Where the archive lives on disk, how its files are named, and the file-system steps that make
a file appear whole or not at all.

A WARC file is written under a temporary name (``*.warc.gz.open``) while an exclusive
``flock`` is held on it, and only renamed to ``*.warc.gz`` after its data is fsynced; the
folder is fsynced after the rename so the new name survives a power cut. So a reader that
lists ``*.warc.gz`` sees only whole files, and a ``.open`` file whose lock can be taken belongs
to a writer that died (the kernel drops the lock with the process).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "ARCHIVE_DIRNAME",
    "INDEX_SUFFIX",
    "OPEN_SUFFIX",
    "WARC_SUFFIX",
    "archive_dir_for",
    "atomic_write_bytes",
    "fsync_dir",
    "index_name_for",
    "list_warcs",
    "new_warc_name",
    "remove_abandoned",
]

ARCHIVE_DIRNAME = "archive"
WARC_SUFFIX = ".warc.gz"
OPEN_SUFFIX = ".open"
INDEX_SUFFIX = ".cdxj"
_NAME_PART_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.]{0,39}$")


def archive_dir_for(home: Path) -> Path:
    """``<home>/archive``: the folder the WARC files and their CDXJ indexes share."""
    return Path(home) / ARCHIVE_DIRNAME


def check_name_part(name: str, what: str) -> str:
    if not _NAME_PART_RE.match(name):
        raise ValueError(
            f"{what} must be 1-40 letters, digits, '_' or '.', starting with a letter or digit; "
            f"got {name!r}"
        )
    return name


def new_warc_name(prefix: str, cycle: datetime, writer: str, token: str, serial: int) -> str:
    """``<prefix>-<cycle UTC, 14 digits>-<serial>-<writer>-<token>.warc.gz``.

    The cycle time first so a listing sorts by cycle, the writer (the fetch process) and a
    random token so processes, retries and reruns of one cycle never pick the same name, the
    serial for the files one writer rotates through.
    """
    stamp = cycle.astimezone(UTC).strftime("%Y%m%d%H%M%S")
    return f"{prefix}-{stamp}-{serial:05d}-{writer}-{token}{WARC_SUFFIX}"


def new_token() -> str:
    return uuid.uuid4().hex[:10]


def index_name_for(warc_filename: str) -> str:
    """The CDXJ index beside a WARC: ``x.warc.gz`` -> ``x.cdxj``."""
    if not warc_filename.endswith(WARC_SUFFIX):
        raise ValueError(f"not a {WARC_SUFFIX} file name: {warc_filename!r}")
    return warc_filename[: -len(WARC_SUFFIX)] + INDEX_SUFFIX


def warc_name_for_index(index_filename: str) -> str:
    if not index_filename.endswith(INDEX_SUFFIX):
        raise ValueError(f"not a {INDEX_SUFFIX} file name: {index_filename!r}")
    return index_filename[: -len(INDEX_SUFFIX)] + WARC_SUFFIX


def list_warcs(archive_dir: Path) -> list[str]:
    """The complete WARC files in the archive folder, by name (so by cycle)."""
    try:
        names = os.listdir(archive_dir)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.endswith(WARC_SUFFIX))


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write until all is written; a short write followed by an error raises that error."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # pragma: no cover - os.write raises rather than return 0 on files
            raise OSError(errno.EIO, "write returned 0")
        view = view[written:]


def create_locked(path: Path) -> int | None:
    """Create ``path`` (it must not exist) and hold its lock; None if a cleaner got in between.

    Creating and locking are two steps, so ``remove_abandoned`` running in another process may
    lock and delete the file in between; then the path no longer names our file and the caller
    picks another name.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        if try_lock(fd):
            with contextlib.suppress(FileNotFoundError):
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    return fd
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def create_temp_beside(path: Path) -> tuple[Path, int]:
    """A new locked temporary file next to ``path``: ``<name>.<token>.open``."""
    for _ in range(10):
        temp = path.with_name(f"{path.name}.{new_token()}{OPEN_SUFFIX}")
        fd = create_locked(temp)
        if fd is not None:
            return temp, fd
    raise OSError(errno.EAGAIN, f"could not create a temporary file beside {path}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``path`` as a whole or not at all: temporary file, fsync, rename, folder fsync."""
    temp, fd = create_temp_beside(path)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    fsync_dir(path.parent)


def try_lock(fd: int) -> bool:
    """Take the writer's exclusive lock without waiting; False when another process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _open_files(archive_dir: Path) -> Iterator[Path]:
    try:
        names = os.listdir(archive_dir)
    except FileNotFoundError:
        return
    for name in sorted(names):
        if name.endswith(OPEN_SUFFIX):
            yield archive_dir / name


def remove_abandoned(archive_dir: Path) -> list[str]:
    """Delete the temporary files of writers that died (a kill -9, a power cut); return their names.

    Every temporary file (a WARC being written, an index being replaced) is locked by its
    writer for as long as it is in use, so one whose lock can be taken is abandoned; a live
    writer's file is left alone, which makes this safe to run while other fetch processes
    write. No table row can point into an abandoned file: the writer hands out a location as
    durable only after the rename.
    """
    removed: list[str] = []
    for path in _open_files(archive_dir):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            if try_lock(fd):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                removed.append(path.name)
        finally:
            os.close(fd)
    if removed:
        fsync_dir(archive_dir)
    return removed
