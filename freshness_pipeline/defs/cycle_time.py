"""The one reading of a cycle's time from text (``--now``, run config, export windows): kept
apart from the Dagster resources so that the command line can parse it without importing
Dagster."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_now(text: str, option: str = "--now") -> datetime:
    """ISO 8601 to an aware UTC datetime; a naive time is taken as UTC. ``option`` is what the
    error names: every command's times are read by this one parser, so ``--at`` and ``--since``
    accept exactly what ``--now`` does."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(
            f"{option} {text!r} is not an ISO 8601 time (such as 2026-03-02T06:00:00Z; "
            "one without an offset is UTC)"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
