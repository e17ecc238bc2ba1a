"""A cycle's time: defs/cycle_time.py, the one parser of it from text, and the cycle resource
that gives it to every step of a run."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import dagster as dg
import pytest

from freshness_pipeline.defs.cycle_time import parse_now
from freshness_pipeline.defs.resources import CycleResource


def test_iso_times_become_aware_utc_and_bad_ones_name_the_option() -> None:
    noon = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert parse_now("2026-03-02T12:00:00Z") == noon
    assert parse_now(" 2026-03-02T12:00:00 ") == noon  # naive: UTC
    assert parse_now("2026-03-02T14:00:00+02:00") == noon
    with pytest.raises(ValueError, match="--since 'noon' is not an ISO 8601 time"):
        parse_now("noon", "--since")
    # with one that is, and how a time without an offset is read (asked for by a newcomer)
    with pytest.raises(ValueError, match=r"such as 2026-03-02T06:00:00Z; one without an offset"):
        parse_now("yesterday")


def test_a_bad_now_in_a_runs_config_names_the_config_field() -> None:
    """A launchpad's `now: yesterday` failed naming the command's --now option (found by an
    exploratory run)."""
    with pytest.raises(dg.Failure, match="resources.cycle.config.now 'yesterday' is not an ISO"):
        CycleResource(now="yesterday").cycle_now(None)  # type: ignore[arg-type]


_NOW_LOG = "FRESHNESS_TEST_NOW_LOG"


def _log_now(step: str, context, cycle: CycleResource) -> None:  # type: ignore[no-untyped-def]
    import os

    with open(os.environ[_NOW_LOG], "a", encoding="utf-8") as log:
        log.write(f"{step} {cycle.cycle_now(context).isoformat()}\n")


@dg.asset
def _first_step(context, cycle: CycleResource) -> None:  # type: ignore[no-untyped-def]
    _log_now("first", context, cycle)


@dg.asset(deps=[_first_step])
def _second_step(context, cycle: CycleResource) -> None:  # type: ignore[no-untyped-def]
    _log_now("second", context, cycle)


def _now_job() -> dg.JobDefinition:
    return dg.Definitions(
        assets=[_first_step, _second_step],
        resources={"cycle": CycleResource()},
        jobs=[dg.define_asset_job("now_job")],
    ).resolve_job_def("now_job")


def test_a_re_execution_without_a_now_is_the_first_runs_cycle(tmp_path, monkeypatch) -> None:
    """A run launched with no now takes its creation time; re-executed from failure (or for
    chosen steps) it took the new run's, so one cycle's plan was fetched and recorded as of
    another time (found by an exploratory run)."""
    log = tmp_path / "now.log"
    monkeypatch.setenv(_NOW_LOG, str(log))
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        job = dg.reconstructable(_now_job)
        with dg.execute_job(job, instance=instance) as first:
            assert first.success
        time.sleep(1.1)
        options = dg.ReexecutionOptions(parent_run_id=first.run_id, step_selection=["_second_step"])
        with dg.execute_job(job, instance=instance, reexecution_options=options) as again:
            assert again.success
    times = [line.split() for line in log.read_text().splitlines()]
    assert [step for step, _ in times] == ["first", "second", "second"]
    assert len({at for _, at in times}) == 1
