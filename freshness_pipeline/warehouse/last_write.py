"""The table this process wrote last, for the read that follows the write.

A cycle's step writes its table and the next step, and the checks between them, read it
straight back: at ten thousand hosts each such read opens ten thousand files, a second or more
that the frame just written already holds.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import polars as pl

from freshness_pipeline.warehouse.layout import PARTITION_FILE, file_identity, host_folder

__all__ = ["LAST_WRITE", "LastWrite", "Written"]


@dataclass(frozen=True)
class Written:
    """A whole-table write of this process: the frame, and each host file's identity right
    after it was put in place (inode, modification time, size)."""

    root: str
    table: str
    frame: pl.DataFrame
    files: dict[str, tuple[int, int, int]]


class LastWrite:
    """The latest write of a (not history) table by this process, kept until the next write.

    A read of the same table for hosts the write covered is answered from that frame when every
    one of their files is still the file the write put there (same inode, time and size: a
    later replace by anyone, in any process, is a new file), rows in the order the files would
    give them. One frame at a time is kept, the last written, which its writer was holding
    anyway; any write of its table drops it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._written: Written | None = None

    def remember(self, written: Written) -> None:
        with self._lock:
            self._written = written

    def forget(self, root: str, tables_written: set[str]) -> None:
        with self._lock:
            last = self._written
            if last is not None and last.root == root and last.table in tables_written:
                self._written = None

    def recall(self, root: str, table: str, hosts: list[str]) -> pl.DataFrame | None:
        with self._lock:
            last = self._written
        if last is None or last.root != root or last.table != table:
            return None
        if len(set(hosts)) != len(hosts) or not last.files.keys() >= set(hosts):
            return None
        folder = f"{root}/{table}"
        for host in hosts:
            now = file_identity(f"{folder}/{host_folder(host)}/{PARTITION_FILE}")
            if now != last.files[host]:
                return None
        order = pl.DataFrame(
            {"host": hosts, "_order": range(len(hosts))},
            schema={"host": pl.String, "_order": pl.Int64},
        )
        return (
            last.frame.join(order, on="host", how="inner", maintain_order="left")
            .sort("_order", maintain_order=True)
            .drop("_order")
        )


LAST_WRITE = LastWrite()
