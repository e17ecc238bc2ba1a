"""One frame of many hosts as host files: each host's rows, and a digest of what they hold.

A cycle hands each table over whole and the warehouse replaces one file per host, but much
of what it would write is what the file already holds: a dry run's candidates, and the
tables of the hosts whose inputs did not move. A
replace is the costliest thing a step does per host (the Parquet encoder's fixed cost, a
temp file, a rename and the old file's unlink; docs/file_costs.md), so a file whose content
digest equals the new rows' is left in place. The digest lives in the file's own footer
(Parquet key-value metadata), written with the rows it describes in one atomic replace: no
index beside the files can fall out of step with them, and a copied, restored or
hand-made file is judged by what it says of itself (none: written anew).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import xxhash

__all__ = ["DIGEST_KEY", "content_digests", "row_groups", "split_by", "stored_digest"]

#: The footer key of a host file's content digest.
DIGEST_KEY = "freshness:content"
# polars promises its row hashes only within one version: a file written under another
# reads as not matching and is written again, once.
_SCHEME = f"polars-{pl.__version__}-rows2x64"


def row_groups(df: pl.DataFrame, column: str) -> dict[Any, pl.Series]:
    """The row numbers of ``df`` per value of ``column``, in order of first appearance."""
    groups = (
        df.select(column).with_row_index("_row").group_by(column, maintain_order=True).agg("_row")
    )
    return dict(zip(groups[column], groups["_row"], strict=True))


def split_by(df: pl.DataFrame, column: str) -> dict[Any, pl.DataFrame]:
    """``df``'s rows per value of ``column``, each part gathered into arrays of its own.

    Why not ``DataFrame.partition_by``: on a frame sorted by the column (the state and the
    change prior are), polars hands out zero-copy slices, and writing a slice of a list of
    strings converts the list's whole child array, every host's, for each part, so writing a
    table's host files grows with hosts squared (docs/scaling.md). Gathered parts own their
    rows, so writing one costs its own size.
    """
    if df.height == 0:
        return {}
    return {key: df[rows] for key, rows in row_groups(df, column).items()}


def content_digests(
    df: pl.DataFrame, hosts: Iterable[str], groups: dict[Any, pl.Series] | None = None
) -> dict[str, str]:
    """Per host of ``hosts``, a digest of the rows of ``df`` (with a ``host`` column) that
    its file would hold, in their order, and of the frame's schema; a host without rows gets
    the digest of an empty file. Each row is hashed twice, under two seeds, so that one unlucky
    64-bit collision is not enough to keep a stale file; the rows are hashed over the whole
    frame at once, not one call per host. ``groups``: ``row_groups(df, "host")`` if the caller
    has it."""
    schema = repr(list(df.schema.items())).encode()
    empty = f"{_SCHEME}:{xxhash.xxh3_128_hexdigest(schema)}"
    digests = dict.fromkeys(hosts, empty)
    if df.height == 0:
        return digests
    rows = np.stack([df.hash_rows(seed=0).to_numpy(), df.hash_rows(seed=1).to_numpy()], axis=1)
    for host, index in (row_groups(df, "host") if groups is None else groups).items():
        if host in digests:
            body = rows[index.to_numpy()].tobytes()
            digests[host] = f"{_SCHEME}:{xxhash.xxh3_128_hexdigest(schema + body)}"
    return digests


def stored_digest(path: str | Path) -> str | None:
    """The content digest a host file's footer holds; None when it has none or cannot be
    read (gone, cut short, not Parquet): such a file is written anew, never trusted."""
    try:
        return pl.read_parquet_metadata(path).get(DIGEST_KEY)
    except Exception:  # noqa: BLE001 (any unreadable footer means "write it")
        return None
