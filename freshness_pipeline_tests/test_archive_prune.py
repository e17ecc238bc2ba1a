"""warehouse/archive/prune.py: a WARC file's cycle, and a prune that expires whole files."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from freshness_pipeline.warehouse.archive import ArchiveWriter, HttpExchange, list_warcs
from freshness_pipeline.warehouse.archive.prune import file_cycle, prune_archive

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(days=2)


def write_cycle(archive: Path, now: datetime, body: bytes) -> str:
    with ArchiveWriter(archive, now) as writer:
        writer.write_exchange(
            HttpExchange("http://example.test/", 200, "OK", [("Host", "example.test")], [], body)
        )
        (done,) = writer.close()
    return done.warc_filename


def test_files_of_cycles_before_the_cut_are_deleted_and_the_rest_kept(tmp_path: Path) -> None:
    old = write_cycle(tmp_path, T0, b"<p>old</p>")
    new = write_cycle(tmp_path, T1, b"<p>new</p>")
    assert (file_cycle(tmp_path, old), file_cycle(tmp_path, new)) == (T0, T1)
    prune_archive(tmp_path, expire_before=T0 + timedelta(days=1))
    assert list_warcs(tmp_path) == [new]
