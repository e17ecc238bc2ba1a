"""What the CLI tells a first-time user, read as they read it (found by a newcomer following the
README): a seed file's spellings of one URL, a note that named a flag nobody passed, a status
count that did not add up, an expected age that looked perfect before most pages had a copy,
and a demo refusing a home without saying who chose it. Each runs the real command on a real
home; the pages come from a server on loopback."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web

from freshness_pipeline_tests.support import (
    freshness_command,
    freshness_env,
    run_freshness,
    serve_on_loopback,
)

PAGES = 10  # /p/0 .. /p/9, of which the first cycle fetches BUDGET
BUDGET = 2


async def _site(request: web.Request) -> web.Response:
    if request.path == "/robots.txt":
        return web.Response(text="User-agent: *\nDisallow: /private\n")
    if request.path.startswith("/p/"):
        name = request.path.rsplit("/", 1)[1]
        body = f"<html><head><title>Page {name}</title></head><body><p>Page {name}.</p></body>"
        return web.Response(text=body + "</html>", content_type="text/html")
    return web.Response(status=404)


@pytest.fixture(scope="module")
def first_cycle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A home seeded with PAGES pages and one that robots.txt disallows, after one cycle of
    BUDGET fetches dated two hours past the machine's clock (a `--now` ahead, as a user may
    give): most pages wait for their first copy."""
    home = tmp_path_factory.mktemp("first") / "home"
    with serve_on_loopback(_site) as base:
        seeds = home.parent / "seeds.txt"
        seeds.write_text("".join(f"{base}/p/{k}\n" for k in range(PAGES)) + f"{base}/private/x\n")
        assert run_freshness("seed", str(seeds), home=home).returncode == 0
        ahead = (datetime.now(UTC) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        done = run_freshness("cycle", "--now", ahead, "--budget", str(BUDGET), home=home)
        assert done.returncode == 0, done.stderr
        yield {"home": home, "host": base.removeprefix("http://"), "now": ahead}


def _row(table: str, key: str) -> list[str]:
    """The cells of the row of a rich table (as printed, piped) that starts with ``key``."""
    for line in table.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]
        if cells and cells[0] == key:
            return cells
    raise AssertionError(f"no row {key!r} in:\n{table}")


def test_hosts_lists_every_status_so_the_counts_add_up(first_cycle) -> None:
    """`freshness hosts` showed urls, active and gone only: 68, 62, 0 left six URLs nowhere
    (the newcomer's were blocked by robots.txt and not yet fetched)."""
    done = run_freshness("hosts", home=first_cycle["home"], env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    header = _row(done.stdout, "host")
    cells = dict(zip(header, _row(done.stdout, first_cycle["host"]), strict=True))
    statuses = ("active", "new", "gone", "blocked", "error")
    assert set(statuses) <= set(cells), header
    assert int(cells["urls"]) == sum(int(cells[s]) for s in statuses) == PAGES + 1
    assert (int(cells["active"]), int(cells["new"]), int(cells["blocked"])) == (
        BUDGET,
        PAGES - BUDGET,
        1,
    )


def test_report_says_how_much_of_the_crawl_the_expected_age_covers(first_cycle) -> None:
    """After a first cycle of 2 fetches of 10 pages the report's expected_age_h read 0.0, a
    perfect-looking staleness with most pages never fetched. It stays the age of the copies we
    have (a documented column), and copied_share beside it says what share of the pages (by
    value) those are, with a note when most have none yet."""
    done = run_freshness("report", home=first_cycle["home"], env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    assert _row(done.stdout, "expected_age_h")[1] == "0.0"
    assert _row(done.stdout, "copied_share")[1] == str(round(BUDGET / PAGES, 3))
    said = " ".join(done.stdout.split())
    assert (
        f"{PAGES - BUDGET} of the {PAGES} pages to keep have no copy yet: expected_age_h is "
        f"over the {BUDGET} that have one" in said
    )
    header = _row(done.stdout, "host")  # the by-host table has it too, beside expected_age_h
    assert header[header.index("expected_age_h") + 1] == "copied_share"


def test_a_cycle_run_without_now_does_not_name_the_flag(first_cycle) -> None:
    """A cycle run on the clock after one dated ahead said "note: --now <t> is before the
    newest cycle", naming a flag the user had not passed."""
    home = first_cycle["home"]
    done = run_freshness("cycle", "--dry-run", home=home)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "is before the newest cycle" in said
    assert "--now 20" not in said
    assert re.search(r"this cycle's time, the clock's \S+ \(no --now given\), is before", said)
    assert f"(up to {datetime.fromisoformat(first_cycle['now']).isoformat()})" in said
    given = "2026-01-01T00:00:00Z"
    done = run_freshness("cycle", "--dry-run", "--now", given, home=home)
    assert done.returncode == 0, done.stderr
    assert "--now 2026-01-01T00:00:00+00:00 is before the newest cycle" in " ".join(
        done.stderr.split()
    )


def test_a_cycle_at_the_time_of_the_last_says_so(first_cycle) -> None:
    """A cycle run again at the same --now planned nothing, exited 0 without a word, and its
    held-back line read as the reason (found by a newcomer)."""
    done = run_freshness(
        "cycle", "--dry-run", "--now", first_cycle["now"], home=first_cycle["home"]
    )
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    at = datetime.fromisoformat(first_cycle["now"]).isoformat()
    assert f"a cycle as of {at} already ran for 1 of the 1 hosts" in said, said
    assert "nothing planned, held back" not in said
    assert "is before the newest cycle" not in said


def test_seed_says_its_duplicates_are_spellings_of_one_url(tmp_path: Path) -> None:
    """A file of six distinct lines, five of them other spellings of the first, was reported
    as "5 duplicates": the user looked for repeated lines and found none."""
    seeds = tmp_path / "seeds.txt"
    spellings = [
        "http://a.example/p",
        "HTTP://A.example/p",
        "http://a.example/p#comments",
        "http://a.example/p?utm_source=mail",
        "http://a.example/static/../p",
        "http://a.example/p?",
    ]
    seeds.write_text("\n".join(spellings) + "\n")
    done = run_freshness("seed", str(seeds), home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    # and which lines they are, in one example ("5 duplicates" alone left a newcomer unable
    # to tell what the five were)
    assert (
        "seeded 1 URL on 1 host (1 new partition, 0 rows skipped, 5 duplicates after "
        "normalization, such as line 2's 'HTTP://A.example/p', line 1's 'http://a.example/p')"
        in " ".join(done.stdout.split())
    )


def test_the_demo_says_when_freshness_home_chose_the_home_it_refuses(tmp_path: Path) -> None:
    """With $FRESHNESS_HOME exported to their own crawl, `freshness demo` refused "<home>"
    without saying that the variable had chosen it: the user had to work out to unset it."""
    home = tmp_path / "crawl"
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/a\n")
    assert run_freshness("seed", str(seeds), home=home).returncode == 0
    chosen = run_freshness("demo", home=home)  # FRESHNESS_HOME=home, no --home
    assert chosen.returncode == 2, chosen.stderr
    said = " ".join(chosen.stderr.split())
    assert f"{home} (chosen by $FRESHNESS_HOME) holds a warehouse" in said
    assert "unset FRESHNESS_HOME" in said
    given = run_freshness("demo", "--home", str(home), home=home)
    assert given.returncode == 2, given.stderr
    assert "FRESHNESS_HOME" not in given.stderr  # --home chose it, and the message says the rest
    assert (home / "warehouse" / "seeds").is_dir()  # refused, left alone


def test_a_bucketed_seed_load_counts_new_hosts_in_the_same_words() -> None:
    """Past 100 hosts a home's partitions are host buckets, and the line counts new hosts."""
    import polars as pl

    from freshness_pipeline.app.runner import SeedLoad
    from freshness_pipeline.app.seed_lines import seed_summary
    from freshness_pipeline.warehouse.seeds import SeedParse

    rows = pl.DataFrame({"url": ["http://a.example/", "http://b.example/"]})
    load = SeedLoad(
        SeedParse(rows, errors=[(3, "missing scheme")], duplicates=1),
        hosts=2,
        new_hosts=["a.example", "b.example"],
        partitioning="16 host buckets",
    )
    assert seed_summary(load) == (
        "seeded 2 URLs on 2 hosts (2 new hosts, 1 row skipped, 1 duplicate after "
        "normalization); Dagster partitions: 16 host buckets"
    )


def test_held_back_counts_each_reason_in_its_own_words() -> None:
    """ "robots.txt unreachable: 1; circuit breaker (host failing): 19 URLs" put one unit after
    the last count only, and read "1 URLs" alone."""
    from freshness_pipeline.app.cycle_lines import held_back_line
    from freshness_pipeline.app.runner import CycleOutcome

    outcome = CycleOutcome(
        now=datetime(2026, 12, 1, tzinfo=UTC),
        hosts=["a.example"],
        planned=20,
        fetched=20,
        held_back={"robots.txt unreachable": 1, "circuit breaker (host failing)": 19},
    )
    assert held_back_line(outcome, dry_run=False) == (
        "[yellow]held back:[/] circuit breaker (host failing): 19 URLs; "
        "robots.txt unreachable: 1 URL"
    )


def test_a_dagster_home_left_exported_from_another_home_is_named(tmp_path: Path) -> None:
    """`export DAGSTER_HOME=$PWD/crawl/dagster` for `dagster dev`, left set, took a second
    home's runs and host partitions into the first home's instance without a word."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://127.0.0.1:9/a\n")
    first, second = tmp_path / "crawl", tmp_path / "own"
    assert run_freshness("seed", str(seeds), home=first).returncode == 0
    borrowed = {"DAGSTER_HOME": str(first / "dagster")}
    for args in (("seed", str(seeds)), ("cycle", "--dry-run")):
        done = run_freshness(*args, home=second, env=borrowed)
        assert done.returncode == 0, done.stderr
        said = " ".join(done.stderr.split())
        assert f"is the Dagster instance of another home ({first})" in said, said
        assert f"unset DAGSTER_HOME to keep them in {second / 'dagster'}" in said
    # its own instance, or one kept apart on purpose, is not remarked on
    for own in (second / "dagster", tmp_path / "instances" / "shared"):
        done = run_freshness("cycle", "--dry-run", home=second, env={"DAGSTER_HOME": str(own)})
        assert done.returncode == 0, done.stderr
        assert "DAGSTER_HOME" not in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_cycle_stopped_by_a_signal_says_so_and_exits_130(tmp_path: Path, sig: int) -> None:
    """Ctrl-C during fetching ended in Dagster's traceback and "cycle failed: ...
    DagsterExecutionInterruptedError", exit 1, as a broken pipeline does (found by an outside
    audit)."""
    asked = threading.Event()

    async def hangs(request: web.Request) -> web.Response:
        if not request.path.startswith("/p/"):
            return web.Response(status=404)  # robots.txt, the sitemap's guessed place
        asked.set()
        await asyncio.sleep(60)
        return web.Response(text="late", content_type="text/html")

    home = tmp_path / "home"
    with serve_on_loopback(hangs) as base:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text(f"{base}/p/1\n")
        assert run_freshness("seed", str(seeds), home=home).returncode == 0
        cycle = subprocess.Popen(
            [*freshness_command(), "cycle"],
            env=freshness_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert asked.wait(120), "the page was never asked for"
            cycle.send_signal(sig)
            _, err = cycle.communicate(timeout=60)
        finally:
            cycle.kill()
    assert cycle.returncode == 130, err[-2000:]
    assert "cycle interrupted: stopped by Ctrl-C or SIGTERM in fetch_results" in err
