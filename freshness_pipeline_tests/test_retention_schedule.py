"""Retention in runs the schedule launches: every cycle run ends with the ``retention`` step, so
a home crawled only from the Dagster schedule (or the UI) expires its history as a CLI cycle's
does. Real Dagster (the code location's job, the schedule's own run requests), real files, the
synthetic web on loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, open_instance
from freshness_pipeline.definitions import build_definitions
from freshness_pipeline.defs.partitions import location_partitioning
from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb, World
from freshness_pipeline.warehouse.archive import (
    ArchivedOriginal,
    ArchiveReader,
    archive_dir_for,
    iter_records,
    list_warcs,
    read_record,
)
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.crawls import hand_page, shop_world

S = DEFAULT_START
HOUR = timedelta(hours=1)
T0, T1, T2, T3 = (S + 6 * k * HOUR for k in range(4))
#: 0.4 days = 9.6 hours: the T0 cycle's files and article rows expire in the T2 run
HOME_CONFIG = """\
[url_classes.article.retention]
versions_days = 0.4

[retention]
archive_days = 0.4
"""
PATHS = {"/about": (), "/news": (9,), "/blog": (3, 9), "/team": ()}


def _world() -> World:
    pages = [
        hand_page(i, path, "article", changes) for i, (path, changes) in enumerate(PATHS.items())
    ]
    return shop_world(pages, seed=3)


def _history(home: Path, table: str) -> pl.DataFrame:
    return Warehouse(home).read(table)


def scheduled_run(home: Path, now) -> dg.ExecuteInProcessResult:
    """One tick of the code location's schedule at ``now`` and the run it asks for: the job
    the schedule targets, with the request's run config and tags, in the home's instance."""
    defs = build_definitions(location_partitioning(home))
    repository = defs.get_repository_def()
    instance = open_instance(home)
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=now, repository_def=repository
    ) as context:
        tick = repository.get_schedule_def("freshness_cycle_schedule").evaluate_tick(context)
    (request,) = tick.run_requests
    job = repository.get_job(request.job_name or "freshness_cycle")
    return job.execute_in_process(
        run_config=request.run_config, tags=request.tags, instance=instance
    )


def _observation(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    for event in result.get_asset_observation_events():
        observation = event.asset_observation_data.asset_observation
        if observation.asset_key == dg.AssetKey(asset):
            return {k: v.value for k, v in observation.metadata.items()}
    raise AssertionError(f"no observation of {asset}")


@pytest.fixture(scope="module")
def scheduled(tmp_path_factory):
    """Four six-hour cycles, each a run of the schedule's job at its tick, nothing else."""
    workdir = tmp_path_factory.mktemp("retention-schedule")
    home = workdir / "home"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
        env.setenv("FRESHNESS_HOME", str(home))
        env.delenv("DAGSTER_HOME", raising=False)
        env.delenv("FRESHNESS_CYCLE_CRON", raising=False)
        world = _world()
        after: dict = {}
        with SyntheticWeb(world) as web:
            web.set_now(S)
            seeds = web.seeds_csv(workdir / "seeds.csv", variants=False)
            load_seeds(home, seeds.read_bytes(), added_at=S)
            (home / "freshness.toml").write_text(HOME_CONFIG)
            for now in (T0, T1, T2, T3):
                web.set_now(now)
                result = scheduled_run(home, now)
                assert result.success
                after[now] = {
                    "result": result,
                    "retention": _observation(result, "retention"),
                    "warcs": set(list_warcs(archive_dir_for(home))),
                    "versions": _history(home, "page_versions"),
                }
        yield {"home": home, "after": after, "workdir": workdir}


def test_every_scheduled_run_ends_with_the_retention_step(scheduled):
    for now, seen in scheduled["after"].items():
        result = seen["result"]
        materialized = {
            (e.asset_key.to_user_string(), e.partition)
            for e in result.get_asset_materialization_events()
        }
        hosts = Warehouse(scheduled["home"]).hosts_in("seeds")
        assert {("retention", h) for h in hosts} <= materialized, now
    # it runs after the tables it rewrites are written
    order = [e.step_key for e in scheduled["after"][T2]["result"].all_events if e.is_step_success]
    assert order.index("retention") > max(order.index("url_state"), order.index("fetch_results"))


def test_scheduled_runs_expire_old_warc_files_and_version_rows(scheduled):
    after = scheduled["after"]
    stamp = {t: t.strftime("%Y%m%d%H%M%S") for t in (T0, T1, T2, T3)}
    assert any(stamp[T0] in n for n in after[T1]["warcs"])  # 0.4 days: still kept at T1
    assert not any(stamp[T0] in n for n in after[T2]["warcs"])
    assert not any(stamp[T1] in n for n in after[T3]["warcs"])
    assert after[T0]["retention"]["warc_files_removed"] == 0
    assert after[T2]["retention"]["warc_files_removed"] >= 1
    # the T0 versions of /news and /blog, which changed since; /about and /team never did, and
    # their one version each is kept: it is what the page says now
    assert after[T2]["retention"]["version_rows"] == 2
    assert "retention removed" in after[T2]["retention"]["summary"]
    for now in (T2, T3):
        versions = after[now]["versions"]
        older = versions.filter(pl.col("observed_at") < now - timedelta(days=0.4))
        assert older["url"].n_unique() == older.height == 2, now
        assert versions.filter(pl.col("url").is_in(older["url"].to_list())).height == 2, now
    # the partition's own figure, on its materialization
    (host,) = Warehouse(scheduled["home"]).hosts_in("seeds")
    instance = open_instance(scheduled["home"])
    records = instance.fetch_materializations(dg.AssetKey("retention"), limit=10).records
    figures = [
        r.asset_materialization.metadata["page_versions_rows"].value
        for r in records
        if r.asset_materialization is not None and r.asset_materialization.partition == host
    ]
    assert sum(figures) == sum(after[t]["retention"]["version_rows"] for t in after)


def test_after_scheduled_prunes_every_revisit_and_every_row_still_resolves(scheduled):
    home = scheduled["home"]
    archive = archive_dir_for(home)
    warcs = list_warcs(archive)
    reader = ArchiveReader(archive)
    retained = [n for n in warcs if "-retained-" in n]
    assert retained, "no original was carried out of an expired file"
    revisits = carried = 0
    for name in warcs:
        for record in iter_records(archive / name, payloads=False):
            if record.record_type != "revisit":
                continue
            revisits += 1
            original = reader.find_original(record)
            carried += original.warc_filename in retained
            response = reader.read_response(name, record.offset)
            assert response.status == 200 and response.body
    assert revisits and carried
    _every_location_resolves(home)


def _every_location_resolves(home: Path) -> None:
    """Every archive location a table holds is a whole record of the archive."""
    archive = archive_dir_for(home)
    wh = Warehouse(home)
    for table in ("page_versions", "fetch_log"):
        rows = wh.read(table).drop_nulls("warc_filename")
        for name, offset, length in rows.select(
            "warc_filename", "warc_offset", "warc_length"
        ).iter_rows():
            record = read_record(archive, name, offset, length)
            assert record.record_type in ("response", "revisit"), (table, name, offset)
    for text in wh.read("url_state").drop_nulls("archived")["archived"]:
        where = ArchivedOriginal.from_json(text).location
        assert where is not None
        assert read_record(archive, where.warc_filename, where.warc_offset, where.warc_length)


def retention_only(home: Path, now) -> dg.ExecuteInProcessResult:
    """The code location's job with only its retention step selected, over the home's host, in
    an instance of its own (a copied home's dagster.yaml names the original's storage)."""
    (host,) = Warehouse(home).hosts_in("seeds")
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("hosts", [host])
    job = (
        build_definitions(location_partitioning(home))
        .get_repository_def()
        .get_job("freshness_cycle")
    )
    return job.execute_in_process(
        run_config={"resources": {"cycle": {"config": {"now": now.isoformat()}}}},
        tags={"dagster/partition": host},
        instance=instance,
        asset_selection=[dg.AssetKey("retention")],
        raise_on_error=False,
    )


HOLD = textwrap.dedent(
    """
    import sys, time
    from freshness_pipeline.warehouse.storage import Warehouse
    with Warehouse(sys.argv[1]).exclusive("a test holding the home"):
        print("held", flush=True)
        time.sleep(120)
    """
)


def test_scheduled_runs_are_in_the_homes_cycle_record(scheduled):
    """Only `freshness cycle` recorded each host's newest cycle: after runs the schedule or
    the UI started, `freshness hosts` showed an older one and a backfill went unremarked
    (found by an exploratory run). The state step records it, whoever runs it."""
    newest = Warehouse(scheduled["home"]).newest_cycles()
    assert newest and set(newest.values()) == {T3}


def test_a_run_beside_another_writer_prunes_nothing_and_says_who_holds_the_home(
    scheduled, tmp_path, monkeypatch
):
    """Only the retention step, against a copy of the home held by another process: it must
    not rewrite files that process may be writing. A run the schedule or the UI starts does
    not start beside a writer at all (warehouse/locks.py), saying who holds the home; the
    next run prunes."""
    home = tmp_path / "home"
    shutil.copytree(scheduled["home"], home)
    monkeypatch.setenv("FRESHNESS_HOME", str(home))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    # a later cycle: the T2 and T3 files would expire now
    later = T3 + 18 * HOUR
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = set(list_warcs(archive_dir_for(home)))
        result = retention_only(home, later)
        assert not result.success
        failure = next(e for e in result.all_events if e.is_failure)
        assert "a test holding the home" in str(failure.event_specific_data)
        assert set(list_warcs(archive_dir_for(home))) == before
    finally:
        holder.kill()
        holder.wait()
    # with the home free again the same step prunes
    result = retention_only(home, later)
    assert result.success
    assert _observation(result, "retention")["warc_files_removed"] >= 1
    _every_location_resolves(home)
