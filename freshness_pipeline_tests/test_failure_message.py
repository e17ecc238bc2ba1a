"""app/runner.failure_message: what a failed run says, from the events of a real Dagster run,
for the cycle command and for each group run of the distributed command."""

from __future__ import annotations

import dagster as dg

from freshness_pipeline.app.runner import failure_message


class Broken(RuntimeError):
    pass


@dg.op
def fails() -> None:
    try:
        raise KeyError("the inner cause")
    except KeyError as exc:
        raise Broken("the step's own error") from exc


@dg.job
def failing_job() -> None:
    fails()


def failed_run_events() -> list[dg.DagsterEvent]:
    result = failing_job.execute_in_process(raise_on_error=False)
    assert not result.success
    return result.all_events


def test_a_failed_step_is_named_with_its_error_and_causes() -> None:
    text = failure_message(failed_run_events(), "fallback")
    assert text.startswith("step fails failed: ")
    assert "the step's own error" in text and "the inner cause" in text


def test_a_run_that_failed_outside_any_step_says_its_own_message() -> None:
    """A run failure carries no step data (Dagster refuses to read it on one): such a run,
    one whose executor or launcher failed, is told by its message instead of crashing."""
    events = [e for e in failed_run_events() if not e.is_step_failure]
    run_failures = [e for e in events if e.is_failure]
    assert run_failures and not any(e.is_step_failure for e in run_failures)
    text = failure_message(events, "fallback")
    assert text == (run_failures[0].message or "fallback")
    assert not text.startswith("step ")


def test_a_run_without_failures_gets_the_fallback() -> None:
    ok = [e for e in failed_run_events() if not e.is_failure]
    assert failure_message(ok, "the run failed") == "the run failed"
