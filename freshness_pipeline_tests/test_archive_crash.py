"""The archive survives what a fetch process can suffer: a kill -9 in the middle of writing,
and a file system that refuses a write (a file size limit standing in for a full disk).

Both run the writer in a real child process, so the kill and the limit hit real system calls.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from freshness_pipeline.warehouse.archive import (
    ensure_indexes,
    index_name_for,
    iter_records,
    list_warcs,
    read_record,
    remove_abandoned,
)
from freshness_pipeline_tests.pywb_server import warcio_check

# Writes cycle after cycle of exchanges, rotating files often; each record of a file goes to
# the side file (fsynced) only when the writer announces the file complete.
CRASH_CHILD = textwrap.dedent(
    """
    import json, os, random, sys
    from datetime import UTC, datetime, timedelta
    from pathlib import Path
    from freshness_pipeline.warehouse.archive import ArchiveWriter, HttpExchange

    archive, side, seed = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    side_fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def durable(done):
        lines = "".join(
            json.dumps([r.warc_filename, r.warc_offset, r.warc_length, r.record_id]) + "\\n"
            for r in done.records
        )
        os.write(side_fd, lines.encode())
        os.fsync(side_fd)

    rng = random.Random(seed)
    for cycle in range(10_000):
        now = datetime(2026, 3, 2, tzinfo=UTC) + timedelta(hours=cycle)
        with ArchiveWriter(archive, now, writer=f"s{seed}", max_file_bytes=60_000, on_complete=durable) as w:
            for i in range(40):
                body = rng.randbytes(rng.randint(1_000, 8_000))
                w.write_exchange(HttpExchange(
                    f"http://127.0.0.1/{seed}/{cycle}/{i}", 200, "OK", [("Host", "127.0.0.1")],
                    [("Content-Type", "application/octet-stream")], body))
    """
)


def side_lines(side: Path) -> list[list[object]]:
    if not side.exists():
        return []
    text = side.read_text()
    complete = text[: text.rfind("\n") + 1]  # a line is announced only once fsynced whole
    return [json.loads(line) for line in complete.splitlines()]


def drop_torn_line(side: Path) -> None:
    """The kill can land inside the child's write of its side lines (a short write), leaving a
    torn line that was never announced; the next round's lines would follow it on the same line."""
    data = side.read_bytes()
    whole = data[: data.rfind(b"\n") + 1]
    if len(whole) != len(data):
        with side.open("r+b") as handle:
            handle.truncate(len(whole))


def assert_closed_by_the_writer(path: Path) -> None:
    responses = [r for r in iter_records(path) if r.record_type == "response"]
    last = int(str(responses[-1].target_uri).rsplit("/", 1)[1])
    assert last == 39 or path.stat().st_size > 60_000 - 9_000, f"{path.name} was renamed unfinished"


def test_kill_9_leaves_only_whole_files_and_every_announced_record(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    side = tmp_path / "durable.jsonl"
    rng = random.Random(7)
    for round_ in range(3):
        before = len(side_lines(side))
        child = subprocess.Popen(
            [sys.executable, "-c", CRASH_CHILD, str(archive), str(side), str(round_)]
        )
        try:
            deadline = time.monotonic() + 120
            while len(side_lines(side)) < before + 30:  # a few files completed in this round
                assert child.poll() is None, f"the writer exited early with {child.returncode}"
                assert time.monotonic() < deadline, "the writer announced nothing durable in 120 s"
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.2))  # somewhere in the middle of the next records
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        assert child.returncode == -signal.SIGKILL
        drop_torn_line(side)
        names = sorted(os.listdir(archive))
        temporary = [n for n in names if n.endswith(".open")]
        assert len(temporary) <= 1, temporary
        assert all(n.endswith((".warc.gz", ".cdxj", ".open")) for n in names), names
        assert remove_abandoned(archive) == temporary  # its writer is dead: its lock is free
        ensure_indexes(archive)  # in case the kill fell between a rename and its index
        # A whole file is announced durable right after its rename; one the kill caught between
        # the two must still be whole: closed at a cycle's last exchange or at the size limit.
        announced_files = {line[0] for line in side_lines(side)}
        unannounced = [n for n in list_warcs(archive) if n not in announced_files]
        assert len(unannounced) <= round_ + 1, unannounced
        for name in unannounced:
            assert_closed_by_the_writer(archive / name)

    announced = side_lines(side)
    assert len(announced) >= 90
    complete = set(list_warcs(archive))
    for filename, offset, length, record_id in announced:
        assert filename in complete
        record = read_record(archive, str(filename), int(offset), int(length))  # type: ignore[call-overload]
        assert record.record_type == "response" and record.record_id == record_id
    for warc in complete:
        warcio_check(archive / warc)
        assert (archive / index_name_for(warc)).exists()
    assert not [n for n in os.listdir(archive) if n.endswith(".open")]


# Completes one file, then lowers the file size limit and writes until the writer is refused.
FULL_CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    from datetime import UTC, datetime, timedelta
    from pathlib import Path
    from freshness_pipeline.warehouse.archive import ArchiveClosedError, ArchiveWriteError, ArchiveWriter, HttpExchange

    archive, limit = Path(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG

    def exchange(i, size):
        return HttpExchange(f"http://127.0.0.1/{i}", 200, "OK", [("Host", "127.0.0.1")],
                            [("Content-Type", "application/octet-stream")], bytes([i % 251]) * 7 + bytes(range(256)) * (size // 256))

    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    with ArchiveWriter(archive, t0, writer="before") as w:
        before = [w.write_exchange(exchange(i, 20_000)) for i in range(3)]
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    w = ArchiveWriter(archive, t0 + timedelta(hours=1), writer="full")
    written, result = [], {}
    try:
        for i in range(1_000):
            body_size = 3_000 if limit > 2_000 else 100
            written.append(w.write_exchange(exchange(i, body_size)))
    except ArchiveWriteError as exc:
        result = {"error": str(exc), "saved": exc.saved.warc_filename if exc.saved else None,
                  "saved_ids": [r.record_id for r in exc.saved.records] if exc.saved else []}
    try:
        w.write_exchange(exchange(0, 100))
        result["after"] = "written"
    except ArchiveClosedError as exc:
        result["after"] = str(exc)
    result["before"] = before[0].warc_filename
    result["written_ids"] = [r.record_id for r in written]
    print(json.dumps(result))
    """
)


def run_full_child(archive: Path, limit: int) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", FULL_CHILD, str(archive), str(limit)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_refused_write_keeps_the_whole_records_and_says_why(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    result = run_full_child(archive, 200_000)
    error = str(result["error"])
    assert "File too large" in error and "file size limit" in error and "refused" in error
    assert "http://127.0.0.1/" in error  # names the exchange that was not archived
    assert "takes no more records" in error and "aborted" not in error
    assert "failed" in str(result["after"])
    # The file written before the limit is intact; the refused file was completed with the
    # exchanges before the failing one, under its final name; nothing half-written anywhere.
    assert sorted(list_warcs(archive)) == sorted([str(result["before"]), str(result["saved"])])
    assert not [n for n in os.listdir(archive) if n.endswith(".open")]
    assert result["saved_ids"] == result["written_ids"] and len(result["written_ids"]) > 10  # type: ignore[arg-type]
    before = warcio_check(archive / str(result["before"]))
    assert [line["warc-type"] for line in before].count("response") == 3
    saved = warcio_check(archive / str(result["saved"]))
    assert [line["warc-record-id"] for line in saved if line["warc-type"] == "response"] == result[
        "written_ids"
    ]
    assert (archive / index_name_for(str(result["saved"]))).exists()


def test_a_file_refused_from_its_first_record_leaves_nothing(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    result = run_full_child(archive, 1_000)  # not even room for the first exchange
    assert result["saved"] is None and result["written_ids"] == []
    assert "nothing was archived" in str(result["error"])
    assert list_warcs(archive) == [result["before"]]
    assert not [n for n in os.listdir(archive) if n.endswith(".open")]
    warcio_check(archive / str(result["before"]))
