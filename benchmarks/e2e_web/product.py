"""Driving freshness-pipeline through its public contract only: the ``freshness`` console script
run as a subprocess, and the DuckDB views in ``<home>/freshness.duckdb`` opened read-only.

Nothing here imports the product, so the same harness can drive another checkout's install
(``--freshness-bin``), e.g. a clean clone at an older commit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

ALLOW_NETWORKS = "127.0.0.0/8"


def default_freshness_bin() -> Path:
    """The ``freshness`` script next to the running interpreter (this checkout's venv)."""
    return Path(sys.executable).parent / "freshness"


def checkout_of(freshness_bin: Path) -> tuple[str, str]:
    """(commit, folder) of the checkout the script's package is installed from; the commit
    gets a ``+dirty`` suffix when that working tree has uncommitted changes."""
    python = freshness_bin.parent / "python"
    try:
        where = subprocess.run(
            [
                str(python),
                "-c",
                "import freshness_pipeline, os; print(os.path.dirname(freshness_pipeline.__file__))",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            cwd="/",
        ).stdout.strip()
        top = subprocess.run(
            ["git", "-C", where, "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        commit = subprocess.run(
            ["git", "-C", top, "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", top, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown", str(freshness_bin)
    return commit + ("+dirty" if dirty else ""), top


@dataclass
class CycleRun:
    cycle: int
    now: str
    wall_s: float
    returncode: int
    stdout: str
    stderr: str


class ProductDriver:
    """One crawl home driven cycle by cycle."""

    def __init__(self, freshness_bin: Path, home: Path) -> None:
        if not freshness_bin.exists():
            raise FileNotFoundError(f"--freshness-bin {freshness_bin} does not exist")
        self.bin = freshness_bin
        self.home = home
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("FRESHNESS_HOME", "DAGSTER_HOME")
        }
        self.env["FRESHNESS_ALLOW_NETWORKS"] = ALLOW_NETWORKS

    def _run(
        self, args: list[str], timeout: float
    ) -> tuple[float, subprocess.CompletedProcess[str]]:
        started = time.perf_counter()
        done = subprocess.run(
            [str(self.bin), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
            cwd=self.home.parent,
        )
        return time.perf_counter() - started, done

    def seed(self, csv_path: Path, now: str) -> tuple[float, str]:
        wall, done = self._run(["seed", str(csv_path), "--home", str(self.home), "--now", now], 600)
        if done.returncode != 0:
            raise RuntimeError(
                f"freshness seed failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
            )
        return wall, (done.stdout + done.stderr).strip()

    def cycle(self, k: int, now: str, budget: int, timeout: float = 1800) -> CycleRun:
        args = ["cycle", "--home", str(self.home), "--now", now, "--budget", str(budget)]
        wall, done = self._run(args, timeout)
        return CycleRun(k, now, wall, done.returncode, done.stdout, done.stderr)

    def query(self, sql: str) -> pl.DataFrame:
        path = self.home / "freshness.duckdb"
        con = duckdb.connect(str(path), read_only=True)
        try:
            return con.sql(sql).pl()
        finally:
            con.close()

    def after_cycle(self, now: str) -> dict[str, pl.DataFrame]:
        """What the views say right after the cycle at ``now``: the plan's selection and the
        fetch outcomes per host, and which URLs url_state calls gone."""
        at = f"TIMESTAMPTZ '{now}'"
        plan = f"SELECT host, count(*) FILTER (WHERE selected) AS planned FROM revisit_plan WHERE planned_at = {at} GROUP BY host"  # noqa: S608
        results = f"SELECT host, outcome, coalesce(error, '') AS error, count(*) AS n, count(*) FILTER (WHERE sent) AS sent FROM fetch_results WHERE fetched_at = {at} GROUP BY ALL"  # noqa: S608
        return {
            "plan": self.query(plan),
            "results": self.query(results),
            "gone": self.query("SELECT url FROM url_state WHERE status = 'gone'"),
        }

    def fetch_log(self) -> pl.DataFrame:
        return self.query(
            "SELECT url, host, fetched_at, http_status, outcome, conditional, validator, plan_reason "
            "FROM fetch_log"
        )

    def url_state(self) -> pl.DataFrame:
        return self.query(
            "SELECT url, host, status, change_rate, rate_is_lower_bound, n_fetches, n_changes, "
            "n_not_modified, last_outcome FROM url_state"
        )

    def robots(self) -> pl.DataFrame:
        return self.query(
            "SELECT host, http_status, mode, crawl_delay, sitemaps, error FROM robots"
        )

    def inventory(self) -> pl.DataFrame:
        return self.query("SELECT url, host, source FROM url_inventory")
