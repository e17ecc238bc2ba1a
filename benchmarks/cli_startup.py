"""How long the `freshness` command takes to answer before it does any work.

    .venv/bin/python benchmarks/cli_startup.py            # 7 runs of each, median shown

Runs `freshness --help`, `freshness cycle --help` and a usage error (`freshness cycle --now
nonsense`, exit 2) in fresh processes, and `python -c pass` as the interpreter's own floor, all
in the same run. Target: `freshness --help` under 0.5 s. Not a unit test: the machine is shared,
so read the figures against the floor measured beside them.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.5


def timed(argv: list[str], expect: int) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != expect:
        raise SystemExit(f"{argv}: exit {done.returncode}, expected {expect}: {done.stderr[-500:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    script = Path(sys.executable).with_name("freshness")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "freshness_pipeline.app.cli"]
    cases = [
        ("python -c pass (floor)", [sys.executable, "-c", "pass"], 0),
        ("freshness --help", [*cli, "--help"], 0),
        ("freshness cycle --help", [*cli, "cycle", "--help"], 0),
        ("freshness cycle --now nonsense (exit 2)", [*cli, "cycle", "--now", "nonsense"], 2),
    ]
    print(f"| command | median s of {args.runs} | min s | x floor |")
    print("|---|---:|---:|---:|")
    floor = None
    for label, argv, expect in cases:
        times = [timed(argv, expect) for _ in range(args.runs)]
        median = statistics.median(times)
        floor = floor or median
        print(f"| {label} | {median:.3f} | {min(times):.3f} | {median / floor:.1f} |")
        if label == "freshness --help":
            verdict = "met" if median <= TARGET_S else "NOT met"
            help_line = f"target: `freshness --help` <= {TARGET_S} s: {median:.3f} s, {verdict}"
    print()
    print(help_line)


if __name__ == "__main__":
    main()
