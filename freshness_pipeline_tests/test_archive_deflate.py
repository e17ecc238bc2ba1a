"""The archive's deflate: every record is its own gzip member with a correct CRC and size, the
members are ISA-L's output (isal_zlib), and what they decompress to is, byte for byte, what the
records were before the compressor changed (zlib level 2): a hash of a few hundred records,
built with fixed record ids, pins their content."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import random
import shutil
import struct
import subprocess
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from isal import isal_zlib
from warcio.archiveiterator import ArchiveIterator

from freshness_pipeline.warehouse.archive import (
    ArchivedOriginal,
    ArchiveIndex,
    ArchiveWriter,
    HttpExchange,
    encoding,
    list_warcs,
)
from freshness_pipeline.warehouse.archive.encoding import DEFAULT_COMPRESS_LEVEL, RecordEncoder
from freshness_pipeline_tests.test_archive import REQ, html

T = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
WARCINFO_ID = "<urn:uuid:00000000-0000-4000-8000-000000000000>"
SIZES = (0, 1, 37, 600, 4095, 4096, 4097, 5000, 20_000, 65_536, 70_000, 300_000)
#: SHA-256 of every record of ``workload()`` decompressed and concatenated, as the zlib encoder
#: wrote them (the records' content must not depend on the compressor).
RECORDS_SHA256 = "07d2565e58926788ca227a9d66da19298184880318428a8f662bbf640c46ed68"


def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record ids from a counter, so that the same exchanges make the same records."""
    counter = itertools.count(1)
    monkeypatch.setattr(
        encoding,
        "new_record_id",
        lambda: f"<urn:uuid:00000000-0000-4000-8000-{next(counter):012d}>",
    )


def workload() -> list[tuple[HttpExchange, ArchivedOriginal | None]]:
    """A few hundred exchanges of every kind the encoder tells apart: 304s with and without a
    known original, responses of text and of incompressible bytes across the sizes where
    deflate's blocks and the gzip trailer's size field change, identical-payload revisits,
    truncated bodies, an IP address, header bytes outside ASCII."""
    rng = random.Random(20261202)
    earlier = ArchivedOriginal(
        "http://example.test/old",
        T - timedelta(days=3),
        "<urn:uuid:11111111-2222-4333-8444-555555555555>",
        "sha1:" + "A" * 32,
    )
    out: list[tuple[HttpExchange, ArchivedOriginal | None]] = []
    for i in range(240):
        url = f"http://example.test/{i % 50}/page?q={i}"
        size = SIZES[i % len(SIZES)]
        shape = i % 5
        body = html(i, size)[:size] if i % 3 else rng.randbytes(size)
        headers = [
            ("Content-Type", "text/html; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("ETag", f'"{i:x}-{size:x}"'),
        ]
        if shape == 0:
            exchange = HttpExchange(
                url,
                304,
                "Not Modified",
                [*REQ, ("If-None-Match", f'"{i:x}"')],
                [("ETag", f'"{i:x}"'), ("Server", "nginx")],
            )
            out.append((exchange, earlier if i % 2 else None))
            continue
        if shape == 4:
            headers.append(("X-Note", "caf\u00e9 na\u00efve"))
        exchange = HttpExchange(
            url,
            200,
            "OK",
            REQ,
            headers,
            body,
            truncated="length" if shape == 3 and size > 0 else None,
            ip_address="192.0.2.7" if shape == 2 else None,
            fetched_at=T + timedelta(seconds=i),
        )
        previous = None
        if shape == 1:  # the same payload as before: an identical-payload revisit
            previous = ArchivedOriginal(
                url, T - timedelta(days=1), earlier.record_id, encoding.payload_digest(body)
            )
        out.append((exchange, previous))
    return out


def members(data: bytes) -> list[tuple[int, int, bytes]]:
    """(offset, length, decompressed) of each gzip member in ``data``, read with stdlib zlib,
    each member checked against its own trailer (CRC-32 and size of what it holds)."""
    found = []
    offset = 0
    while offset < len(data):
        assert data[offset : offset + 2] == b"\x1f\x8b", f"no gzip member at {offset}"
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        raw = d.decompress(data[offset:]) + d.flush()
        assert d.eof, f"member at {offset} does not end"
        length = len(data) - offset - len(d.unused_data)
        crc, isize = struct.unpack("<II", data[offset + length - 8 : offset + length])
        assert crc == zlib.crc32(raw) and isize == len(raw) % 2**32, offset
        found.append((offset, length, raw))
        offset += length
    return found


def encode_all(encoder: RecordEncoder) -> list[bytes]:
    """Every gzip member the encoder makes of the workload: warcinfo, then each exchange's two."""
    out = [encoder.warcinfo("test.warc.gz", "2026-03-02T12:00:00Z", {"software": "t"})[0]]
    for exchange, previous in workload():
        date = encoding.warc_date(exchange.fetched_at or T)
        encoded = encoder.exchange(
            exchange, date=date, kind="page", warcinfo_id=WARCINFO_ID, previous=previous
        )
        out += [encoded.main, encoded.request]
    return out


def test_each_record_is_one_isal_member_holding_the_same_bytes_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixed_ids(monkeypatch)
    encoded = encode_all(RecordEncoder())
    assert len(encoded) == 481
    digest = hashlib.sha256()
    for member in encoded:
        [(offset, length, raw)] = members(member)  # exactly one member, ending at the end
        assert (offset, length) == (0, len(member))
        assert raw.startswith(b"WARC/1.1\r\n") and raw.endswith(b"\r\n\r\n")
        assert gzip.decompress(member) == raw
        # ISA-L's output at the encoder's level, not zlib's: the compressor is the new one
        assert member == isal_zlib.compress(raw, DEFAULT_COMPRESS_LEVEL, 16 + zlib.MAX_WBITS)
        digest.update(raw)
    assert digest.hexdigest() == RECORDS_SHA256


def test_every_level_makes_the_same_records(monkeypatch: pytest.MonkeyPatch) -> None:
    contents = set()
    for level in range(4):
        fixed_ids(monkeypatch)
        contents.add(
            b"".join(raw for m in encode_all(RecordEncoder(level)) for _, _, raw in members(m))
        )
    assert len(contents) == 1
    for level in (-1, 4, 9):
        with pytest.raises(ValueError, match="0-3"):
            RecordEncoder(level)


def test_a_written_file_is_one_member_per_record_where_the_writer_and_index_say(
    tmp_path: Path,
) -> None:
    with ArchiveWriter(tmp_path, T, max_file_bytes=None) as writer:
        written = [writer.write_exchange(e, previous=p) for e, p in workload()]
    [warc] = list_warcs(tmp_path)
    data = (tmp_path / warc).read_bytes()
    found = members(data)
    assert len(found) == 1 + 2 * len(written)  # warcinfo, then two records per exchange
    at = {offset: (length, raw) for offset, length, raw in found}
    for record in written:
        assert record.warc_filename == warc
        length, raw = at[record.warc_offset]
        assert length == record.warc_length and record.record_id.encode() in raw
        length, raw = at[record.request_offset]
        assert length == record.request_length and b"WARC-Type: request\r\n" in raw
    # the CDXJ index written on close names the same members
    entries = ArchiveIndex(tmp_path).entries(ArchiveIndex(tmp_path).index_files()[0])
    assert entries and all(at[e.offset][0] == e.length for e in entries)
    # warcio reads every record, one per member, at the members' offsets
    with open(tmp_path / warc, "rb") as f:
        iterator = ArchiveIterator(f)
        seen = []
        for rec in iterator:
            rec.content_stream().read()
            seen.append((iterator.get_record_offset(), iterator.get_record_length()))
    assert seen == [(offset, length) for offset, length, _ in found]
    # gzip readers see the concatenation of all records
    whole = b"".join(raw for _, _, raw in found)
    with gzip.open(tmp_path / warc, "rb") as f:
        assert f.read() == whole
    if shutil.which("zcat"):
        done = subprocess.run(["zcat", str(tmp_path / warc)], capture_output=True, check=True)
        assert done.stdout == whole
