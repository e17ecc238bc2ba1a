"""Where a table's rows live: one folder per host under the table's folder, named by its
escaped host key, holding one ``data.parquet`` (a history table: one file per cycle). Naming,
finding and scanning those files is here, so that every reader names them the same way."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

import polars as pl

__all__ = [
    "PARTITION_FILE",
    "SCHEMA_DIR",
    "escape_host_key",
    "unescape_host_key",
    "file_identity",
    "host_folder",
    "read_file",
    "scan_files",
]

_SAFE_KEY_CHARS = re.compile(r"[^a-z0-9.\-_:\[\]]")
# The longest folder name most file systems take (255 bytes) less "host=". The views read
# ``host`` from the folder name (hive partitioning), so a key must reach it whole: every key of
# up to 250 characters does; only a DNS name over 245 characters with a port, or over 250
# without, is cut (and shows cut in the views).
_MAX_KEY_LEN = 250
#: the folder key of the empty host (a URL without one): a lone "%", which no escaped key is
#: (every "%" of one starts a byte's code), so that it collides with no host's, NUL's included
_EMPTY_KEY = "%"
# '%' alone never appears in an escaped key (escapes are always %XX), so no host can collide.
SCHEMA_DIR = "host=%schema"
#: the one file of a host in a table that is not a history (tables.HISTORY_TABLES)
PARTITION_FILE = "data.parquet"


def escape_host_key(host: str) -> str:
    """A folder name for a host key that cannot leave its folder or collide with another key.

    Everything outside a conservative set is percent-encoded (so ``/``, ``\\``, NUL and ``%``
    itself are), a leading dot is encoded (no ``.`` or ``..``), and very long keys are cut and
    suffixed with a hash of the whole key.
    """
    key = host.lower()
    escaped = _SAFE_KEY_CHARS.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode()), key)
    if escaped.startswith("."):
        escaped = "%2E" + escaped[1:]
    if not escaped:
        escaped = _EMPTY_KEY
    if len(escaped) > _MAX_KEY_LEN:
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        escaped = f"{escaped[: _MAX_KEY_LEN - 17]}~{digest}"
    return escaped


def unescape_host_key(key: str) -> str:
    """The host key behind a folder key of :func:`escape_host_key` (not a cut one, which needs
    its file's ``host`` column)."""
    return "" if key == _EMPTY_KEY else unquote(key)


@functools.lru_cache(maxsize=1 << 16)
def host_folder(host: str) -> str:
    """The folder name of a host in every table; the same keys are escaped again for each
    table and step of a cycle."""
    return f"host={escape_host_key(host)}"


def file_identity(path: str) -> tuple[int, int, int] | None:
    """Inode, modification time and size of ``path``, None if it is gone: a file replaced
    by anyone is a new file (another inode), whatever it holds."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


def scan_files(
    files: Sequence[str | os.PathLike[str]] | str | os.PathLike[str], **options: Any
) -> pl.LazyFrame:
    """``pl.scan_parquet`` of warehouse files named one by one, never as glob patterns: a host
    key keeps ``[`` and ``]`` (an IPv6 literal, ``[::1]:8080``), which polars would otherwise
    read as a character class, matching nothing, so that host's rows were silently left out
    of a multi-file read."""
    named = (
        [os.fspath(files)]
        if isinstance(files, str | os.PathLike)
        else [os.fspath(f) for f in files]
    )
    return pl.scan_parquet(named, glob=False, **options)


def read_file(path: str | os.PathLike[str]) -> pl.DataFrame:
    """One warehouse file (see :func:`scan_files` for why not ``pl.read_parquet``)."""
    return pl.read_parquet(os.fspath(path), glob=False)
