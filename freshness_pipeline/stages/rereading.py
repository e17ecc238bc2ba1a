"""A page's archived body read again under its class's current extraction.

A fingerprint taken by another extractor (an upgrade, a class's selectors, fields or json_ld
edited) cannot be compared with a new one. ``freshness reextract`` re-reads every such page's
last archived body ahead of time; a cycle does the same for the pages it is about to fetch,
so that the fetch compares like with like: a page that changed since its last fetch is a
change (a ``changes`` row, a notification), not a silent re-extraction of the new body.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.science.fingerprint import ContentRecord, class_record, content_kind
from freshness_pipeline.science.fingerprint.records import ClassExtraction
from freshness_pipeline.warehouse.archive import (
    ArchivedOriginal,
    ArchiveError,
    ArchiveReader,
    RecordLocation,
    archive_dir_for,
)
from freshness_pipeline.web.client import FetchResult

__all__ = [
    "FAILED",
    "NOT_ARCHIVED",
    "NOT_A_BODY",
    "NOT_HTML",
    "NOT_IN_ARCHIVE",
    "Reread",
    "as_reextractions",
    "reread",
    "with_reread_fingerprints",
]

# why a page's body could not be read again (it is left for its next fetch)
NOT_ARCHIVED = "not archived"
NOT_IN_ARCHIVE = "record missing from the archive"
NOT_A_BODY = "no complete 2xx body"
NOT_HTML = "not HTML"
FAILED = "extraction failed"


@dataclass(frozen=True)
class Reread:
    """An archived body's record under the current extraction, and where it was read."""

    record: ContentRecord
    original: ArchivedOriginal
    location: RecordLocation
    content_type: str | None


def reread(
    reader: ArchiveReader, archived: str | None, extraction: ClassExtraction
) -> tuple[Reread | None, str]:
    """The URL's last archived body (``archived``: url_state's ArchivedOriginal JSON) under
    ``extraction``, or None and why not."""
    if not archived:
        return None, NOT_ARCHIVED
    try:
        original = ArchivedOriginal.from_json(archived)
    except ValueError:
        return None, NOT_ARCHIVED
    where = original.location
    if where is None:
        return None, NOT_ARCHIVED
    try:
        response = reader.read_response(where.warc_filename, where.warc_offset, where.warc_length)
        body = response.decoded_body()
    except (OSError, ArchiveError):
        return None, NOT_IN_ARCHIVE
    # the fingerprint was taken from a 2xx body; anything else archived is not it. A body cut
    # (by the network, or a page's by the size cap) is left for the page's next fetch, which
    # reads whatever the cap lets through again
    if response.truncated or response.status is None or not 200 <= response.status < 300:
        return None, NOT_A_BODY
    content_type = response.header("Content-Type")
    if content_kind(body, content_type) != "html":
        return None, NOT_HTML
    try:
        record = class_record(extraction, body, content_type)
    except Exception:  # the fetcher counts this an error too; the next fetch tries again
        return None, FAILED
    return Reread(record, original, where, content_type), ""


def with_reread_fingerprints(
    plan: pl.DataFrame, home: Path, config: PipelineConfig
) -> tuple[pl.DataFrame, dict[str, ContentRecord]]:
    """``plan`` (selected rows about to be fetched) with a fingerprint for each page whose
    stored one another extractor made (the plan dropped it: the page has a version, is not
    coming back from gone, and has none now), read from its archived body under its class's
    current extraction; and those records by URL, for :func:`as_reextractions`. Pages whose
    body cannot be read keep none and lose their validators: their fetch must bring a body,
    a re-extraction (a 304 would leave them with no fingerprint of this extraction)."""
    needed = {"fingerprint", "version_observed_at", "archived", "status"}
    if plan.is_empty() or not needed <= set(plan.columns):
        return plan, {}
    due = (
        pl.col("fingerprint").is_null()
        & pl.col("version_observed_at").is_not_null()
        & pl.col("archived").is_not_null()
        & (pl.col("status") != "gone").fill_null(True)
    )
    rows = plan.filter(due)
    if rows.is_empty():
        return plan, {}
    extractions, index = config.extractions()
    reader = ArchiveReader(archive_dir_for(home))
    records: dict[str, ContentRecord] = {}
    for url, archived, which in rows.select("url", "archived", index.alias("_x")).iter_rows():
        got, _why = reread(reader, archived, extractions[which])
        if got is not None:
            records[url] = got.record
    found = pl.DataFrame(
        {"url": list(records), "_fp": [r.fingerprint for r in records.values()]},
        schema={"url": pl.String, "_fp": pl.String},
    )
    unread = due & pl.col("_fp").is_null()
    validators = [
        pl.when(unread).then(pl.lit(None, pl.String)).otherwise(c).alias(c)
        for c in ("etag", "last_modified")
        if c in plan.columns
    ]
    return (
        plan.join(found, on="url", how="left", maintain_order="left")
        .with_columns(*validators, fingerprint=pl.coalesce("fingerprint", "_fp"))
        .drop("_fp"),
        records,
    )


def as_reextractions(results: list[FetchResult], records: dict[str, ContentRecord]) -> None:
    """A page read again that came back unchanged is a re-extraction (outcome 'new', its
    version the archived body's reading under the current extraction, page_versions
    'reextracted'), so that its next change is told against what the current extraction
    reads, new fields included; one that changed stays a change. In place."""
    if not records:
        return
    for result in results:
        record = records.get(result.url)
        if record is None or result.outcome not in ("unchanged", "not_modified"):
            continue
        result.outcome, result.fingerprint = "new", record.fingerprint
        result.keep_version(record)
