"""The fetch step selected alone (the UI lets one materialize its assets without the plan): a
plan already fetched and recorded is not fetched again. Found by an exploratory run: every page
was fetched a second time, without validators, and recorded 'new' twice; url_state never knew."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline.app.runner import load_seeds, open_instance, run_cycle
from freshness_pipeline.definitions import build_definitions
from freshness_pipeline.defs.partitions import location_partitioning
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.warehouse.unrecorded import plans_carried_out

T0 = DEFAULT_START
FETCH_STEP = (
    "changes",
    "fetch_log",
    "fetch_results",
    "fetch_totals",
    "host_capacity",
    "page_versions",
    "validator_evidence",
    "validator_latest",
)


def test_the_fetch_step_alone_does_not_fetch_a_plan_carried_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("FRESHNESS_HOME", str(home))
    with SyntheticWeb(
        build_world(4, start=T0, horizon_days=1, sites=[SiteSpec("s", "honest", 6)])
    ) as web:
        web.set_now(T0)
        load_seeds(home, web.seeds_csv(tmp_path / "seeds.csv").read_bytes(), added_at=T0)
        run_cycle(home, T0)
        wh = Warehouse(home)
        (host,) = wh.hosts_in("seeds")
        assert plans_carried_out(wh, [host]) == [host]
        versions = wh.read("page_versions").height
        job = (
            build_definitions(location_partitioning(home))
            .get_repository_def()
            .get_job("freshness_cycle")
        )
        with open_instance(home) as instance:
            later = (T0 + timedelta(minutes=10)).isoformat()
            result = job.execute_in_process(
                run_config={"resources": {"cycle": {"config": {"now": later}}}},
                tags={"dagster/partition": host},
                instance=instance,
                asset_selection=[dg.AssetKey(key) for key in FETCH_STEP],
                raise_on_error=False,
            )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "was fetched and recorded already" in str(failure.event_specific_data)
    assert Warehouse(home).read("page_versions").height == versions  # nothing recorded twice
