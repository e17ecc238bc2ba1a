"""defs/cycle_time.py: the one parser of a cycle's time from text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from freshness_pipeline.defs.cycle_time import parse_now


def test_iso_times_become_aware_utc_and_bad_ones_name_the_option() -> None:
    noon = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert parse_now("2026-03-02T12:00:00Z") == noon
    assert parse_now(" 2026-03-02T12:00:00 ") == noon  # naive: UTC
    assert parse_now("2026-03-02T14:00:00+02:00") == noon
    with pytest.raises(ValueError, match="--since 'noon' is not an ISO 8601 time"):
        parse_now("noon", "--since")


def test_a_bad_now_in_a_runs_config_names_the_config_field() -> None:
    """A launchpad's `now: yesterday` failed naming the command's --now option (found by an
    exploratory run)."""
    import dagster as dg

    from freshness_pipeline.defs.resources import CycleResource

    with pytest.raises(dg.Failure, match="resources.cycle.config.now 'yesterday' is not an ISO"):
        CycleResource(now="yesterday").cycle_now(None)  # type: ignore[arg-type]
