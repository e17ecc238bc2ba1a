"""What a newcomer's slips get from the CLI: one clear line naming the problem and exit 2,
nothing made or lost on the way (a mistyped --home, a typo in the allow list, brackets in
what is quoted back, a misspelt freshness.toml key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_pipeline.app.terminal import failed
from freshness_pipeline_tests.support import freshness_env, run_freshness, run_into_closed_pipe


def test_a_cycle_on_a_home_that_does_not_exist_exits_2_and_makes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "typo"
    done = run_freshness("cycle", "--dry-run", home=home)
    assert done.returncode == 2, done.stderr
    assert "no warehouse in" in done.stderr and "freshness seed" in done.stderr
    assert not home.exists()  # no empty home with a Dagster instance and a lock left behind


def _seeded(tmp_path: Path, *lines: str) -> tuple[Path, Path]:
    home = tmp_path / "home"
    seeds = tmp_path / "seeds.csv"
    seeds.write_text("\n".join(["url", *lines]) + "\n")
    return home, seeds


def test_a_bad_allow_list_is_bad_input_said_before_any_run(tmp_path: Path) -> None:
    home, seeds = _seeded(tmp_path, "http://127.0.0.1:9/a")
    assert run_freshness("seed", str(seeds), home=home).returncode == 0
    done = run_freshness(
        "cycle", "--dry-run", home=home, env={"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/33"}
    )
    assert done.returncode == 2, done.stderr
    assert "FRESHNESS_ALLOW_NETWORKS" in done.stderr and "127.0.0.0/33" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 3
    plans = home / "warehouse" / "revisit_plan"
    assert not list(plans.glob("host=127*"))  # no run started: no host has a plan


def test_brackets_in_what_is_quoted_back_are_shown_as_written(tmp_path: Path) -> None:
    home, seeds = _seeded(tmp_path, "http://127.0.0.1:9/a", "example.com/[b]")
    home.mkdir()
    (home / "freshness.toml").write_text('[planning]\nobjectiv = "capture"\n')
    done = run_freshness("seed", str(seeds), home=home)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "example.com/[b]" in said  # rich read "[b]" as markup and dropped it
    assert "[planning] takes only cost, credits, objective, not objectiv" in said


def test_a_cycle_dated_far_ahead_of_the_clock_is_said_and_still_runs(tmp_path: Path) -> None:
    """A mistyped year (2027 for 2026) left every page the cycle fetched unplanned for a year,
    silently (found by an exploratory run); a simulated clock ahead of the machine's is
    legitimate, so the cycle runs and says what it does."""
    from datetime import UTC, datetime, timedelta

    home = tmp_path / "home"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("https://example.test/a\n")
    assert run_freshness("seed", str(seeds), home=home).returncode == 0
    ahead = (datetime.now(UTC) + timedelta(days=400)).strftime("%Y-%m-%dT%H:%M:%SZ")
    done = run_freshness("cycle", "--now", ahead, "--dry-run", home=home)
    assert done.returncode == 0, done.stderr
    assert "days after this machine's clock" in done.stderr
    soon = (datetime.now(UTC) + timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    again = run_freshness("cycle", "--now", soon, "--dry-run", home=home)
    assert "machine's clock" not in again.stderr


def test_a_seeded_home_before_its_first_cycle_is_told_as_it_is(tmp_path: Path) -> None:
    """A contract audit: on a home seeded but not yet crawled, `reextract` said there was no
    warehouse (exit 2; during the first cycle too, where a busy home is 75) and `diff` of a
    seeded URL that it is not a URL the home crawls."""
    home, seeds = _seeded(tmp_path, "http://127.0.0.1:9/a")
    assert run_freshness("seed", str(seeds), home=home).returncode == 0
    done = run_freshness("reextract", home=home)
    assert done.returncode == 0, done.stderr
    assert "nothing to re-extract" in " ".join(done.stdout.split())
    done = run_freshness("diff", "http://127.0.0.1:9/a", home=home)
    assert done.returncode == 2
    assert "it is seeded, and no cycle has fetched it yet" in " ".join(done.stderr.split())
    done = run_freshness("reextract", home=tmp_path / "nowhere")
    assert done.returncode == 2 and "no warehouse in" in done.stderr


def test_an_empty_now_is_bad_input_not_the_clock(tmp_path: Path) -> None:
    """``--now "$T"`` with T unset ran a cycle as of the machine's clock (a contract audit)."""
    home, seeds = _seeded(tmp_path, "http://127.0.0.1:9/a")
    assert run_freshness("seed", str(seeds), home=home).returncode == 0
    for command in (["cycle", "--dry-run"], ["report"]):
        done = run_freshness(*command, "--now", "", home=home)
        assert done.returncode == 2, (command, done.stderr)
        assert "--now" in done.stderr and "Traceback" not in done.stderr
    assert not list((home / "warehouse" / "revisit_plan").glob("host=1*"))


def test_hosts_after_one_host_option_are_hosts_too(tmp_path: Path) -> None:
    """The contract's ``[--host HOST ...]``: ``--host a b`` was refused as extra arguments (a
    contract audit); it names the same hosts as ``--host a --host b``."""
    hosts = ["127.0.0.1:9", "127.0.0.2:9", "127.0.0.3:9"]
    home, seeds = _seeded(tmp_path, *(f"http://{h}/a" for h in hosts))
    assert run_freshness("seed", str(seeds), home=home).returncode == 0
    planned = home / "warehouse" / "revisit_plan"
    done = run_freshness("cycle", "--dry-run", "--host", hosts[0], hosts[1], home=home)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in planned.glob("host=1*")) == [f"host={h}" for h in hosts[:2]]
    stray = run_freshness("cycle", "--dry-run", hosts[2], home=home)
    assert stray.returncode == 2 and "hosts follow --host" in stray.stderr, stray.stderr


def test_a_reader_of_both_streams_that_stops_early_leaves_the_cycle_a_success(
    tmp_path: Path,
) -> None:
    """``freshness cycle ... 2>&1 | head -1``: the cycle completed and wrote its tables, then
    exited 1 on a note it could no longer print to stderr (a contract audit)."""
    home, seeds = _seeded(tmp_path, "http://127.0.0.1:9/a", "http://127.0.0.1:9/b")
    assert run_freshness("seed", str(seeds), home=home).returncode == 0
    done = run_into_closed_pipe(
        "cycle", "--now", "2026-12-01T00:00:00Z", stderr_too=True, env=freshness_env(home)
    )
    assert done.returncode == 0
    assert list((home / "warehouse" / "fetch_results").glob("host=*/*.parquet"))


def test_a_failure_is_one_line_on_stderr_with_what_was_given_shown_as_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    exit_ = failed("error", "no host [b] in this home", 2)
    assert exit_.exit_code == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "error: no host [b] in this home\n"
