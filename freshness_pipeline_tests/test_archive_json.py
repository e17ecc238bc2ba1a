"""The archive formats its JSON (the ``archived`` column, the CDXJ lines) itself; the text
must be what ``json.dumps`` writes, since pywb and earlier rows read it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.warehouse.archive.index import IndexEntry
from freshness_pipeline.warehouse.archive.records import ArchivedOriginal, warc_date

_TEXT = st.text(st.characters(codec=None), max_size=12)
_SURROGATES = st.text(st.sampled_from(['"', "\\", "\x00", "\x1f", "é", "\u2028", "\ud800", "😀"]))


@settings(max_examples=1500, deadline=None)
@given(
    uri=_TEXT,
    micros=st.integers(0, 10**12),
    located=st.booleans(),
    file=_TEXT.filter(bool),
    offset=st.integers(0, 10**12),
    length=st.integers(1, 10**9),
    mime=st.none() | _TEXT | _SURROGATES,
    status=st.none() | st.integers(100, 999),
    key=st.none() | _TEXT,
)
def test_original_json_is_json_dumps(
    uri: str,
    micros: int,
    located: bool,
    file: str,
    offset: int,
    length: int,
    mime: str | None,
    status: int | None,
    key: str | None,
) -> None:
    place = (file, offset, length) if located else (None, None, None)
    original = ArchivedOriginal(
        "http://x/" + uri,
        datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros),
        "<urn:uuid:00000000-0000-4000-8000-000000000001>",
        "sha1:" + "A" * 32,
        *place,
        mime,
        status,
        key,
    )
    expected = json.dumps(
        {
            "uri": original.target_uri,
            "date": warc_date(original.date),
            "id": original.record_id,
            "digest": original.payload_digest,
            "file": original.warc_filename,
            "offset": original.warc_offset,
            "length": original.warc_length,
            "mime": original.mime,
            "status": original.status,
            "key": original.urlkey,
        },
        separators=(",", ":"),
    )
    assert original.to_json() == expected
    assert ArchivedOriginal.from_json(expected) == original


@settings(max_examples=1500, deadline=None)
@given(fields=st.dictionaries(_TEXT | _SURROGATES, _TEXT | _SURROGATES, max_size=8))
def test_index_line_is_json_dumps(fields: dict[str, str]) -> None:
    entry = IndexEntry("com,example)/a", "20260302120000", fields)
    expected = f"com,example)/a 20260302120000 {json.dumps(fields)}\n".encode()
    assert entry.line() == expected


def test_original_json_that_the_constructor_refuses_is_refused() -> None:
    """from_json skips the dataclass's __init__ but not its checks: a row's JSON that names a
    bad record id, digest or half a location is refused as the constructor refuses it."""
    good = ArchivedOriginal(
        "http://x/a",
        datetime(2026, 1, 1, tzinfo=UTC),
        "<urn:uuid:00000000-0000-4000-8000-000000000001>",
        "sha1:" + "A" * 32,
        "f.warc.gz",
        0,
        10,
    )
    data = json.loads(good.to_json())
    for change, message in (
        ({"id": "no brackets"}, "record_id"),
        ({"digest": "md5:abc"}, "payload_digest"),
        ({"length": None}, "go together"),
        ({"length": 0}, "warc_length > 0"),
    ):
        with pytest.raises(ValueError, match=message):
            ArchivedOriginal.from_json(json.dumps({**data, **change}))
    for text in ("{", "[]", json.dumps({k: v for k, v in data.items() if k != "uri"})):
        with pytest.raises(ValueError, match="not an ArchivedOriginal JSON string"):
            ArchivedOriginal.from_json(text)
