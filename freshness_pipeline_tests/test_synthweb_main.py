"""``python -m freshness_pipeline.synthweb`` (synthweb/__main__.py) as a user runs it: a real
process that serves the seeded world's sites on loopback, one line per site, writes the seeds
CSV when asked, keeps its clock frozen at ``--speed 0`` (a naive ``--start`` read as UTC), and
stops on SIGTERM like on Ctrl-C, saying the simulated time it stopped at."""

from __future__ import annotations

import csv
import ipaddress
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from freshness_pipeline.synthweb.__main__ import main
from freshness_pipeline.synthweb.world import build_world


def get(url: str) -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as resp:
            return int(resp.status), resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, ""


def test_help_names_the_knobs_and_a_bad_start_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    for knob in ("--seed", "--speed", "--start", "--horizon-days", "--seeds-csv"):
        assert knob in shown
    with pytest.raises(SystemExit) as done:
        main(["--start", "next tuesday"])
    assert done.value.code == 2
    assert "--start" in capsys.readouterr().err


def test_the_command_serves_the_world_on_loopback_and_stops_on_sigterm(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.csv"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "freshness_pipeline.synthweb",
            "--seed",
            "3",
            "--speed",
            "0",
            "--start",
            "2026-03-02T12:00:00",
            "--horizon-days",
            "2",
            "--seeds-csv",
            str(seeds),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        while not lines or "Ctrl-C to stop" not in lines[-1]:
            line = proc.stdout.readline()
            assert line, f"exited early: {proc.wait()} {proc.stderr.read() if proc.stderr else ''}"
            lines.append(line.rstrip("\n"))
        world = build_world(3, horizon_days=2)
        sites = {}
        for line in lines[: len(world.sites)]:
            name, behaviour, url = line.split()
            sites[name] = url
            assert behaviour == world.site(name).behaviour
        assert set(sites) == {s.name for s in world.sites}
        assert lines[len(world.sites)] == f"seeds: {seeds}"
        assert lines[-1] == (
            f"{len(world.pages)} pages; simulated clock from 2026-03-02T12:00:00+00:00 at x0. "
            "Ctrl-C to stop."
        )
        for url in sites.values():
            host = urllib.parse.urlsplit(url).hostname
            assert host is not None and ipaddress.ip_address(host).is_loopback
            status, robots = get(url + "/robots.txt")
            assert status == 200 and "User-agent" in robots
        with seeds.open() as f:
            rows = list(csv.DictReader(f))
        served = {urllib.parse.urlsplit(u).netloc for u in sites.values()}
        # every seed is on a served site (some spelled as variants, for the normalizer)
        assert rows and {urllib.parse.urlsplit(r["url"]).netloc.lower() for r in rows} <= served
        some = rows[0]["url"]
        assert get(some)[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err[-2000:]
    # the clock stood still at the start: --speed 0, and a naive --start is UTC
    assert out.strip().splitlines()[-1] == "stopped at simulated 2026-03-02T12:00:00+00:00"
