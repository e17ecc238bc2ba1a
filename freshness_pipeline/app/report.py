"""`freshness report`: the metrics of metrics_sql as of a chosen time (default: the newest
cycle), per host, per URL class and in total."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

import duckdb
import polars as pl
from rich.console import Console
from rich.table import Table

from freshness_pipeline.app.host_names import host_key_of, unknown_hosts_message
from freshness_pipeline.warehouse.metrics_sql import (
    LATEST_CYCLE,
    PARAMETER_NOW,
    metrics_by,
    metrics_total,
)
from freshness_pipeline.warehouse.storage import Warehouse

_HOLDER = re.compile(r"\(PID (\d+)\)")


class Views(Protocol):
    """Anything that answers SQL over the warehouse views: a Warehouse (one short-lived
    connection per query) or one connection held for a whole report."""

    def query(self, sql: str, params: Mapping[str, object] | None = None) -> pl.DataFrame: ...


#: the errors of a read that met a table's file being replaced: a cycle replaces each host's
#: files as it writes them, and DuckDB opens a file more than once per query (footer, then
#: data), so it may get one file's footer and another's bytes ("TProtocolException: Invalid
#: data", a ZSTD failure, a file gone between the glob and the read: found by an exploratory
#: run, 2 reports of 40 beside cycles died of it). A mistake in the SQL is another kind.
_READ_ERRORS = (duckdb.IOException, duckdb.InvalidInputException)
#: such a query is asked again, this many times, a moment longer apart each time
READ_RETRIES = 8


class ConnectionViews:
    """One DuckDB connection for a whole report, so that its tables all read the same files and a
    lock taken half-way through cannot fail it."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def query(self, sql: str, params: Mapping[str, object] | None = None) -> pl.DataFrame:
        for attempt in range(READ_RETRIES + 1):
            try:
                return self._con.sql(sql, params=params or None).pl()
            except duckdb.Error as exc:
                # thrift's own errors come as the base class
                met_a_write = type(exc) is duckdb.Error or isinstance(exc, _READ_ERRORS)
                if attempt == READ_RETRIES or not met_a_write:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")


def in_memory_views(warehouse: Warehouse) -> duckdb.DuckDBPyConnection:
    """The warehouse's views in a private in-memory database: the same views the file holds."""
    con = duckdb.connect()
    warehouse.create_views(con)
    return con


def unavailable_note(path: Path, exc: duckdb.Error) -> str:
    """One line a user can act on: which file, and who holds it when DuckDB says."""
    text = str(exc)
    if "lock" in text.lower():
        holder = _HOLDER.search(text)
        who = f"another process (PID {holder.group(1)})" if holder else "another process"
        reason = f"is locked by {who}"
    else:
        reason = f"cannot be opened ({text.splitlines()[0] if text else type(exc).__name__})"
    return f"{path} {reason}; this report reads the Parquet tables directly"


@contextlib.contextmanager
def open_views(warehouse: Warehouse) -> Iterator[tuple[Views, str | None]]:
    """The DuckDB file's views read-only, else (file locked by a user's read-write session, or
    unreadable) the same views in memory plus a note saying why: a report is a read and should
    not depend on who else has the file open."""
    note: str | None = None
    try:
        con = duckdb.connect(str(warehouse.duckdb_path), read_only=True)
    except duckdb.Error as exc:
        con = in_memory_views(warehouse)
        note = unavailable_note(warehouse.duckdb_path, exc)
    try:
        yield ConnectionViews(con), note
    finally:
        con.close()


def report_by(views: Views, key: str, now: datetime) -> pl.DataFrame:
    """Metrics grouped by 'host' or 'url_class'."""
    return views.query(metrics_by(key, PARAMETER_NOW), {"now": now})


def report_totals(views: Views, now: datetime) -> pl.DataFrame:
    return views.query(metrics_total(PARAMETER_NOW), {"now": now})


def latest_cycle_time(views: Views) -> datetime:
    """The newest cycle's ``now``: reports are as of the data, not of the wall clock, so a
    simulated or backfilled history reads the same any day."""
    frame = views.query(f"SELECT {LATEST_CYCLE} AS t")  # noqa: S608 (fixed SQL)
    latest = frame["t"][0] if frame.height else None
    if latest is None:
        frame = views.query("SELECT max(added_at) AS t FROM seeds")
        latest = frame["t"][0] if frame.height else None
    if latest is None:
        raise ValueError("nothing seeded or fetched yet")
    return latest


def nothing_fetched_yet(views: Views) -> bool:
    """No cycle has fetched anything: every figure of the report is a zero, for want of data
    (after a seed load or dry runs), which a user should be told rather than left to read."""
    frame = views.query(f"SELECT {LATEST_CYCLE} AS t")  # noqa: S608 (fixed SQL)
    return not frame.height or frame["t"][0] is None


def render_table(frame: pl.DataFrame, title: str) -> Table:
    """Text columns never wrap: a host or class name cut in two is harder to read than a wide
    table."""
    table = Table(title=title, show_lines=False, min_width=len(title))
    for name in frame.columns:
        text = frame[name].dtype == pl.String
        width = (
            max((len(v) for v in frame[name].drop_nulls().to_list()), default=0) if text else None
        )
        table.add_column(name, justify="left" if text else "right", min_width=width, no_wrap=text)
    for row in frame.iter_rows():
        table.add_row(*["" if v is None else str(v) for v in row])
    return table


# A column's borders and padding in rich's default table box.
_COLUMN_EDGES = 3


def _column_width(frame: pl.DataFrame, name: str) -> int:
    cells = ["" if v is None else str(v) for v in frame[name].to_list()]
    return max([len(name), *map(len, cells)]) + _COLUMN_EDGES


def fitted_tables(frame: pl.DataFrame, title: str, width: int) -> list[Table]:
    """``frame`` as tables no wider than ``width``: its first column (the key) in each, the
    others in as many parts as it takes. One table of twenty metrics in an 80-column terminal
    left every cell blank; parts keep every name and value whole."""
    key, *rest = frame.columns
    room = width - 1 - _column_width(frame, key)
    parts: list[list[str]] = [[]]
    used = 0
    for name in rest:
        need = _column_width(frame, name)
        if parts[-1] and used + need > room:
            parts.append([])
            used = 0
        parts[-1].append(name)
        used += need
    if len(parts) == 1:
        return [render_table(frame, title)]
    return [
        render_table(frame.select(key, *names), f"{title} ({i} of {len(parts)})")
        for i, names in enumerate(parts, start=1)
    ]


#: What each column of the report means, printed under its tables (one definition: a test
#: checks that every column the report shows is here).
COLUMN_LEGEND: dict[str, str] = {
    "urls": "URLs in the state",
    "active / new / gone / blocked / error": "URLs by status (new: never answered yet, not "
    "fetched or every fetch so far failed or was throttled; error: 3 failed fetches in a row)",
    "median_rate_per_day": "median change rate (changes/day) of the active pages fetched at "
    "least twice (pages seen once carry their class's prior)",
    "expected_age_h": "value-weighted expected hours our copies (the active pages) have been "
    "stale (the lag); pages without a copy are not in it",
    "copied_share": "share by value of the pages to keep (not gone or blocked) that have a copy "
    "(active): what expected_age_h covers",
    "requests / conditional": "page requests sent / of them with a validator",
    "share_304": "conditional requests answered 304",
    "unchanged_share": "bodies fetched again that had not changed (a 304 would have saved them)",
    "changes": "changes detected",
    "requests_per_change / bytes_per_change": "what one detected change cost",
    "errors / throttled": "failed requests / 429 and 503 answers",
    "verified / verify_forecast / verify_observed": "random verification fetches, the share "
    "the model forecast to have changed, the share that had",
    "verify_z / verify_verdict": "see the note above",
    "cycle_planned / cycle_sent / cycle_deferred": "the host's last fetching cycle: its share "
    "of the plan, what went out, what was left for later",
    "capacity / gap_s / concurrency": "the fetches its learned pace allows per cycle, and that "
    "pace",
}


def legend_columns() -> set[str]:
    return {name for key in COLUMN_LEGEND for name in key.split(" / ")}


VERIFY_NOTE = (
    "verify_z: on fetches drawn at random whatever the model thought, changes found minus "
    "changes forecast, in standard deviations: near 0 the change model is right, beyond +-3 its "
    "rates are off (positive: pages change more than it thinks); with too few such fetches "
    "it is left blank and verify_verdict says so."
)


#: Hosts the report lists by default: a crawl of 10,000 hosts printed 10,000 rows, and the
#: rest are a ``--host`` or a SQL query away.
DEFAULT_HOST_ROWS = 30


def chosen_hosts(
    by_host: pl.DataFrame, hosts: Sequence[str] | None, host_rows: int | None
) -> tuple[pl.DataFrame, str | None]:
    """The by-host rows to print and a line on those left out: the named ``hosts`` (an unknown
    one is a ValueError naming it), else the ``host_rows`` hosts with the most URLs, in host
    order (None: all)."""
    if hosts:
        keys = list(dict.fromkeys(host_key_of(h) for h in hosts))
        listed = by_host["host"].to_list()
        unknown = sorted(set(keys) - set(listed), key=keys.index)
        if unknown:
            sample = ", ".join(sorted(listed)[:5]) or "none yet"
            raise ValueError(
                f"no such host in this home: {unknown_hosts_message(unknown, listed)} (hosts "
                f"are spelt host or host:port as `freshness hosts` lists them; for example "
                f"{sample})"
            )
        return by_host.filter(pl.col("host").is_in(keys)), None
    if host_rows is None or by_host.height <= host_rows:
        return by_host, None
    shown = (
        by_host.sort(["urls", "host"], descending=[True, False], nulls_last=True)
        .head(host_rows)
        .sort("host")
    )
    rest = by_host.height - shown.height
    return shown, (
        f"{rest:,} more hosts not shown (the {host_rows} with the most URLs are): "
        "`freshness report --host H` for one, `--all-hosts` for every one, or SQL on the "
        "host_metrics view"
    )


def coverage_note(totals: Mapping[str, object]) -> str | None:
    """A line under the totals when most of the pages to keep have no copy, by count or by
    value: the expected age is over the copies we have, and after a first cycle that fetched 50
    of 356 pages its 0.0 read as a perfect crawl (found by a newcomer). By count too, because
    a first cycle fetches the most valuable pages first: there a seventh of the pages held two
    thirds of the value."""
    share = totals.get("copied_share")
    keys = ("urls", "gone", "blocked", "active", "error")
    n = {k: v for k in keys if isinstance(v := totals.get(k), int)}
    if not isinstance(share, float) or len(n) < len(keys):
        return None
    kept = n["urls"] - n["gone"] - n["blocked"]
    if share >= 0.5 and 2 * n["active"] >= kept:
        return None
    lack = "have no copy yet" + (" or fail to answer" if n["error"] else "")
    return (
        f"note: {kept - n['active']} of the {kept} pages to keep {lack}: expected_age_h is "
        f"over the {n['active']} that have one (copied_share {share}: their share by value)"
    )


def print_report(
    views: Views,
    moment: datetime,
    console: Console,
    *,
    hosts: Sequence[str] | None = None,
    host_rows: int | None = DEFAULT_HOST_ROWS,
) -> None:
    """The tables of `freshness report`, in one place so that the demo ends with exactly what
    `freshness report` will show afterwards. ``hosts`` and ``host_rows``: see
    :func:`chosen_hosts` (the totals stay over every host)."""
    by_host, left_out = chosen_hosts(report_by(views, "host", moment), hosts, host_rows)
    totals = report_totals(views, moment).row(0, named=True)
    listed = pl.DataFrame(
        {"metric": list(totals), "value": ["" if v is None else str(v) for v in totals.values()]}
    )
    console.print(render_table(listed, f"All hosts (as of {moment:%Y-%m-%d %H:%M} UTC)"))
    uncovered = coverage_note(totals)
    if uncovered:
        console.print(uncovered, highlight=False)
    for table in fitted_tables(by_host, "By host", console.width):
        console.print(table)
    if left_out:
        console.print(left_out, highlight=False)
    for table in fitted_tables(
        report_by(views, "url_class", moment), "By URL class", console.width
    ):
        console.print(table)
    console.print(VERIFY_NOTE)
    console.print("Columns:")
    for key, meaning in COLUMN_LEGEND.items():
        console.print(f"  {key}: {meaning}", highlight=False)
