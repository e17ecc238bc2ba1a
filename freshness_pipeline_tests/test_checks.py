"""Every asset check must be able to fail: each is run for real (dagster.materialize, the real
warehouse IO manager, a range run over two hosts) against stand-in upstream assets that produce
exactly the frame the check should accept or reject. A check is evaluated once per run, over
the run's hosts, whatever the number of partitions."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest

from freshness_pipeline.definitions import defs
from freshness_pipeline.defs import checks
from freshness_pipeline.defs.io_manager import WarehouseIOManager
from freshness_pipeline.defs.partitions import hosts_partitions, hosts_tag, range_tags
from freshness_pipeline.defs.resources import CycleResource, WarehouseResource

HOSTS = ["a.example", "b.example"]


def stand_in(name: str, frame: pl.DataFrame, deps: tuple[str, ...] = ()) -> dg.AssetsDefinition:
    """An asset with the real asset's key that returns ``frame``: the check under test loads it
    through the same IO manager and partition mapping as in a cycle."""

    @dg.asset(
        name=name,
        partitions_def=hosts_partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        deps=list(deps),
    )
    def _asset() -> pl.DataFrame:
        return frame

    return _asset


def run(
    tmp_path,
    assets: list[dg.AssetsDefinition],
    check,
    cycle: CycleResource | None = None,
    instance: dg.DagsterInstance | None = None,
    tags: dict[str, str] | None = None,
) -> tuple[dg.ExecuteInProcessResult, dg.AssetCheckEvaluation]:
    instance = instance or dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(hosts_partitions.name, HOSTS)
    result = dg.materialize(
        [*assets, defined(check)],
        instance=instance,
        resources={
            "io_manager": WarehouseIOManager(home=str(tmp_path)),
            "warehouse": WarehouseResource(home=str(tmp_path)),
            "cycle": cycle or CycleResource(),
        },
        tags={**range_tags(HOSTS[0], HOSTS[-1], bucket="test"), **(tags or {})},
        raise_on_error=False,
    )
    (evaluation,) = result.get_asset_check_evaluations()
    return result, evaluation


def defined(check) -> dg.AssetChecksDefinition:
    """The code location's Dagster check for a check function of checks.py."""
    return next(c for c in checks.ALL_CHECKS if next(iter(c.check_specs)).name == check.__name__)


def urls(host: str, *paths: str) -> list[str]:
    return [f"https://{host}/{p}" for p in paths]


def candidates(rows: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"url": rows, "host": [u.split("/")[2] for u in rows]})


def plan(rows: list[tuple[str, bool]], crawl_delay: float | None = None) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "url": [u for u, _ in rows],
            "host": [u.split("/")[2] for u, _ in rows],
            "selected": [s for _, s in rows],
            "crawl_delay": [crawl_delay] * len(rows),
        },
        schema_overrides={"crawl_delay": pl.Float64},
    )


def materialized(result: dg.ExecuteInProcessResult) -> set[str]:
    return {
        e.asset_key.to_user_string()
        for e in result.get_asset_materialization_events()
        if e.asset_key is not None
    }


# --------------------------------------------------------------------------- registration


def test_every_check_is_in_the_code_location_and_evaluated_per_run():
    keys = defs.get_repository_def().asset_graph.asset_check_keys
    registered = {(k.asset_key.to_user_string(), k.name) for k in keys}
    assert {
        ("url_candidates", "candidates_have_unique_urls"),
        ("revisit_plan", "plan_within_budget"),
        ("fetch_results", "results_account_for_plan"),
        ("fetch_results", "verify_sample_matches_the_model"),
        ("url_state", "state_keeps_every_candidate"),
        ("robots", "robots_one_row_per_host"),
    } <= registered
    for check in checks.ALL_CHECKS:
        (spec,) = check.check_specs
        # Not partitioned: one execution record per run, not one per host carrying every host
        assert spec.partitions_def is None, spec.name


def test_a_range_run_records_one_execution_per_check_not_one_per_host(tmp_path):
    frame = candidates(urls("a.example", "1") + urls("b.example", "1"))
    (tmp_path / "instance").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "instance"))  # sqlite, as a home
    for _ in range(2):
        run(
            tmp_path,
            [stand_in("url_candidates", frame)],
            checks.candidates_have_unique_urls,
            instance=instance,
        )
    key = dg.AssetCheckKey(dg.AssetKey("url_candidates"), "candidates_have_unique_urls")
    history = instance.event_log_storage.get_asset_check_execution_history(key, limit=100)
    assert len(history) == 2  # two runs over two host partitions
    assert all(record.partition is None for record in history)


def test_a_hosts_tag_narrows_the_check_to_those_hosts(tmp_path):
    # b.example has a duplicate; a run narrowed to a.example must not see it, nor load it.
    frame = candidates(urls("a.example", "1") + urls("b.example", "1", "1"))
    whole, evaluation = run(
        tmp_path / "all", [stand_in("url_candidates", frame)], checks.candidates_have_unique_urls
    )
    assert not evaluation.passed and evaluation.metadata["hosts"].value == 2
    # the UI's check result says it in words (it said only "failed" and the metadata keys)
    assert evaluation.description == "1 rows repeat a canonical URL"
    only_a = frame.filter(pl.col("host") == "a.example")
    _, evaluation = run(
        tmp_path / "a",
        [stand_in("url_candidates", only_a)],
        checks.candidates_have_unique_urls,
        tags=hosts_tag(["a.example"]),
    )
    assert evaluation.passed and evaluation.metadata["hosts"].value == 1
    assert evaluation.description == "each URL once"


# --------------------------------------------------------------------------- url_candidates


def test_unique_candidates_pass(tmp_path):
    frame = candidates(urls("a.example", "1", "2") + urls("b.example", "1"))
    result, evaluation = run(
        tmp_path, [stand_in("url_candidates", frame)], checks.candidates_have_unique_urls
    )
    assert result.success
    assert evaluation.passed
    assert evaluation.metadata["duplicate_urls"].value == 0


def test_a_duplicate_candidate_fails_and_blocks_the_plan(tmp_path):
    frame = candidates(urls("a.example", "1", "1", "2") + urls("b.example", "1"))
    plan_stub = stand_in("revisit_plan", plan([]), deps=("url_candidates",))
    result, evaluation = run(
        tmp_path,
        [stand_in("url_candidates", frame), plan_stub],
        checks.candidates_have_unique_urls,
    )
    assert not evaluation.passed
    assert evaluation.metadata["duplicate_urls"].value == 1
    # Blocking: the run fails and nothing downstream is written from a broken candidate list.
    assert not result.success
    assert materialized(result) == {"url_candidates"}


# --------------------------------------------------------------------------- robots


def test_one_robots_row_per_host_passes(tmp_path):
    frame = pl.DataFrame({"host": HOSTS, "robots_url": [f"https://{h}/robots.txt" for h in HOSTS]})
    result, evaluation = run(tmp_path, [stand_in("robots", frame)], checks.robots_one_row_per_host)
    assert result.success and evaluation.passed
    assert evaluation.metadata["hosts"].value == 2


def test_a_second_robots_row_for_a_host_fails(tmp_path):
    frame = pl.DataFrame(
        {
            "host": ["a.example", "a.example", "b.example"],
            "robots_url": ["https://a.example/robots.txt"] * 2 + ["https://b.example/robots.txt"],
        }
    )
    result, evaluation = run(tmp_path, [stand_in("robots", frame)], checks.robots_one_row_per_host)
    assert not evaluation.passed
    assert evaluation.metadata["repeated_rows"].value == 1
    assert not result.success  # blocking: url_candidates would not run on such rules


# --------------------------------------------------------------------------- revisit_plan


def test_plan_within_budget_passes(tmp_path):
    frame = plan(
        [(u, True) for u in urls("a.example", "1", "2")] + [(urls("b.example", "1")[0], False)]
    )
    result, evaluation = run(
        tmp_path,
        [stand_in("revisit_plan", frame)],
        checks.plan_within_budget,
        CycleResource(budget=2),
    )
    assert result.success and evaluation.passed
    assert evaluation.metadata["selected"].value == 2
    assert evaluation.metadata["over_budget"].value == 0


def test_plan_over_budget_fails_across_the_whole_range_run(tmp_path):
    # Each host alone is within budget; the run as a whole is not.
    frame = plan([(u, True) for u in urls("a.example", "1", "2") + urls("b.example", "1", "2")])
    result, evaluation = run(
        tmp_path,
        [stand_in("revisit_plan", frame)],
        checks.plan_within_budget,
        CycleResource(budget=3),
    )
    assert not evaluation.passed and not result.success
    assert evaluation.metadata["over_budget"].value == 1


def test_no_budget_means_no_budget_limit(tmp_path):
    frame = plan([(u, True) for u in urls("a.example", *map(str, range(50)))])
    _, evaluation = run(tmp_path, [stand_in("revisit_plan", frame)], checks.plan_within_budget)
    assert evaluation.passed


def test_plan_beyond_a_hosts_crawl_delay_fails(tmp_path):
    # Crawl-delay 60 s in a 600 s fetch window: at most 10 fetches for that host.
    cycle = CycleResource(fetch_window_s=600.0)
    at_limit = plan([(u, True) for u in urls("a.example", *map(str, range(10)))], crawl_delay=60.0)
    _, evaluation = run(
        tmp_path / "ok", [stand_in("revisit_plan", at_limit)], checks.plan_within_budget, cycle
    )
    assert evaluation.passed
    assert evaluation.metadata["hosts_over_capacity"].value == 0

    beyond = plan([(u, True) for u in urls("a.example", *map(str, range(12)))], crawl_delay=60.0)
    result, evaluation = run(
        tmp_path / "bad", [stand_in("revisit_plan", beyond)], checks.plan_within_budget, cycle
    )
    assert not evaluation.passed and not result.success
    assert evaluation.metadata["hosts_over_capacity"].value == 1
    assert evaluation.metadata["worst_host"].value == "a.example (+2)"


def test_capacity_bound_without_crawl_delay_uses_the_default_rate():
    rows = [(u, True) for u in urls("a.example", *map(str, range(9)))]
    # No Crawl-delay: 4 requests a second, so a 2 s window takes 8.
    assert checks.hosts_over_capacity(plan(rows), window_s=2.0) == {"a.example": 1}
    assert checks.hosts_over_capacity(plan(rows), window_s=3.0) == {}
    assert checks.hosts_over_capacity(plan([]), window_s=1.0) == {}
    unselected = plan([(u, False) for u, _ in rows], crawl_delay=1000.0)
    assert checks.hosts_over_capacity(unselected, window_s=1.0) == {}


# --------------------------------------------------------------------------- fetch_results


def results(rows: list[tuple[str, str]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "url": [u for u, _ in rows],
            "host": [u.split("/")[2] for u, _ in rows],
            "outcome": [o for _, o in rows],
        }
    )


def test_results_that_account_for_every_planned_url_pass(tmp_path):
    a1, a2, a3 = urls("a.example", "1", "2", "3")
    (b1,) = urls("b.example", "1")
    the_plan = plan([(a1, True), (a2, True), (a3, False), (b1, True)])
    # A deferred fetch is an answer too; an unselected URL needs none.
    found = results([(a1, "changed"), (a2, "deferred"), (b1, "not_modified")])
    result, evaluation = run(
        tmp_path,
        [stand_in("revisit_plan", the_plan), stand_in("fetch_results", found)],
        checks.results_account_for_plan,
    )
    assert result.success and evaluation.passed
    assert evaluation.metadata["planned_without_result"].value == 0


def test_a_planned_url_without_a_result_fails(tmp_path):
    a1, a2 = urls("a.example", "1", "2")
    (b1,) = urls("b.example", "1")
    the_plan = plan([(a1, True), (a2, True), (b1, True)])
    found = results([(a1, "changed")])
    _, evaluation = run(
        tmp_path,
        [stand_in("revisit_plan", the_plan), stand_in("fetch_results", found)],
        checks.results_account_for_plan,
    )
    assert not evaluation.passed
    assert evaluation.metadata["planned_without_result"].value == 2


def verified(n_per_host: int, forecast: float, changed_share: float) -> dg.AssetsDefinition:
    """fetch_results of verify fetches, each forecast ``forecast`` by the plan, in which the
    first ``changed_share`` of each host's pages changed."""
    rows = [u for h in HOSTS for u in urls(h, *map(str, range(n_per_host)))]
    changed = int(round(changed_share * n_per_host))
    outcomes = ["changed" if i < changed else "unchanged" for _ in HOSTS for i in range(n_per_host)]
    found = results(list(zip(rows, outcomes, strict=True))).with_columns(
        plan_reason=pl.lit("verify"), expected_change=pl.lit(forecast)
    )
    return stand_in("fetch_results", found)


@pytest.mark.parametrize(("forecast", "changed_share"), [(0.3, 0.3), (0.3, 0.45)])
def test_a_verify_sample_that_matches_the_forecast_passes(tmp_path, forecast, changed_share):
    # 40 pages at p = 0.3: 12 changes expected, sd 2.9; 18 found is z = 2.1
    found = verified(20, forecast, changed_share)
    result, evaluation = run(tmp_path, [found], checks.verify_sample_matches_the_model)
    assert result.success and evaluation.passed
    assert evaluation.metadata["verified_pages"].value == 40
    assert evaluation.metadata["forecast_change_share"].value == pytest.approx(0.3)


def test_a_verify_sample_that_changed_far_more_than_forecast_warns(tmp_path):
    # 40 pages at p = 0.3, 24 changed: z = 4.1
    found = verified(20, 0.3, 0.6)
    result, evaluation = run(tmp_path, [found], checks.verify_sample_matches_the_model)
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.WARN
    assert evaluation.metadata["z"].value == pytest.approx(4.14, abs=0.01)
    assert evaluation.metadata["observed_change_share"].value == pytest.approx(0.6)
    assert "more often than the model thinks" in evaluation.metadata["verdict"].value
    assert result.success  # a warning: the cycle's tables are written all the same


def test_a_few_changes_against_small_forecasts_are_judged_by_the_exact_tail(tmp_path):
    # 40 pages at p = 0.02, 4 changed: z = 3.6, but under the forecasts a count of 4 or more
    # has probability 0.008 (two-sided 0.017): not a surprise, where z alone would warn
    found = verified(20, 0.02, 0.1)
    _, evaluation = run(tmp_path, [found], checks.verify_sample_matches_the_model)
    assert evaluation.metadata["z"].value > 3
    assert evaluation.metadata["p_value"].value == pytest.approx(0.0166, abs=0.001)
    assert evaluation.passed
    assert "consistent with the change model" in evaluation.metadata["verdict"].value


def test_too_small_a_verify_sample_is_not_judged(tmp_path):
    found = verified(10, 0.1, 1.0)  # 20 pages, all changed against p = 0.1
    _, evaluation = run(tmp_path, [found], checks.verify_sample_matches_the_model)
    assert evaluation.passed
    assert evaluation.metadata["verified_pages"].value == 20
    assert "not judged" in evaluation.metadata["verdict"].value


# --------------------------------------------------------------------------- url_state


def test_state_covering_every_candidate_passes(tmp_path):
    cands = candidates(urls("a.example", "1", "2") + urls("b.example", "1"))
    # The state may know more (pages gone from the inventory); it may not know less.
    state = candidates(urls("a.example", "1", "2", "old") + urls("b.example", "1"))
    result, evaluation = run(
        tmp_path,
        [stand_in("url_candidates", cands), stand_in("url_state", state)],
        checks.state_keeps_every_candidate,
    )
    assert result.success and evaluation.passed
    assert evaluation.metadata["candidates_missing"].value == 0


def test_a_candidate_missing_from_state_fails_without_failing_the_run(tmp_path):
    cands = candidates(urls("a.example", "1", "2") + urls("b.example", "1"))
    state = candidates(urls("a.example", "1"))
    result, evaluation = run(
        tmp_path,
        [stand_in("url_candidates", cands), stand_in("url_state", state)],
        checks.state_keeps_every_candidate,
    )
    assert not evaluation.passed
    assert evaluation.metadata["candidates_missing"].value == 2
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert result.success  # not blocking: url_state is the last asset of the cycle


# --------------------------------------------------------------------------- direct calls


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (pl.DataFrame(schema={"url": pl.String}), 0),
        (pl.DataFrame({"url": ["x", "y"]}), 0),
        (pl.DataFrame({"url": ["x", "x", "x", "y"]}), 2),
    ],
)
def test_duplicate_urls(frame, expected):
    assert checks.duplicate_urls(frame) == expected


def test_checks_can_be_called_directly():
    """What a user debugging a red check in the UI would do in a notebook."""
    dup = checks.candidates_have_unique_urls(url_candidates=candidates(["https://a/1"] * 2))
    assert not dup.passed
    ok = checks.plan_within_budget(
        revisit_plan=plan([("https://a/1", True)]), cycle=CycleResource(budget=1)
    )
    assert ok.passed
    assert checks.plan_over_budget(plan([("https://a/1", True)] * 3), None) == 0
    assert checks.plan_over_budget(plan([]), 0) == 0
