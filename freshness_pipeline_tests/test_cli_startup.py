"""The command line answers `--help` and usage errors without loading the pipeline: Dagster,
polars and DuckDB are imported only by the commands that run it (benchmarks/cli_startup.py
measures the time)."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

HEAVY = ("dagster", "polars", "duckdb", "aiohttp", "pyarrow")


def test_importing_the_cli_loads_none_of_the_pipeline():
    probe = (
        "import sys, freshness_pipeline.app.cli; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "", f"imported at start-up: {done.stdout.strip()}"


def test_help_says_what_the_defaults_mean_and_flags_take_no_value():
    from freshness_pipeline.app.cli import app

    text = CliRunner().invoke(app, ["cycle", "--help"], env={"COLUMNS": "200"}).output
    lines = {line.split()[1]: line for line in text.splitlines() if line.startswith("│ --")}
    assert "<bool>" not in lines["--dry-run"], lines["--dry-run"]
    assert "0: no limit" in lines["--time-limit"]
    assert "default:" in lines["--budget"]


def test_command_descriptions_read_as_sentences_not_docstring_lines():
    """`freshness --help` broke a command's description where its docstring's line ended
    ("--retire removes" / "one."), mid-sentence (found by a newcomer)."""
    from freshness_pipeline.app.cli import app

    text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    (hosts,) = [line for line in text.splitlines() if line.startswith("│ hosts ")]
    assert hosts.rstrip(" │").endswith("--retire removes one."), hosts
