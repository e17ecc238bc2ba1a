"""What `freshness cycle` says when a cycle ends, as text (rich markup where it colours): the
summary, what discovery read and found, and what was held back. Kept apart from the command so
that the words are one place and testable without a terminal; the pipeline is not imported
here (the command line answers --help without it)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from freshness_pipeline.app.runner import CycleOutcome

__all__ = ["counted", "discovery_line", "held_back_line", "summary_line"]


def counted(n: int, word: str) -> str:
    """``n`` and its noun, singular for one: "1 hosts" and "1 URLs" read as a slip."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_line(moment: datetime, outcome: CycleOutcome, *, dry_run: bool) -> str:
    """Hosts, planned fetches, requests sent by outcome, and the planned fetches deferred apart:
    "100 fetched (..., deferred 11, error 6, ...)" read as 100 answers when 11 were never asked
    for (their budget went to other hosts' next best) and 6 failed (found by an exploratory
    run)."""
    answered = {k: v for k, v in outcome.outcomes.items() if k != "deferred"}
    counts = ", ".join(f"{k} {v}" for k, v in sorted(answered.items()))
    done = "" if dry_run else f", {outcome.fetched} requests sent"
    deferred = outcome.outcomes.get("deferred", 0)
    return (
        f"cycle {moment.isoformat()}: {counted(len(outcome.hosts), 'host')}, "
        f"{outcome.planned} planned{done}"
        + (f" ({counts})" if counts else "")
        + (f", {deferred} planned fetches deferred" if deferred else "")
    )


def discovery_line(counts: dict[str, int]) -> str | None:
    """What a cycle's discovery read and found, in one line (None: it read no sitemap or feed
    and nothing went wrong): without it a user saw fetches and never where new pages came
    from, nor that a host's sitemaps had gone wrong until they read the log. A guessed
    /sitemap.xml that is not there is not a file read."""
    unchanged = counts.get("sitemap_files_unchanged", 0)
    read = counts.get("sitemap_files_read", 0) + unchanged
    feeds = counts.get("announced_feeds_read", 0)
    problems = sum(n for k, n in counts.items() if k.startswith("sitemap_problems_"))
    if not read and not feeds and not problems:
        return None
    parts = [
        f"{read:,} sitemap files read"
        + (f" ({unchanged:,} unchanged, 304: their URLs stay listed)" if unchanged else "")
    ]
    if feeds:
        parts.append(f"{feeds:,} announced feeds")
    # after a 304 "0 URLs listed" read as a sitemap emptied (found by a newcomer)
    listed = counts.get("sitemap_entries", 0)
    if unchanged == 0:
        parts.append(f"{listed:,} URLs listed")
    elif listed or read > unchanged:
        parts.append(f"{listed:,} URLs listed in the files that changed")
    parts.append(f"{counts.get('urls_found_new', 0):,} new URLs")
    if problems:
        parts.append(f"{problems:,} sitemap problems (warnings in the log)")
    return "discovery: " + ", ".join(parts)


def held_back_line(outcome: CycleOutcome, *, dry_run: bool) -> str | None:
    """The URLs not planned or not fetched, by what held them back, in red when nothing went
    out at all (None: nothing was held back)."""
    if not outcome.held_back:
        return None
    held = "; ".join(
        f"{reason}: {counted(n, 'URL')}" for reason, n in sorted(outcome.held_back.items())
    )
    if outcome.planned == 0 and not outcome.repeated:
        label = "[red]nothing planned, held back:[/]"
    elif not dry_run and outcome.fetched == 0:
        label = "[red]nothing fetched, held back:[/]"
    else:
        label = "[yellow]held back:[/]"
    return f"{label} {held}"
