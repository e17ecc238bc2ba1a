"""`freshness undo` against the synthetic web: a cycle dated a year ahead of the clock (a
mistyped --now) keeps a snapshot of the home, and undo puts every table and archive file back
as they were, so the pages it fetched are planned again by the next cycle dated right."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.app.undo import undo_cycle
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.crashpoints import ENV, UNDO_POINTS
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline.warehouse.undo import UNDONE_FILE as UNDONE
from freshness_pipeline.warehouse.undo import read_undo_point
from freshness_pipeline_tests.support import run_freshness

T0 = DEFAULT_START
T1 = T0 + timedelta(hours=6)
T2 = T1 + timedelta(hours=6)
SITES = [SiteSpec("honest", "honest", 12), SiteSpec("lastmod", "lastmod_only", 8)]


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _contents(home: Path) -> dict[str, str]:
    """Every whole file of the tables and the archive, by path, as a digest of its bytes (the
    seeds and the views' marker left out: undo leaves those as they are, and the record of
    restores, which it writes)."""
    out: dict[str, str] = {}
    for root in (home / "warehouse", home / "archive"):
        for path in root.rglob("*"):
            relative = str(path.relative_to(home))
            if not path.is_file() or ".tmp-" in path.name or path.name.endswith(".open"):
                continue
            if relative.startswith("warehouse/seeds/") or path.name in ("_views.json", UNDONE):
                continue
            out[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SyntheticWeb, Path]]:
    """A home after two cycles dated right (T0, T1), and its web, up: made once, each test
    works on a copy of it (``crawl``)."""
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    root = tmp_path_factory.mktemp("undo")
    home = root / "home"
    with SyntheticWeb(build_world(3, start=T0, horizon_days=1, sites=SITES)) as web:
        web.set_now(T0)
        load_seeds(home, web.seeds_csv(root / "seeds.csv").read_bytes(), added_at=T0)
        run_cycle(home, T0, budget=12)
        web.set_now(T1)
        run_cycle(home, T1, budget=12)
        yield web, home


@pytest.fixture
def crawl(crawled, tmp_path: Path) -> tuple[SyntheticWeb, Path]:
    """A copy of the home after two cycles dated right (T0, T1), and its web, up, at T1 (the
    two cycles ran once for the module; a copy of a home is a home: its instance follows)."""
    web, template = crawled
    home = tmp_path / "home"
    shutil.copytree(template, home)
    web.set_now(T1)
    return web, home


def _state(home: Path) -> pl.DataFrame:
    return Warehouse(home).read("url_state")


def test_a_mistyped_year_is_taken_back_whole_and_the_next_cycle_plans_its_pages(crawl) -> None:
    web, home = crawl
    before = _contents(home)
    mistyped = datetime.now(UTC).replace(microsecond=0) + timedelta(days=365)
    done = run_freshness("cycle", "--now", _iso(mistyped), "--budget", "12", home=home)
    assert done.returncode == 0, done.stderr
    assert "freshness undo" in " ".join(done.stderr.split())
    state = _state(home)
    frozen = state.filter(pl.col("last_fetched_at") == mistyped)
    assert frozen.height > 0  # the harm: these are not planned again for a year

    undone = run_freshness("undo", home=home)
    assert undone.returncode == 0, undone.stderr
    assert f"took back the cycle of {mistyped.isoformat()}" in undone.stdout
    assert _contents(home) == before  # every table and archive file as it was
    assert read_undo_point(Warehouse(home)) is None
    assert Warehouse(home).newest_cycles() and max(Warehouse(home).newest_cycles().values()) == T1

    again = run_freshness("undo", home=home)
    assert again.returncode == 2 and "nothing to undo" in again.stderr

    # the pages the mistaken cycle fetched are planned again by a cycle dated right
    web.set_now(T2)
    run_cycle(home, T2, budget=12)
    state = _state(home)
    assert state["last_fetched_at"].max() == T2
    refetched = state.filter(pl.col("url").is_in(frozen["url"].implode()))
    assert (refetched["last_fetched_at"] <= T2).all()
    assert refetched.filter(pl.col("last_fetched_at") == T2).height > 0


def test_an_undo_killed_half_way_is_finished_by_running_it_again(crawl) -> None:
    _, home = crawl
    before = _contents(home)
    mistyped = datetime.now(UTC).replace(microsecond=0) + timedelta(days=365)
    run_cycle(home, mistyped, budget=12, undo_point=True)
    for point in UNDO_POINTS:  # killed while putting files back, then while removing
        killed = run_freshness("undo", home=home, env={ENV: f"{point}#2"})
        assert killed.returncode == -9, killed.stderr
        assert _contents(home) != before
    done = run_freshness("undo", home=home)
    assert done.returncode == 0, done.stderr
    assert _contents(home) == before


def test_later_cycles_go_too_only_when_asked_and_seeds_added_since_stay(crawl, tmp_path) -> None:
    web, home = crawl
    mistyped = datetime.now(UTC).replace(microsecond=0) + timedelta(days=365)
    run_cycle(home, mistyped, budget=12, undo_point=True)
    web.set_now(T2)
    run_cycle(home, T2, budget=12)  # dated right, but built on the mistaken state
    extra = tmp_path / "more.txt"
    extra.write_text("http://127.0.0.1:9/added-later\n")
    assert run_freshness("seed", str(extra), home=home).returncode == 0

    refused = run_freshness("undo", home=home)
    assert refused.returncode == 2
    said = " ".join(refused.stderr.split())
    assert "1 cycle(s) ran after" in said and _iso(T2).replace("Z", "") in said
    assert read_undo_point(Warehouse(home)) is not None  # nothing was touched

    done = run_freshness("undo", "--yes", home=home)
    assert done.returncode == 0, done.stderr
    assert "and 1 cycle(s) after it" in done.stdout
    fetched = _state(home)["last_fetched_at"].drop_nulls()
    assert fetched.max() == T1  # both the mistaken cycle and the one after it are gone
    wh = Warehouse(home)
    assert "127.0.0.1:9" in wh.hosts_in("seeds")  # seeded after the snapshot: kept
    assert wh.files("fetch_log", since=T2) == []  # neither cycle's requests are left


def test_a_cycle_dated_right_keeps_no_snapshot(crawl) -> None:
    web, home = crawl
    web.set_now(T2)
    done = run_freshness("cycle", "--now", _iso(T2), "--budget", "5", home=home)
    assert done.returncode == 0, done.stderr
    assert not (home / "undo").exists()
    refused = run_freshness("undo", home=home)
    assert refused.returncode == 2 and "nothing to undo" in refused.stderr


def test_a_refused_cycle_dated_ahead_does_not_say_it_kept_a_snapshot(tmp_path: Path) -> None:
    """A future --now while another writer held the home said a snapshot was kept and `freshness
    undo` would take the cycle back, then refused: nothing was kept (found by an exploratory
    run)."""
    home = tmp_path / "home"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/a\n")
    assert run_freshness("seed", str(seeds), home=home).returncode == 0
    mistyped = datetime.now(UTC).replace(microsecond=0) + timedelta(days=365)
    with Warehouse(home).exclusive("a test holding the home"):
        refused = run_freshness("cycle", "--now", _iso(mistyped), "--dry-run", home=home)
    assert refused.returncode == 75, refused.stderr
    said = " ".join(refused.stderr.split())
    assert "days after this machine's clock" in said and "freshness undo" not in said
    assert read_undo_point(Warehouse(home)) is None


def test_a_run_dated_far_past_its_hosts_newest_cycle_keeps_a_snapshot_too(crawl) -> None:
    """A year typed wrong in the Dagster UI's launchpad went through no command: no warning, no
    snapshot, nothing to undo (found by an exploratory run). The run's first step keeps one
    when its time leaps more than LEAP past its hosts' newest cycle."""
    web, home = crawl
    before = _contents(home)
    leaped = T1 + timedelta(days=365)
    run_cycle(home, leaped, budget=12)  # as the UI's run: no snapshot asked for
    point = read_undo_point(Warehouse(home))
    assert point is not None and point.moment == leaped
    undo_cycle(home)
    assert _contents(home) == before
    web.set_now(T2)
    run_cycle(home, T2, budget=12)  # a step later, no leap: nothing kept
    assert read_undo_point(Warehouse(home)) is None


def test_with_nothing_left_to_undo_a_cycle_still_ahead_of_the_clock_is_named(crawl) -> None:
    """Two cycles mistyped a year ahead: undo takes back the last (only it kept a snapshot),
    and the next undo said "none is left", hiding the first, still in the home (found by a
    newcomer). The refusal now names it."""
    _, home = crawl
    first = datetime.now(UTC).replace(microsecond=0) + timedelta(days=365)
    for moment in (first, first + timedelta(hours=6)):
        done = run_freshness("cycle", "--now", _iso(moment), "--budget", "4", home=home)
        assert done.returncode == 0, done.stderr
    assert run_freshness("undo", home=home).returncode == 0
    again = run_freshness("undo", home=home)
    said = " ".join(again.stderr.split())
    assert again.returncode == 2 and "nothing to undo" in said, said
    assert (
        f"the home still holds cycles dated up to {first.isoformat()}, ahead of the clock" in said
    )


def test_a_cycle_that_wrote_no_history_since_the_snapshot_still_needs_yes(crawl) -> None:
    """A cycle dated ahead, then one that fetched nothing (a dry run here, a backfill of
    nothing in the audit that found it): undo without --yes took back both, the second
    unmentioned, as only dated history files told it of cycles run since."""
    _, home = crawl
    mistyped = datetime.now(UTC).replace(microsecond=0) + timedelta(days=365)
    done = run_freshness("cycle", "--now", _iso(mistyped), "--budget", "4", home=home)
    assert done.returncode == 0, done.stderr
    dry = run_freshness("cycle", "--dry-run", "--now", _iso(T2), home=home)
    assert dry.returncode == 0, dry.stderr
    refused = run_freshness("undo", home=home)
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2, said
    assert f"1 cycle(s) ran after the cycle of {mistyped.isoformat()} ({T2.isoformat()})" in said
    done = run_freshness("undo", "--yes", home=home)
    assert done.returncode == 0, done.stderr
    assert "and 1 cycle(s) after it" in done.stdout
