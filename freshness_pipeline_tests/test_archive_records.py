"""warehouse/archive/records.py and encoding.py: the WARC-Date text the writer stamps and reads
back, record ids, stored headers, and the exchange archive_answer makes of a response."""

from __future__ import annotations

import base64
import hashlib
import uuid
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from aiohttp import HttpVersion11
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict, CIMultiDictProxy

from freshness_pipeline.warehouse.archive import HttpExchange
from freshness_pipeline.warehouse.archive.encoding import (
    _rewritten_headers,
    new_record_id,
    payload_digest,
    stored_response_headers,
)
from freshness_pipeline.warehouse.archive.records import (
    ArchiveFormatError,
    parse_warc_date,
    warc_date,
)
from freshness_pipeline.web.archiving import archive_answer


def test_warc_dates_are_utc_with_fractions_only_when_there_are_any() -> None:
    whole = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert warc_date(whole) == "2026-03-02T12:00:00Z"
    cet = whole.astimezone(timezone(timedelta(hours=1)))
    assert warc_date(cet.replace(microsecond=250)) == "2026-03-02T12:00:00.000250Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        warc_date(whole.replace(tzinfo=None))


def test_a_warc_date_reads_back_as_the_same_instant() -> None:
    moment = datetime(2026, 3, 2, 12, 0, 7, 123456, tzinfo=UTC)
    assert parse_warc_date(warc_date(moment)) == moment
    assert parse_warc_date("2026-03-02T13:00:00+01:00") == datetime(2026, 3, 2, 12, tzinfo=UTC)
    with pytest.raises(ArchiveFormatError):
        parse_warc_date("yesterday")


_NAMES = st.sampled_from(
    [
        "Content-Length",
        "content-length",
        "Transfer-Encoding",
        "TRANSFER-ENCODING",
        "Content-Encoding",
        "X-Transfer-Encoding",
        "X-Content-Length",
        "Content-Type",
        "ETag",
        "Server",
    ]
)
_VALUES = st.sampled_from(["5", " 5 ", "6", "chunked", "gzip", "text/html", '"1"', ""])


@settings(max_examples=400, deadline=None)
@given(
    headers=st.lists(st.tuples(_NAMES, _VALUES), max_size=6),
    body_length=st.none() | st.sampled_from([0, 5, 6]),
    body_decoded=st.booleans(),
)
def test_stored_headers_shortcut_gives_what_the_header_by_header_rewrite_gives(
    headers: list[tuple[str, str]], body_length: int | None, body_decoded: bool
) -> None:
    """stored_response_headers answers most responses with one search of the names; whatever
    the headers, its answer is the one the header-by-header rewrite gives."""
    pairs = tuple(headers)
    assert stored_response_headers(
        pairs, body_length=body_length, body_decoded=body_decoded
    ) == _rewritten_headers(pairs, body_length=body_length, body_decoded=body_decoded)


def test_record_ids_are_version_4_uuids_in_the_urn_form() -> None:
    """Every id new_record_id formats is what ``uuid.UUID`` reads as a random (version 4,
    RFC 4122 variant) UUID, lower-case hex, and no two are the same."""
    ids = [new_record_id() for _ in range(3000)]
    assert len(set(ids)) == len(ids)
    for record_id in ids:
        assert record_id.startswith("<urn:uuid:") and record_id.endswith(">")
        parsed = uuid.UUID(record_id[10:-1])
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == record_id[10:-1]


class _Capture:
    def write_exchange(self, exchange: HttpExchange, **_: object) -> HttpExchange:
        return exchange


def _answer(raw_headers: tuple[tuple[bytes, bytes], ...]) -> SimpleNamespace:
    """What archive_answer reads of an aiohttp response."""
    return SimpleNamespace(
        status=200,
        reason="OK",
        version=HttpVersion11,
        request_info=SimpleNamespace(headers=CIMultiDictProxy(CIMultiDict(Host="example.test"))),
        raw_headers=raw_headers,
        headers=CIMultiDictProxy(CIMultiDict((k.decode(), v.decode()) for k, v in raw_headers)),
    )


def test_archive_answer_makes_the_exchange_the_constructor_makes_and_checks_it() -> None:
    """archive_answer builds its HttpExchange without the dataclass's __init__ but with its
    checks: the same exchange as the constructor's, and the same refusals."""
    when = datetime(2026, 3, 2, tzinfo=UTC)
    raw = ((b"Content-Type", b"text/html"), (b"Content-Encoding", b"gzip"))
    made = archive_answer(
        _Capture(),  # type: ignore[arg-type]
        "http://example.test/p",
        _answer(raw),  # type: ignore[arg-type]
        b"body",
        fetched_at=when,
        truncated="length",
    )
    assert made == HttpExchange(
        "http://example.test/p",
        200,
        "OK",
        (("Host", "example.test"),),
        raw,
        b"body",
        body_decoded=True,
        truncated="length",
        fetched_at=when,
    )
    assert made.response_headers == (("Content-Type", "text/html"), ("Content-Encoding", "gzip"))
    with pytest.raises(ValueError, match="CR, LF or NUL"):
        archive_answer(_Capture(), "http://example.test/p", _answer(((b"X", b"a\nb"),)), b"")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="absolute URL"):
        archive_answer(_Capture(), "http://example.test/a b", _answer(()), b"")  # type: ignore[arg-type]


def test_payload_digest_of_the_same_body_twice_and_of_a_changed_buffer() -> None:
    """payload_digest remembers the last bytes object it digested (the fetcher and the archive
    digest the same body): asked again it gives the same digest, and a mutable buffer that
    changed in between is digested anew."""

    def expected(data: bytes) -> str:
        return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()

    body = b"<html>page</html>" * 100
    assert payload_digest(body) == payload_digest(body) == expected(body)
    other = bytes(body[:-1]) + b"!"
    assert payload_digest(other) == expected(other)
    assert payload_digest(body) == expected(body)
    buffer = bytearray(body)
    assert payload_digest(buffer) == expected(body)  # type: ignore[arg-type]
    buffer[0:1] = b"X"
    assert payload_digest(buffer) == expected(bytes(buffer))  # type: ignore[arg-type]
    large = bytes(2 << 20)
    assert payload_digest(large) == payload_digest(large) == expected(large)
