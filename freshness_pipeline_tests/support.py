"""Running the `freshness` console script as a user would: a real process, its own home."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_freshness(
    *args: str, home: Path, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run `freshness ARGS` with FRESHNESS_HOME=home, loopback allowed and no inherited
    DAGSTER_HOME (the command keeps its Dagster instance under the home)."""
    script = Path(sys.executable).with_name("freshness")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "freshness_pipeline.cli"]
    full_env = {
        **os.environ,
        "FRESHNESS_HOME": str(home),
        "FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8",
        **(env or {}),
    }
    full_env.pop("DAGSTER_HOME", None)
    return subprocess.run(
        [*command, *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
