"""Reading a user's seed file: a CSV with a ``url`` header, or plain text with one URL per line.

Bad rows never cost the good ones: each rejected line is reported with its number and reason
and skipped. Only a file with nothing usable in it is an error.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from freshness_pipeline.science.normalize import normalize_url_column

MAX_LINE_CHARS = 8192


@dataclass
class SeedParse:
    rows: pl.DataFrame  # url (normalized), host, value, url_class, line
    errors: list[tuple[int, str]] = field(default_factory=list)
    duplicates: int = 0
    fatal: str | None = None


def _decode_lines(data: bytes, errors: list[tuple[int, str]]) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, raw in enumerate(data.splitlines(), start=1):
        if len(raw) > MAX_LINE_CHARS:
            errors.append((number, f"line is {len(raw)} bytes long (limit {MAX_LINE_CHARS})"))
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append((number, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"))
            continue
        if text.strip() and not text.lstrip().startswith("#"):
            lines.append((number, text))
    return lines


def _looks_like_csv_header(text: str) -> bool:
    first = next(csv.reader([text]), [])
    names = [c.strip().lower() for c in first]
    return len(names) > 1 or names == ["url"] or ("url" in names)


def _parse_value(text: str | None) -> tuple[float | None, str | None]:
    if text is None or not text.strip():
        return 1.0, None
    try:
        value = float(text)
    except ValueError:
        return None, f"value {text.strip()!r} is not a number"
    if not math.isfinite(value) or value < 0:
        return None, f"value {text.strip()!r} must be a finite number >= 0"
    return value, None


def parse_seeds(data: bytes) -> SeedParse:
    """Parse seed bytes into normalized rows and per-line errors."""
    errors: list[tuple[int, str]] = []
    lines = _decode_lines(data, errors)
    records: list[tuple[int, str, float, str | None]] = []
    if not lines:
        return SeedParse(rows=_empty_rows(), errors=errors, fatal="the seed file has no URLs")
    header_number, header = lines[0]
    if _looks_like_csv_header(header) and not header.strip().lower().startswith(
        ("http:", "https:")
    ):
        names = [c.strip().lower() for c in next(csv.reader([header]))]
        if "url" not in names:
            return SeedParse(
                rows=_empty_rows(),
                errors=errors,
                fatal=f"line {header_number}: the CSV header {header.strip()!r} has no 'url' column",
            )
        url_at = names.index("url")
        value_at = names.index("value") if "value" in names else None
        class_at = names.index("url_class") if "url_class" in names else None
        for number, text in lines[1:]:
            try:
                cells = next(csv.reader([text]))
            except csv.Error as exc:
                errors.append((number, f"unreadable CSV row ({exc})"))
                continue
            if len(cells) <= url_at or not cells[url_at].strip():
                errors.append((number, "no url in this row"))
                continue
            value, problem = _parse_value(
                cells[value_at] if value_at is not None and value_at < len(cells) else None
            )
            if problem:
                errors.append((number, problem))
                continue
            url_class = (
                cells[class_at].strip() or None
                if class_at is not None and class_at < len(cells)
                else None
            )
            records.append((number, cells[url_at].strip(), float(value or 0.0), url_class))
    else:
        for number, text in lines:
            records.append((number, text.strip(), 1.0, None))

    raw = pl.DataFrame(
        records,
        schema={
            "line": pl.Int64,
            "raw_url": pl.String,
            "value": pl.Float64,
            "url_class": pl.String,
        },
        orient="row",
    )
    normalized = normalize_url_column(raw["raw_url"])
    rows = pl.concat([raw, normalized], how="horizontal")
    for number, raw_url, reason in (
        rows.filter(pl.col("error").is_not_null()).select("line", "raw_url", "error").iter_rows()
    ):
        errors.append((number, f"{reason}: {raw_url[:200]!r}"))
    good = rows.filter(pl.col("error").is_null())
    unique = good.unique(subset="url", keep="last", maintain_order=True)
    errors.sort()
    return SeedParse(
        rows=unique.select("url", "host", "value", "url_class", "line"),
        errors=errors,
        duplicates=good.height - unique.height,
        fatal=None if unique.height else "no valid URL in the seed file",
    )


def _empty_rows() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "url": pl.String,
            "host": pl.String,
            "value": pl.Float64,
            "url_class": pl.String,
            "line": pl.Int64,
        }
    )


def merge_seeds(
    existing: pl.DataFrame, new_rows: pl.DataFrame, *, added_at: datetime, source: str = "seed"
) -> pl.DataFrame:
    """Union of known and new seeds for one host: the newest value and class win, the first
    ``added_at`` is kept, so seeding the same file twice changes nothing."""
    incoming = new_rows.select(
        "url",
        "host",
        "value",
        "url_class",
        pl.lit(source).alias("source"),
        pl.lit(added_at).cast(pl.Datetime("us", "UTC")).alias("added_at"),
    )
    combined = pl.concat([existing.select(incoming.columns), incoming], how="vertical_relaxed")
    first_added = combined.group_by("url").agg(pl.col("added_at").min())
    latest = combined.unique(subset="url", keep="last", maintain_order=True).drop("added_at")
    return latest.join(first_added, on="url").select(incoming.columns).sort("url")
