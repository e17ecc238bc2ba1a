"""Reading a user's seed file: a CSV with a ``url`` header (comma-separated; tab- and
semicolon-separated tables, as spreadsheets export them, are read too), or plain text with one
URL per line. Under a header of ``url`` alone there is nothing to separate: each line is one
URL, commas and all.

Bad rows never cost the good ones: each rejected line is reported with its number and reason
and skipped. Only a file with nothing usable in it is an error.

A seed file can hold millions of lines, so they are parsed as columns: split, decoded and cut
into cells by polars; only the rare line that needs it (a quoted cell, a byte that is not UTF-8,
a value polars cannot read) goes through Python's csv and float. Normalization is
``science.normalize``'s per-URL loop, about 100 us a URL; a URL it would leave exactly as it is
(lower-case http(s), a plain host, a non-default port, a plain path, nothing else) is recognized
by a pattern over the whole column instead, and every other URL still goes through it.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from freshness_pipeline.science.normalize import MAX_URL_LENGTH, normalize_url_column
from freshness_pipeline.warehouse import tables

MAX_LINE_CHARS = 8192

# A URL science.normalize.normalize_url returns unchanged, with its authority (test_seeds checks
# this against normalize_url): lower-case scheme; host labels as _normalize_host accepts them,
# already lower-case ASCII, no trailing dot; a port written without leading zeros (the default
# port of the scheme is dropped, checked apart); a path of characters canonicalize_url neither
# escapes nor unescapes ('%', ';' and non-ASCII excluded), with no dot segment; no query or
# fragment.
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_PLAIN_URL = (
    r"^(?<scheme>https?)://(?<host>" + _LABEL + r"(?:\." + _LABEL + r")*)"
    r"(?::(?<port>[1-9][0-9]{0,4}))?(?<path>/[A-Za-z0-9\-_~!$&'()*+,=:@/.]*)$"
)
_DOT_SEGMENT = r"/\.\.?(?:/|$)"
_ENDS_IN_NUMBER = r"(?:^|\.)(?:0x[0-9a-f]*|[0-9]+)$"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_QUAD = rf"^{_OCTET}(?:\.{_OCTET}){{3}}$"
_DEFAULT_PORT = {"http": 80, "https": 443}


@dataclass
class SeedParse:
    #: url (normalized), host, value, url_class, line, written (the line's URL where it is not
    #: ``url``); a null value or class was not given
    rows: pl.DataFrame
    errors: list[tuple[int, str]] = field(default_factory=list)
    duplicates: int = 0
    fatal: str | None = None
    #: what was read but not used, said once per file (unknown columns, extra cells)
    notes: list[str] = field(default_factory=list)
    #: one duplicate, to show what "after normalization" means: (its line, its URL as written,
    #: the line of the same URL's first spelling, that spelling)
    duplicate_example: tuple[int, str, int, str] | None = None


def _lines(data: bytes) -> tuple[pl.DataFrame, list[tuple[int, str]]]:
    """``line`` (1-based, as bytes.splitlines numbers them) and ``text`` of every line that is
    neither blank nor a comment, and the errors of those too long or not UTF-8."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    text = data.decode("utf-8", errors="replace")
    frame = (
        pl.DataFrame({"text": [text]})
        .select(pl.col("text").str.split("\n"))
        .explode("text")
        .with_row_index("line", offset=1)
        .with_columns(pl.col("line").cast(pl.Int64))
    )
    suspect = frame.filter(
        pl.col("text").str.contains("\ufffd", literal=True)
        | (pl.col("text").str.len_bytes() > MAX_LINE_CHARS)
    )
    errors: dict[int, str] = {}
    if suspect.height:
        raw = data.split(b"\n")
        for number in suspect["line"].to_list():
            line = raw[number - 1]
            if len(line) > MAX_LINE_CHARS:
                errors[number] = f"line is {len(line)} bytes long (limit {MAX_LINE_CHARS})"
                continue
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                errors[number] = f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
    stripped = pl.col("text").str.strip_chars()
    kept = frame.filter(
        (stripped != "") & ~stripped.str.starts_with("#") & ~pl.col("line").is_in(list(errors))
    )
    return kept, sorted(errors.items())


#: the separators a seed table may use: comma (CSV), then tab and semicolon, which spreadsheet
#: exports in many locales write; the header's ``url`` cell says which one a file uses
DELIMITERS = (",", "\t", ";")


def _header_delimiter(text: str) -> str | None:
    """The separator of a table header line, or None when the line is not a header (plain
    text: one URL per line)."""
    if text.strip().lower().startswith(("http:", "https:")):
        return None
    for delimiter in DELIMITERS:
        names = [c.strip().lower() for c in next(csv.reader([text], delimiter=delimiter), [])]
        if "url" in names:
            return delimiter
    # several comma-separated names but no url: a CSV header missing its column, said as such
    return "," if len(next(csv.reader([text]), [])) > 1 else None


def _cells(lines: pl.DataFrame, errors: list[tuple[int, str]], delimiter: str) -> pl.DataFrame:
    """Each line's cells (``cells``, a list): a split at ``delimiter``, or Python's csv for a
    line with a quote in it (the only case where the two differ)."""
    quoted = pl.col("text").str.contains('"', literal=True)
    plain = lines.filter(~quoted).with_columns(cells=pl.col("text").str.split(delimiter))
    rows: list[tuple[int, list[str]]] = []
    for number, text in lines.filter(quoted).select("line", "text").iter_rows():
        try:
            rows.append((number, next(csv.reader([text], delimiter=delimiter))))
        except csv.Error as exc:
            errors.append((number, f"unreadable CSV row ({exc})"))
    special = pl.DataFrame(
        rows, schema={"line": pl.Int64, "cells": pl.List(pl.String)}, orient="row"
    )
    return pl.concat([plain.select("line", "cells"), special]).sort("line")


def _whole_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """``line`` and ``raw_url`` of a file whose header names only the ``url`` column: each line
    is one URL, commas and all (``/wiki/Paris,_Texas``), and only a line that is one quoted
    cell goes through Python's csv to be unquoted."""
    stripped = lines.select("line", raw_url=pl.col("text").str.strip_chars())
    quoted = pl.col("raw_url").str.starts_with('"')
    rows: list[tuple[int, str]] = []
    for number, text in stripped.filter(quoted).iter_rows():
        cells = next(csv.reader([text]), [])
        rows.append((number, cells[0].strip() if len(cells) == 1 else text))
    unquoted = pl.DataFrame(rows, schema={"line": pl.Int64, "raw_url": pl.String}, orient="row")
    return pl.concat([stripped.filter(~quoted), unquoted]).sort("line")


def _values(texts: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(value, problem) per cell text: empty is null (not given, so that it keeps a value given
    before); a number must be finite and >= 0."""
    stripped = texts.str.strip_chars()
    parsed = stripped.cast(pl.Float64, strict=False)
    # What polars does not read, Python's float() may (underscores, odd spellings): ask it.
    retry = parsed.is_null() & stripped.is_not_null() & (stripped != "")
    if retry.any():
        values = parsed.to_list()
        for i in retry.arg_true().to_list():
            try:
                values[i] = float(stripped[i])
            except ValueError:
                values[i] = None
        parsed = pl.Series(values, dtype=pl.Float64)
    frame = pl.DataFrame({"text": stripped, "value": parsed})
    out = frame.select(
        value=pl.when(pl.col("text").is_null() | (pl.col("text") == ""))
        .then(None)
        .otherwise(pl.col("value")),
        problem=pl.when(pl.col("text").is_null() | (pl.col("text") == ""))
        .then(None)
        .when(pl.col("value").is_null())
        .then(pl.format("value '{}' is not a number", pl.col("text")))
        .when(~pl.col("value").is_finite() | (pl.col("value") < 0))
        .then(pl.format("value '{}' must be a finite number >= 0", pl.col("text"))),
    )
    return out["value"], out["problem"]


def plain_urls(urls: pl.Series) -> pl.DataFrame:
    """``url`` and ``host`` (its authority) of each URL that normalization would leave as it is,
    null for every other one."""
    parts = urls.str.extract_groups(_PLAIN_URL).struct.unnest()
    port = parts["port"].cast(pl.Int64, strict=False)
    default = parts["scheme"].replace_strict(_DEFAULT_PORT, default=None, return_dtype=pl.Int64)
    ok = (
        parts["scheme"].is_not_null()
        & (urls.str.len_bytes() <= MAX_URL_LENGTH)
        & (parts["host"].str.len_bytes() <= 253)
        & (port.is_null() | ((port <= 65535) & (port != default)))
        & ~parts["path"].str.contains(_DOT_SEGMENT)
        # a host ending in a number is an IPv4 address, left as it is in dotted-quad form only
        & (~parts["host"].str.contains(_ENDS_IN_NUMBER) | parts["host"].str.contains(_QUAD))
    ).fill_null(False)
    authority = (
        pl.when(pl.col("port").is_null())
        .then("host")
        .otherwise(pl.concat_str(["host", pl.lit(":"), "port"]))
    )
    return pl.DataFrame(
        {"ok": ok, "url": urls, "host": parts["host"], "port": parts["port"]}
    ).select(url=pl.when("ok").then("url"), host=pl.when("ok").then(authority))


def normalize_seed_urls(urls: pl.Series) -> pl.DataFrame:
    """``normalize_url_column(urls)``, with the URLs it would leave unchanged recognized as
    columns first."""
    plain = plain_urls(urls)
    rest = plain["url"].is_null()
    if not rest.any():
        return plain.with_columns(error=pl.lit(None, dtype=pl.String))
    slow = normalize_url_column(urls.filter(rest))
    positions = rest.arg_true()
    return plain.with_columns(
        url=plain["url"].scatter(positions, slow["url"]),
        host=plain["host"].scatter(positions, slow["host"]),
        error=pl.Series([None] * urls.len(), dtype=pl.String).scatter(positions, slow["error"]),
    )


def parse_seeds(data: bytes) -> SeedParse:
    """Parse seed bytes into normalized rows and per-line errors."""
    lines, found = _lines(data)
    errors = list(found)
    if not lines.height:
        return SeedParse(rows=_empty_rows(), errors=errors, fatal="the seed file has no URLs")
    header_number, header = lines.row(0)
    delimiter = _header_delimiter(header)
    bad_values = 0
    if delimiter is not None:
        names = [c.strip().lower() for c in next(csv.reader([header], delimiter=delimiter))]
        if "url" not in names:
            return SeedParse(
                rows=_empty_rows(),
                errors=errors,
                fatal=f"line {header_number}: the CSV header {header.strip()!r} has no 'url' column",
            )
        if names == ["url"]:
            notes = []
            table = _whole_lines(lines.slice(1)).with_columns(
                value_text=pl.lit(None, dtype=pl.String), url_class=pl.lit(None, dtype=pl.String)
            )
        else:
            cells = _cells(lines.slice(1), errors, delimiter)
            notes = _unused_cells(header_number, names, cells)

            def cell(name: str) -> pl.Expr:
                at = names.index(name) if name in names else None
                if at is None:
                    return pl.lit(None, dtype=pl.String)
                return pl.col("cells").list.get(at, null_on_oob=True)

            table = cells.select(
                "line",
                raw_url=cell("url").str.strip_chars(),
                value_text=cell("value"),
                url_class=cell("url_class").str.strip_chars(),
                _cells=pl.col("cells").list.len(),
            )
            mixed = _other_separator(table, delimiter, len(names))
            errors += [
                (
                    n,
                    f"one cell where the header has {len(names)}, and the URL ends in {tail!r}: "
                    f"a row separated by {sep!r} in a file whose header uses {delimiter!r}?",
                )
                for n, tail, sep in mixed.iter_rows()
            ]
            table = table.join(mixed.select("line"), on="line", how="anti").drop("_cells")
        no_url = table.filter(pl.col("raw_url").is_null() | (pl.col("raw_url") == ""))
        errors += [(n, "no url in this row") for n in no_url["line"].to_list()]
        table = table.filter(pl.col("raw_url").is_not_null() & (pl.col("raw_url") != ""))
        value, problem = _values(table["value_text"])
        table = table.with_columns(value=value, problem=problem)
        bad = table.filter(pl.col("problem").is_not_null())
        errors += list(bad.select("line", "problem").iter_rows())
        bad_values = bad.height
        raw = table.filter(pl.col("problem").is_null()).select(
            "line",
            "raw_url",
            "value",
            pl.when(pl.col("url_class") != "").then("url_class").alias("url_class"),
        )
    else:
        notes = []
        raw = lines.select(
            "line",
            raw_url=pl.col("text").str.strip_chars(),
            value=pl.lit(None, dtype=pl.Float64),
            url_class=pl.lit(None, dtype=pl.String),
        )
    normalized = normalize_seed_urls(raw["raw_url"])
    rows = pl.concat([raw, normalized], how="horizontal")
    failed = rows.filter(pl.col("error").is_not_null())
    errors += [
        (number, f"{reason}: {raw_url[:200]!r}")
        for number, raw_url, reason in failed.select("line", "raw_url", "error").iter_rows()
    ]
    good = rows.filter(pl.col("error").is_null()).with_columns(
        written=pl.when(pl.col("raw_url") != pl.col("url")).then("raw_url")
    )
    unique = good.unique(subset="url", keep="last", maintain_order=True)
    example = None
    if unique.height < good.height:
        repeated = good.filter(pl.col("url").is_duplicated()).sort("line")
        first = repeated.row(0, named=True)
        again = repeated.filter(pl.col("url") == first["url"]).row(1, named=True)
        example = (again["line"], again["raw_url"], first["line"], first["raw_url"])
        # a URL given twice keeps the last value and class given for it: an empty cell is none
        unique = (
            good.group_by("url", maintain_order=True)
            .agg(
                pl.col("host").last(),
                pl.col("value").drop_nulls().last(),
                pl.col("url_class").drop_nulls().last(),
                pl.col("line").last(),
                pl.col("written").last(),
            )
            .sort("line")
        )
    errors.sort()
    return SeedParse(
        rows=unique.select("url", "host", "value", "url_class", "line", "written"),
        errors=errors,
        duplicates=good.height - unique.height,
        duplicate_example=example,
        fatal=None
        if unique.height
        else "no valid URL in the seed file"
        if not bad_values
        else f"no usable row in the seed file ({bad_values} with a bad value, listed above)",
        notes=notes,
    )


KNOWN_COLUMNS = ("url", "value", "url_class")


def _other_separator(table: pl.DataFrame, delimiter: str, columns: int) -> pl.DataFrame:
    """``line``, the URL's ``tail`` and the ``separator`` of the rows of one cell whose URL
    ends in another separator and cells that read as the rest of the row (a number or
    nothing, then words or nothing): a ``url;value`` header over ``http://x/a,1,`` rows
    seeded the URL ``http://x/a,1,`` without a word (found by a newcomer). A URL with a comma
    or a semicolon of its own (``/wiki/Paris,_Texas``, ``;jsessionid=...``) is left alone."""
    found = []
    for other in DELIMITERS:
        if other == delimiter:
            continue
        sep = re.escape(other)
        rest = rf"(?:{sep}[\w .-]*){{0,{max(columns - 2, 0)}}}"
        tail = rf"({sep}\s*(?:\d+(?:\.\d*)?)?\s*{rest})$"
        found.append(
            table.filter(pl.col("_cells") == 1)
            .select("line", tail=pl.col("raw_url").str.extract(tail, 1))
            .filter(pl.col("tail").is_not_null())
            .with_columns(separator=pl.lit(other))
        )
    return pl.concat(found).unique(subset="line", keep="first", maintain_order=True).sort("line")


def _unused_cells(header_number: int, names: list[str], cells: pl.DataFrame) -> list[str]:
    """What a CSV file holds that the seed load ignores, once per file rather than per row: a
    misspelt column name (``url_clas``) otherwise loses its values without a word."""
    notes: list[str] = []
    unknown = [n for n in names if n not in KNOWN_COLUMNS]
    if unknown:
        notes.append(
            f"line {header_number}: column(s) {', '.join(repr(n) for n in unknown)} ignored "
            f"(a seed file's columns are {', '.join(KNOWN_COLUMNS)})"
        )
    longer = cells.filter(pl.col("cells").list.len() > len(names))
    if longer.height:
        notes.append(
            f"{longer.height} row(s) have more cells than the header's {len(names)} columns, "
            f"the extra cells ignored (first: line {longer['line'][0]})"
        )
    return notes


def _empty_rows() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "url": pl.String,
            "host": pl.String,
            "value": pl.Float64,
            "url_class": pl.String,
            "line": pl.Int64,
            "written": pl.String,
        }
    )


def merge_seeds(
    existing: pl.DataFrame, new_rows: pl.DataFrame, *, added_at: datetime, source: str = "seed"
) -> pl.DataFrame:
    """Union of known and new seeds (of one host or many): the newest value and class given win
    (a null one was not given, and keeps the one before; a value never given is 1.0), the
    first ``added_at`` is kept, so seeding the same file twice changes nothing. The newest
    spelling given is the one asked for (``written``; null: the key as it is)."""
    incoming = new_rows.select(
        "url",
        "host",
        "value",
        "url_class",
        pl.lit(source).alias("source"),
        pl.lit(added_at).cast(pl.Datetime("us", "UTC")).alias("added_at"),
        (pl.col("written") if "written" in new_rows.columns else pl.lit(None))
        .cast(pl.String)
        .alias("written"),
    )
    known = tables.conform("seeds", existing).select(incoming.columns)
    combined = pl.concat([known, incoming], how="vertical_relaxed")
    return (
        combined.group_by("url")
        .agg(
            pl.col("host").last(),
            pl.col("value").drop_nulls().last(),
            pl.col("url_class").drop_nulls().last(),
            pl.col("source").last(),
            pl.col("added_at").min(),
            pl.col("written").last(),
        )
        .with_columns(pl.col("value").fill_null(1.0))
        .select(incoming.columns)
        .sort("url")
    )
