"""The crawled copy's tables from a cycle's fetches: page_versions (every new or changed version
of a page, with what it says and where the archive holds it) and changes (what differs from the
version before).

Both are history, one file per cycle and host. The version before a changed one is found where
url_state says it was observed (``version_observed_at``), so a cycle reads one file per host
and earlier cycle that its changed pages last changed in, never the whole history.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import polars as pl

from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.science.changes import version_change
from freshness_pipeline.science.fingerprint import ContentRecord
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.excluded_fields import drop_excluded_fields
from freshness_pipeline.warehouse.layout import scan_files
from freshness_pipeline.warehouse.storage import Warehouse

__all__ = ["change_rows", "drop_excluded_fields", "previous_versions", "version_rows"]

_KEPT = ("new", "changed")


def _was_gone(plan: pl.DataFrame) -> pl.Expr:
    """``_was_gone``: the plan fetched the page as gone (it is back if it answered)."""
    if "status" not in plan.columns:
        return pl.lit(False).alias("_was_gone")
    return (pl.col("status") == "gone").fill_null(False).alias("_was_gone")


def version_rows(
    raw: pl.DataFrame, plan: pl.DataFrame, now: datetime, config: PipelineConfig
) -> pl.DataFrame:
    """page_versions rows of a cycle's fetch results (``raw``: the fetcher's results with their
    title, text and fields): every sent fetch whose content was new or changed. A 'new' one
    of a page that had a version before is a re-extraction (another extractor or selectors
    made its fingerprint incomparable), unless the page was gone: then it is back, new again
    to whoever was told it went."""
    if raw.is_empty() or "text" not in raw.columns:
        return tables.empty("page_versions")
    planned = plan.select(
        "url",
        "url_class",
        (
            pl.col("version_observed_at")
            if "version_observed_at" in plan.columns
            else pl.lit(None, tables.UTC_TIME)
        ).alias("_before"),
        _was_gone(plan),
    ).unique(subset="url", keep="last", maintain_order=True)
    rows = raw.filter(
        pl.col("sent") & pl.col("outcome").is_in(_KEPT) & pl.col("fingerprint").is_not_null()
    ).join(planned, on="url", how="left")
    rows = drop_excluded_fields(_located_at_payload(rows), config)
    return tables.conform(
        "page_versions",
        rows.with_columns(
            observed_at=pl.lit(now).cast(tables.UTC_TIME),
            outcome=pl.when(
                (pl.col("outcome") == "new")
                & pl.col("_before").is_not_null()
                & ~pl.col("_was_gone")
            )
            .then(pl.lit("reextracted"))
            .otherwise("outcome"),
            fingerprint_version=config.version_expr(),
        ),
    )


# what a version's location is read from in ArchivedOriginal's JSON (records.to_json)
_ORIGINAL_LOCATION = pl.Struct(
    {"digest": pl.String, "file": pl.String, "offset": pl.Int64, "length": pl.Int64}
)
_LOCATION_COLUMNS = {"file": "warc_filename", "offset": "warc_offset", "length": "warc_length"}


def _located_at_payload(rows: pl.DataFrame) -> pl.DataFrame:
    """A version's location is the record holding its body. A fetch whose body the archive
    already held (a page back from a 404 unchanged, one re-read after a selector edit) wrote a
    revisit record, which holds none: the version points at the original it refers to, which
    retention carries along when it expires a file, as it does the URL's own original."""
    if "archived" not in rows.columns:
        return rows
    # (a fetch of pages none of which has an original yet makes the column all null, untyped)
    original = pl.col("archived").cast(pl.String).str.json_decode(_ORIGINAL_LOCATION)
    same_body = (original.struct["digest"] == pl.col("payload_digest").cast(pl.String)) & (
        original.struct["file"].is_not_null()
    )
    return rows.with_columns(
        pl.when(same_body).then(original.struct[key]).otherwise(column).alias(column)
        for key, column in _LOCATION_COLUMNS.items()
    )


def previous_versions(wh: Warehouse, wanted: pl.DataFrame) -> pl.DataFrame:
    """url, title, text, fields and fingerprint_version of each ``wanted`` page's version as
    observed then (``wanted``:
    url, host, previous_observed_at), read from the one history file per host and cycle that
    holds it; pages whose version is no longer kept are missing from the answer."""
    columns = ["url", "title", "text", "fields", "fingerprint_version"]
    parts = []
    groups = wanted.drop_nulls("previous_observed_at").partition_by(
        ["host", "previous_observed_at"], as_dict=True
    )
    for (host, moment), pages in groups.items():
        path = wh.cycle_file("page_versions", str(host), moment)
        if not path.exists():
            continue
        parts.append(
            scan_files(path, schema=tables.SCHEMAS["page_versions"], missing_columns="insert")
            .select(*columns, "outcome")
            .filter(pl.col("url").is_in(pages["url"].implode()))
            .collect()
        )
    if not parts:
        return pl.DataFrame(
            schema={**{c: pl.String for c in columns[:-1]}, "fingerprint_version": pl.Int64}
        )
    # One row per URL and time: a re-extraction is dated after the body it re-read. A home
    # from before that kept both at one time; the re-extraction is then the one compared.
    return (
        pl.concat(parts)
        .sort(pl.col("outcome") == "reextracted", maintain_order=True)
        .unique(subset="url", keep="last", maintain_order=True)
        .select(columns)
    )


def _with_rereads(previous: pl.DataFrame, rereads: Mapping[str, ContentRecord]) -> pl.DataFrame:
    """The versions before, where the fetch read a page's archived body again under the
    current settings (stages.rereading), as that reading says: the same extraction as the new
    version's, so its fields compare (its version: null, comparable)."""
    read = pl.DataFrame(
        {
            "url": list(rereads),
            "title": [r.title for r in rereads.values()],
            "text": [r.text for r in rereads.values()],
            "fields": [r.fields_json for r in rereads.values()],
            "fingerprint_version": [None] * len(rereads),
        },
        schema=previous.schema,
    )
    return pl.concat([previous.filter(~pl.col("url").is_in(list(rereads))), read])


def change_rows(
    wh: Warehouse,
    versions: pl.DataFrame,
    plan: pl.DataFrame,
    config: PipelineConfig | None = None,
    rereads: Mapping[str, ContentRecord] | None = None,
) -> pl.DataFrame:
    """changes rows: for each changed version of ``versions`` (this cycle's page_versions), what
    differs from the page's version before (fields, old and new values, text lines added and
    removed). Where the version before is no longer kept, only when it was is known.

    A page back after it was gone (its version 'new' again, for whoever was told it went) is a
    change too when it differs from its version before it went: a product that answered 404
    for a day and came back at another price was a price change no `changes` row, query or
    notification told of (found by an exploratory run). Back as it was, it is none.

    A version read under other settings than the new one (selectors or fields edited, an
    upgrade) is compared with ``rereads`` (url to its archived body read again under the current
    settings by the fetch), else not compared: the row says when, not what.

    A class with ``keep_history = false`` has none. A class's excluded fields are already out
    of ``versions``; they are taken out of the version before too, which may have been
    written before the field was excluded, so that no old value of one is written again."""
    back = pl.col("outcome") == "new"
    changed = versions.filter((pl.col("outcome") == "changed") | back)
    if config is not None:
        unkept = [c for c, r in config.class_retention.items() if not r.keep_history]
        if unkept:
            changed = changed.filter(~pl.col("url_class").is_in(unkept).fill_null(False))
    if changed.is_empty():
        return tables.empty("changes")
    before = plan.select(
        "url", pl.col("version_observed_at").alias("previous_observed_at"), _was_gone(plan)
    ).unique(subset="url", keep="last")
    changed = (
        changed.join(before, on="url", how="left")
        .filter(
            ~back
            | (pl.col("_was_gone").fill_null(False) & pl.col("previous_observed_at").is_not_null())
        )
        .drop("_was_gone")
    )
    if changed.is_empty():
        return tables.empty("changes")
    previous = previous_versions(wh, changed.select("url", "host", "previous_observed_at"))
    if rereads:
        previous = _with_rereads(previous, rereads)
    if config is not None:
        classes = changed.select("url", "url_class").unique(subset="url")
        previous = drop_excluded_fields(previous.join(classes, on="url", how="left"), config)
        previous = previous.drop("url_class")
    paired = changed.join(
        previous.rename(
            {
                "title": "old_title",
                "text": "old_text",
                "fields": "old_fields",
                "fingerprint_version": "old_version",
            }
        ),
        on="url",
        how="left",
    )
    rows = []
    # A loop per changed page: a text comparison per document has no columnar form, and only
    # the pages that changed this cycle pay it.
    for row in paired.iter_rows(named=True):
        if row["outcome"] == "new" and row["old_fields"] is None and row["old_text"] is None:
            continue  # back, and the version before it went is no longer kept
        out = {
            "url": row["url"],
            "host": row["host"],
            "changed_at": row["observed_at"],
            "previous_observed_at": row["previous_observed_at"],
        }
        # a version read under other settings (selectors, fields, an upgrade) cannot be
        # compared field by field: a field added to the config read as "null -> value", a
        # selector moved as a changed value (found by an exploratory run). The row says when
        # the change was seen; what changed is left unsaid, as for a version no longer kept.
        comparable = row["old_version"] is None or row["old_version"] == row["fingerprint_version"]
        if comparable and (row["old_fields"] is not None or row["old_text"] is not None):
            change = version_change(row["old_fields"], row["fields"], row["old_text"], row["text"])
            if row["outcome"] == "new" and not (
                change.changed_fields or change.text_lines_added or change.text_lines_removed
            ):
                continue  # back as it was before it went
            out |= {
                "changed_fields": change.changed_fields,
                "old_values": change.old_values,
                "new_values": change.new_values,
                "text_lines_added": change.text_lines_added,
                "text_lines_removed": change.text_lines_removed,
            }
        rows.append(out)
    if not rows:
        return tables.empty("changes")
    return tables.conform("changes", pl.DataFrame(rows, infer_schema_length=None))
