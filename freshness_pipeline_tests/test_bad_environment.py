"""A read-only home and a full disk: a clear error, a non-zero exit, and the previous tables
intact. Uses real mounts (a read-only bind mount, a small tmpfs); skipped, saying why, where
the test cannot mount."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from freshness_pipeline.app.runner import load_seeds, run_cycle
from freshness_pipeline.synthweb import DEFAULT_START, SiteSpec, SyntheticWeb, build_world
from freshness_pipeline.warehouse.archive import index_name_for, list_warcs
from freshness_pipeline.warehouse.archive.files import OPEN_SUFFIX
from freshness_pipeline.warehouse.storage import Warehouse
from freshness_pipeline_tests.pywb_server import warcio_check
from freshness_pipeline_tests.support import run_freshness

T1 = DEFAULT_START + timedelta(hours=6)


def mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() or 'mount failed'})")


def umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@pytest.fixture(scope="module")
def web():
    os.environ.setdefault("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    sites = [SiteSpec("honest", "honest", 15), SiteSpec("lastmod", "lastmod_only", 10)]
    with SyntheticWeb(build_world(5, start=DEFAULT_START, horizon_days=1, sites=sites)) as server:
        yield server


def crawled_home(web, home: Path) -> pl.DataFrame:
    web.set_now(DEFAULT_START)
    load_seeds(
        home,
        web.seeds_csv(home.parent / f"seeds-{uuid.uuid4().hex}.csv").read_bytes(),
        added_at=DEFAULT_START,
    )
    run_cycle(home, DEFAULT_START)
    web.set_now(T1)
    return Warehouse(home).read("url_state").sort("url")


def cycle_cli(home: Path) -> subprocess.CompletedProcess[str]:
    return run_freshness("cycle", "--now", T1.isoformat(), home=home, timeout=180)


def test_read_only_home_fails_clearly_and_keeps_the_tables(web, tmp_path):
    home = tmp_path / "home"
    before = crawled_home(web, home)
    mount("--bind", "-o", "ro", str(home), str(home))
    try:
        done = cycle_cli(home)
    finally:
        umount(home)
    assert done.returncode == 1, done.stderr
    assert "Read-only file system" in done.stderr and "previous tables are intact" in done.stderr
    assert Warehouse(home).read("url_state").sort("url").equals(before)
    assert cycle_cli(home).returncode == 0


def test_full_disk_fails_clearly_and_keeps_the_tables(web, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    mount("-t", "tmpfs", "-o", "size=24m", "tmpfs", str(disk))
    try:
        home = disk / "home"
        before = crawled_home(web, home)
        filler = disk / "filler"
        with open(filler, "wb") as handle:  # leave a few KB: the next cycle runs out mid-way
            try:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
            except OSError:
                pass
        done = cycle_cli(home)
        assert done.returncode == 1, done.stderr
        assert "No space left on device" in done.stderr or "disk is full" in done.stderr
        assert "previous tables are intact" in done.stderr or "cycle failed" in done.stderr
        filler.unlink()
        assert Warehouse(home).read("url_state").sort("url").equals(before)
        again = cycle_cli(home)
        assert again.returncode == 0, again.stderr
        assert Warehouse(home).read("url_state").height == before.height
        # the archive too: the full disk's unfinished WARC gone, every file whole and indexed
        archive = home / "archive"
        assert not [p.name for p in archive.iterdir() if p.name.endswith(OPEN_SUFFIX)]
        warcs = list_warcs(archive)
        assert len(warcs) >= 2  # the first cycle's and the one after the disk was freed
        for warc in warcs:
            assert (archive / index_name_for(warc)).exists(), warc
            assert warcio_check(archive / warc), warc
    finally:
        shutil.rmtree(disk / "home", ignore_errors=True)
        umount(disk)


@pytest.mark.parametrize("command", ["seed", "demo"])
def test_every_command_says_a_read_only_home_in_one_line(web, tmp_path, command):
    """`freshness seed` and `freshness demo` on a home that cannot be written: one line naming
    the file and the reason, exit 1, no traceback (as `freshness cycle` says it)."""
    home = tmp_path / "home"
    if command == "seed":
        before = crawled_home(web, home)
    else:  # the demo wants an empty home of its own
        home.mkdir()
    seeds = tmp_path / "more.csv"
    seeds.write_text("url\nhttp://other.example/a\n")
    mount("--bind", "-o", "ro", str(home), str(home))
    try:
        args = ["seed", str(seeds)] if command == "seed" else ["demo", "--home", str(home)]
        done = run_freshness(*args, home=home, timeout=180)
    finally:
        umount(home)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    message = " ".join(done.stderr.split())
    assert f"{command} failed: cannot write the home folder" in message, message
    assert "Read-only file system" in message
    if command == "seed":
        assert Warehouse(home).read("url_state").sort("url").equals(before)
