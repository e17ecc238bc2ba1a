"""A URL class's excluded fields (``[url_classes.C.retention] exclude_fields``): taken out of
rows before anything is written, and out of what was written before the field was excluded.

A field excluded for privacy after it was collected stayed in the page_versions and changes
rows already written, and `freshness diff` and `freshness export` kept handing it out (found
by an exploratory run). The first cycle under a new exclusion rewrites the history files that
hold a value of it (:func:`scrub_history`, from the retention step); a small record beside the
tables says which exclusions were applied, so later cycles do not read the history again. The
archive's bodies and the extracted text are the page as served and keep whatever it showed.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from freshness_pipeline.config import PipelineConfig
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.archive.files import atomic_write_bytes
from freshness_pipeline.warehouse.layout import read_file, scan_files
from freshness_pipeline.warehouse.storage import Warehouse

__all__ = ["drop_excluded_fields", "scrub_history"]

#: Which classes' fields the history was scrubbed of, beside the tables.
APPLIED_FILE = ".excluded_fields.json"


def drop_excluded_fields(
    df: pl.DataFrame, config: PipelineConfig, column: str = "fields"
) -> pl.DataFrame:
    """``df`` with each row's ``column`` (a JSON object of fields) less the fields its
    url_class excludes (``exclude_fields``): the one place such values are taken out before
    anything is written, so they never reach disk. The fingerprint was taken before, so an
    excluded field still counts in it.

    Polars has no expression that removes a key from a JSON object, so the affected rows'
    objects are decoded and encoded again, as the fetcher encodes them (sorted keys)."""
    excluded = _excluded(config)
    if not excluded or df.is_empty() or column not in df.columns:
        return df
    affected = pl.col("url_class").is_in(list(excluded)).fill_null(False)
    rows = df.with_row_index("_row").filter(affected)
    if rows.is_empty():
        return df

    # A loop over the affected rows only: the other classes' objects are not decoded.
    cleaned = [
        _without_keys(text, excluded[url_class])
        for text, url_class in zip(rows[column], rows["url_class"], strict=True)
    ]
    replaced = pl.DataFrame({"_row": rows["_row"], "_clean": pl.Series(cleaned, dtype=pl.String)})
    return (
        df.with_row_index("_row")
        .join(replaced, on="_row", how="left")
        .with_columns(
            pl.when(affected).then(pl.col("_clean")).otherwise(pl.col(column)).alias(column)
        )
        .drop("_row", "_clean")
    )


def _without_keys(text: str | None, names: list[str]) -> str | None:
    """A JSON object's text less ``names``, encoded as the fetcher encodes fields (sorted
    keys)."""
    if text is None:
        return None
    data = json.loads(text)
    for name in names:
        data.pop(name, None)
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


def _excluded(config: PipelineConfig) -> dict[str, list[str]]:
    return {
        c: sorted(r.exclude_fields) for c, r in config.class_retention.items() if r.exclude_fields
    }


def _applied(path: Path) -> dict[str, list[str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): [str(f) for f in v] for k, v in data.items() if isinstance(v, list)}


def _without_fields(changes: pl.DataFrame, excluded: dict[str, list[str]]) -> pl.DataFrame:
    """changes rows (with ``url_class``) less the excluded fields' names and values."""

    out = []
    for row in changes.iter_rows(named=True):
        names = excluded.get(row["url_class"] or "", [])
        if names:
            row = {
                **row,
                "changed_fields": [f for f in row["changed_fields"] or [] if f not in names],
                "old_values": _without_keys(row["old_values"], names),
                "new_values": _without_keys(row["new_values"], names),
            }
        out.append(row)
    return pl.DataFrame(out, schema=changes.schema)


def _holding(column: str, table: str, new: dict[str, list[str]]) -> pl.Expr:
    """Rows (with ``_class``) whose JSON ``column`` (and a changes row's new values) names a
    field its class newly excludes."""
    named = pl.lit(False)
    for cls, names in new.items():
        for name in names:
            key = f"{json.dumps(name)}:"
            holds = pl.col(column).str.contains(key, literal=True).fill_null(False)
            if table == "changes":
                holds = holds | pl.col("new_values").str.contains(key, literal=True).fill_null(
                    False
                )
            named = named | ((pl.col("_class") == cls) & holds).fill_null(False)
    return named


def scrub_history(wh: Warehouse, config: PipelineConfig) -> int:
    """Rewrite the page_versions and changes files that hold a value of a field its class
    excludes now and did not when the history was last scrubbed; the number of rows
    rewritten. A row's class is its URL's in url_state, else its own. One scan of the columns
    concerned per host and table finds the files to rewrite; each is replaced whole (a kill
    leaves it as it was, and the next cycle does it again)."""
    excluded = _excluded(config)
    record = wh.root / APPLIED_FILE
    applied = _applied(record)
    new = {c: [f for f in names if f not in applied.get(c, [])] for c, names in excluded.items()}
    if not any(new.values()):
        return 0
    rewritten = 0
    for host in sorted(set(wh.hosts_in("page_versions")) | set(wh.hosts_in("changes"))):
        classes = (
            wh.read("url_state", [host], columns=["url", "url_class"])
            .unique(subset="url", keep="last")
            .rename({"url_class": "_state_class"})
        )
        for table, column in (("page_versions", "fields"), ("changes", "old_values")):
            paths = wh.files(table, [host])
            if not paths:
                continue
            own = "url_class" if table == "page_versions" else None
            found = (
                scan_files(paths, schema=tables.SCHEMAS[table], include_file_paths="_file")
                .select(
                    "_file",
                    "url",
                    column,
                    *(["new_values"] if table == "changes" else []),
                    *([own] if own else []),
                )
                .join(classes.lazy(), on="url", how="left")
                .with_columns(
                    pl.coalesce(
                        "_state_class", pl.col(own) if own else pl.lit(None, pl.String)
                    ).alias("_class")
                )
                .filter(_holding(column, table, new))
                .group_by("_file")
                .len()
                .collect()
            )
            for path, hit in found.iter_rows():
                rows = tables.conform(table, read_file(path)).join(classes, on="url", how="left")
                if table == "page_versions":
                    cleaned = drop_excluded_fields(
                        rows.with_columns(url_class=pl.coalesce("_state_class", "url_class")),
                        config,
                    ).with_columns(url_class=rows["url_class"])
                else:
                    cleaned = _without_fields(
                        rows.rename({"_state_class": "url_class"}), excluded
                    ).drop("url_class")
                wh._atomic_write_many([(tables.conform(table, cleaned), Path(path))])
                rewritten += hit
    atomic_write_bytes(record, json.dumps(excluded, sort_keys=True).encode())
    return rewritten
