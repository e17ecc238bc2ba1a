"""Change notifications: new rows of ``changes`` sent as one message per batch to every Apprise
URL of ``[notify]`` (config.NotifyConfig).

Kept free of Dagster so the sensor stays a thin shell and the selection, the message and the
cursor can be tested against a real warehouse and a real webhook.

The cursor is JSON text (a sensor's cursor). For each target (keyed by a hash of its URL, so
no token lands in the instance) and host it holds the newest ``changed_at`` already delivered
and the URLs delivered at that instant. A host's history files are named by cycle, so the next
evaluation opens only the files at or after that instant, and

* several cycles arriving at once are one batch (everything after the instant);
* a re-run cycle rewriting its file at the same instant sends only the URLs it added;
* hosts whose cycles run at different times (partitions, late backfills) do not hide each
  other's changes, since each host has its own instant;
* a target that fails keeps its old position while the others move on: the failed one gets
  the held changes on a later evaluation, the others never twice.

What it cannot see: a re-run of a cycle older than a host's newest delivered one that adds
URLs to that old file (Dagster re-executions replay their own cycle, normally the newest).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import polars as pl

from freshness_pipeline.config import NotifyConfig
from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.layout import scan_files
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.warehouse.undo import undone_cycles

__all__ = [
    "NOTIFY_READ_TIMEOUT_S",
    "NotifyOutcome",
    "build_message",
    "notify_changes",
    "select_changes",
    "target_key",
]

CURSOR_VERSION = 1
#: many services cut or refuse long messages (Discord 2000, Telegram 4096 characters); Apprise
#: splits per service, but a batch of thousands should point at the table, not be pasted whole
MAX_BODY_CHARS = 6000
MAX_VALUE_CHARS = 160
#: how long a target may take to answer, unless its URL sets Apprise's ``rto``: Apprise's own 4
#: seconds called a send failed that a slow receiver (a serverless cold start) had taken, and
#: the change went again at every tick while it stayed slow. Targets are sent one after
#: another inside a sensor evaluation (Dagster stops one after 60 s), so not much longer.
NOTIFY_READ_TIMEOUT_S = 20.0

#: host -> (newest changed_at delivered, URLs delivered at that instant)
Progress = dict[str, tuple[datetime, frozenset[str]]]


@dataclass(frozen=True)
class NotifyOutcome:
    """What one evaluation did. ``cursor`` is the text to store next (unchanged when nothing
    was delivered); ``failures`` name each target that did not take its batch, and why."""

    cursor: str
    sent: int = 0
    delivered_to: tuple[str, ...] = ()
    failures: tuple[tuple[str, str], ...] = ()
    reason: str = ""
    messages: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures


def target_key(url: str) -> str:
    """A target's key in the cursor: stable for the same URL, and no secret in the instance."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def target_name(url: str) -> str:
    """The URL as a report shows it: Apprise masks its passwords and tokens."""
    import apprise

    plugin = apprise.Apprise.instantiate(url)
    shown = plugin.url(privacy=True) if plugin is not None else url.split("://", 1)[0] + "://…"
    return shown.split("?", 1)[0]


# ---- cursor ------------------------------------------------------------------------------------
def _parse_cursor(text: str | None) -> tuple[dict[str, Progress], int]:
    """(each target's progress, how many of the home's restores it has stepped back for)."""
    if not text:
        return {}, 0
    try:
        data = json.loads(text)
        targets = data["targets"] if data.get("v") == CURSOR_VERSION else {}
        return {
            key: {
                host: (datetime.fromisoformat(entry["at"]), frozenset(entry["urls"]))
                for host, entry in hosts.items()
            }
            for key, hosts in targets.items()
        }, int(data.get("undone", 0))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        # a cursor this code cannot read would otherwise resend or skip silently
        raise ValueError(f"unreadable notification cursor: {exc}") from exc


def _dump_cursor(targets: Mapping[str, Progress], undone: int = 0) -> str:
    return json.dumps(
        {
            "v": CURSOR_VERSION,
            "undone": undone,
            "targets": {
                key: {
                    host: {"at": at.isoformat(), "urls": sorted(urls)}
                    for host, (at, urls) in sorted(progress.items())
                }
                for key, progress in sorted(targets.items())
            },
        },
        sort_keys=True,
    )


# ---- selection ---------------------------------------------------------------------------------
def _new_rows(warehouse: Warehouse, progress: Progress) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(changes rows not yet delivered, every row read): the files at or after each host's
    instant (all of a host's files when it has none)."""
    hosts = warehouse.hosts_in("changes")
    files: list[Path] = warehouse.files("changes", [h for h in hosts if h not in progress])
    for host in hosts:
        if host in progress:
            files.extend(warehouse.files("changes", [host], since=progress[host][0]))
    if not files:
        empty = tables.empty("changes")
        return empty, empty
    read = scan_files(
        files,
        schema=tables.SCHEMAS["changes"],
        missing_columns="insert",
        extra_columns="ignore",
        hive_partitioning=False,
    ).collect()
    if not progress:
        return read, read
    at = pl.DataFrame(
        {"host": list(progress), "_at": [a for a, _ in progress.values()]},
        schema={"host": pl.String, "_at": tables.UTC_TIME},
    )
    delivered = pl.DataFrame(
        [(host, a, url) for host, (a, urls) in progress.items() for url in urls],
        schema={"host": pl.String, "changed_at": tables.UTC_TIME, "url": pl.String},
        orient="row",
    )
    new = (
        read.join(at, on="host", how="left")
        .filter(pl.col("_at").is_null() | (pl.col("changed_at") >= pl.col("_at")))
        .drop("_at")
        .join(delivered, on=["host", "changed_at", "url"], how="anti")
    )
    return new, read


def _stepped_back(progress: Progress, restores: list[dict]) -> Progress:
    """A host's position past where a restore (`freshness undo`) took the host back to goes
    back with it, to just after the host's newest cycle left (delivered before the undone one
    was), or to nothing when the host has none left. Else the cursor would stay at the undone
    cycle's time, a year ahead after a mistyped year, and nothing would be sent until then."""
    out = dict(progress)
    for restore in restores:
        for host, to in restore.get("back_to", {}).items():
            if host not in out:
                continue
            if to is None:
                del out[host]
            elif out[host][0] > (back := datetime.fromisoformat(to)):
                out[host] = (back + timedelta(microseconds=1), frozenset())
    return out


def _joining(targets: Mapping[str, Progress]) -> Progress:
    """Where a target new to a cursor that has others starts: the least advanced of them, per
    host. A target's key is its whole URL, so one edited (a rotated token, an ``rto=`` added)
    is a new target, and started from nothing it was sent the whole kept history again; from
    here it gets what some target still lacks and nothing every target had."""
    if not targets:
        return {}
    hosts = set.intersection(*(set(progress) for progress in targets.values()))
    start: Progress = {}
    for host in hosts:
        at = min(progress[host][0] for progress in targets.values())
        urls = [progress[host][1] for progress in targets.values() if progress[host][0] == at]
        start[host] = (at, frozenset.intersection(*urls))
    return start


def _advanced(progress: Progress, read: pl.DataFrame) -> Progress:
    """Each host's newest instant among the rows read and every URL at it: all delivered once
    this batch is."""
    if read.is_empty():
        return dict(progress)
    newest = read.filter(pl.col("changed_at") == pl.col("changed_at").max().over("host"))
    grouped = newest.group_by("host").agg(pl.col("changed_at").first(), pl.col("url").unique())
    out = dict(progress)
    for host, at, urls in grouped.iter_rows():  # one row per host, not per change
        out[host] = (at, frozenset(urls))
    return out


def _with_classes(warehouse: Warehouse, rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` with the url_class of each changed version, from the page_versions file of the
    same host and cycle (changes does not repeat it)."""
    files = [
        path
        for host, at in rows.select("host", "changed_at").unique().iter_rows()
        if (path := warehouse.cycle_file("page_versions", host, at)).exists()
    ]
    if not files:
        return rows.with_columns(url_class=pl.lit(None, pl.String))
    classes = (
        scan_files(files, hive_partitioning=False, extra_columns="ignore")
        .select("url", "host", pl.col("observed_at").alias("changed_at"), "url_class")
        .collect()
        .unique(subset=["url", "host", "changed_at"], keep="last")
    )
    return rows.join(classes, on=["url", "host", "changed_at"], how="left")


def select_changes(
    warehouse: Warehouse, config: NotifyConfig, progress: Progress
) -> tuple[pl.DataFrame, Progress]:
    """(the undelivered changes the watch filter keeps, ordered; the progress once they are
    delivered). Changes the filter drops advance the progress too: they are not owed."""
    new, read = _new_rows(warehouse, progress)
    rows = _with_classes(warehouse, new)
    if config.url_classes:
        rows = rows.filter(pl.col("url_class").is_in(list(config.url_classes)))
    if config.fields:
        watched = pl.lit(list(config.fields), pl.List(pl.String))
        rows = rows.filter(
            pl.col("changed_fields").list.set_intersection(watched).list.len().fill_null(0) > 0
        )
    return rows.sort("changed_at", "host", "url"), _advanced(progress, read)


# ---- the message -------------------------------------------------------------------------------
def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _describe(row: Mapping[str, object]) -> str:
    old = json.loads(str(row["old_values"])) if row["old_values"] else {}
    new = json.loads(str(row["new_values"])) if row["new_values"] else {}
    at = row["changed_at"]
    when = at.isoformat() if isinstance(at, datetime) else str(at)
    lines = [str(row["url"]), f"  changed at {when}"]
    fields = row["changed_fields"]  # a list of names, or null
    changed: list[str] = fields if isinstance(fields, list) else []
    for name in changed:
        if name == "text":
            continue  # the text is told as lines below, not quoted
        lines.append(f"  {name}: {_short(old.get(name))} -> {_short(new.get(name))}")
    added, removed = row["text_lines_added"], row["text_lines_removed"]
    if "text" in changed:
        # lines are counted as a multiset: text whose lines only moved counts none
        told = f"+{added} / -{removed} lines" if added or removed else "its lines reordered"
        lines.append(f"  text: {told}")
    return "\n".join(lines)


def build_message(rows: pl.DataFrame) -> tuple[str, str]:
    """(title, body) of one batch: the count up front, then each change until the body would
    pass MAX_BODY_CHARS, then how many more the changes table holds."""
    pages, hosts = rows["url"].n_unique(), rows["host"].n_unique()
    title = f"{_plural(pages, 'page')} changed on {_plural(hosts, 'host')}"
    parts: list[str] = []
    size = 0
    for i, row in enumerate(rows.iter_rows(named=True)):
        block = _describe(row)
        left = rows.height - i
        tail = f"… and {_plural(left, 'more change')} (see the changes table)"
        if parts and size + len(block) + 2 + len(tail) > MAX_BODY_CHARS:
            parts.append(tail)
            break
        parts.append(block)
        size += len(block) + 2
    return title, "\n\n".join(parts)


# ---- sending -----------------------------------------------------------------------------------
def _send(url: str, title: str, body: str) -> str | None:
    """None when ``url`` took the message, else why not (what Apprise logged, or the error)."""
    import apprise

    plugin = apprise.Apprise.instantiate(url)
    if plugin is None:
        return "Apprise cannot parse this URL"
    if "rto" not in parse_qs(urlsplit(url).query) and hasattr(plugin, "socket_read_timeout"):
        plugin.socket_read_timeout = max(plugin.socket_read_timeout, NOTIFY_READ_TIMEOUT_S)
    notifier = apprise.Apprise()
    notifier.add(plugin)
    try:
        with apprise.LogCapture(level=logging.WARNING, fmt="%(message)s") as log:
            ok = notifier.notify(body=body, title=title)
            said = log.getvalue().strip()
    except Exception as exc:  # noqa: BLE001 - a plugin's failure is reported, never raised
        return f"{type(exc).__name__}: {exc}"
    if ok:
        return None
    return " ".join(said.split()) or "Apprise reported a failure"


def notify_changes(warehouse: Warehouse, config: NotifyConfig, cursor: str | None) -> NotifyOutcome:
    """Deliver the changes each target has not had yet, one message per batch and target, and
    say what the cursor is now. A target whose send fails keeps its position, so the next
    evaluation retries exactly its held changes; nothing here raises for a failing target."""
    if not config.urls:
        return NotifyOutcome(cursor=cursor or "", reason="no [notify] urls in freshness.toml")
    parsed, applied = _parse_cursor(cursor)
    restores = undone_cycles(warehouse)
    targets = {key: _stepped_back(progress, restores[applied:]) for key, progress in parsed.items()}
    joining = _joining(targets)
    after: dict[str, Progress] = {}
    batches: dict[str, tuple[pl.DataFrame, Progress]] = {}
    delivered: list[str] = []
    failures: list[tuple[str, str]] = []
    messages: dict[str, tuple[str, str]] = {}
    sent = 0
    for url in config.urls:
        key = target_key(url)
        progress = targets.get(key, joining)
        # targets at the same position (the usual case) share one read of the history
        seen = _dump_cursor({"": progress})
        if seen not in batches:
            batches[seen] = select_changes(warehouse, config, progress)
        rows, advanced = batches[seen]
        if rows.is_empty():
            after[key] = advanced
            continue
        title, body = build_message(rows)
        error = _send(url, title, body)
        if error is None:
            after[key] = advanced
            delivered.append(target_name(url))
            messages[target_name(url)] = (title, body)
            sent = max(sent, rows.height)
        else:
            after[key] = progress
            failures.append((target_name(url), error))
    text = _dump_cursor(after, len(restores))
    if failures:
        reason = "; ".join(f"sending to {name} failed: {why}" for name, why in failures)
        reason += " (its changes are held and retried next evaluation)"
        if delivered:
            reason = f"sent {_plural(sent, 'change')} to {', '.join(delivered)}; " + reason
    elif delivered:
        reason = f"sent {_plural(sent, 'change')} to {', '.join(delivered)}"
    else:
        reason = "no new changes to notify"
    return NotifyOutcome(
        cursor=text,
        sent=sent,
        delivered_to=tuple(delivered),
        failures=tuple(failures),
        reason=reason,
        messages=messages,
    )
