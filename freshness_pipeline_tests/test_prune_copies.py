"""archive.prune after an interrupted prune: an original carried into a retained file but whose
own file was never deleted is in the archive twice, and a later cut-off can expire both copies
at once. Rows may point at either copy (the ones the interrupted prune had moved, and the ones
it had not reached), so both must be moved to where the one carried on goes."""

from __future__ import annotations

from pathlib import Path

from freshness_pipeline.warehouse.archive import (
    ArchiveReader,
    ArchiveWriter,
    commit_prune,
    prepare_prune,
)
from freshness_pipeline_tests.test_archive import (
    HOUR,
    T1,
    check_all,
    html,
    not_modified,
    ok,
    original_of,
)


def test_both_copies_of_a_twice_kept_original_move_to_the_new_copy(tmp_path: Path) -> None:
    url = "http://example.test/a"
    with ArchiveWriter(tmp_path, T1) as writer:
        first = writer.write_exchange(ok(url, html(1)))
    with ArchiveWriter(tmp_path, T1 + HOUR) as writer:
        writer.write_exchange(not_modified(url), previous=first.original)
    interrupted = prepare_prune(tmp_path, expire_before=T1 + HOUR)
    carried = interrupted.relocate(original_of(first))
    assert carried is not None and carried.warc_filename == interrupted.retained_file
    # ... killed before commit_prune: the original is in its own file and in the retained one,
    # and the next cycle's 304 refers to the carried copy, as url_state now says
    with ArchiveWriter(tmp_path, T1 + 2 * HOUR) as writer:
        kept = writer.write_exchange(not_modified(url), previous=carried)
    later = prepare_prune(tmp_path, expire_before=T1 + 2 * HOUR)
    assert {first.warc_filename, interrupted.retained_file} <= set(later.expired)
    from_own_file = later.relocate(original_of(first))
    from_retained = later.relocate(carried)
    assert from_own_file is not None and from_retained is not None
    assert from_own_file == from_retained
    assert from_own_file.warc_filename == later.retained_file
    assert from_own_file.record_id == first.record_id
    commit_prune(later)
    got = ArchiveReader(tmp_path).read_response(kept.warc_filename, kept.warc_offset)
    assert got.body == html(1)
    check_all(tmp_path)
