"""``python -m freshness_pipeline.distributed --now ISO``: one distributed cycle from cron, for a
deployment without the daemon (docs/distributed.md). The cycle itself is
``freshness_pipeline.app.distributed.run_distributed_cycle``; this module is only its command
line, kept at this path because deployments name it.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime

from freshness_pipeline.app.distributed import run_distributed_cycle
from freshness_pipeline.defs.cycle_time import parse_now
from freshness_pipeline.defs.distributed import GROUPS_ENV
from freshness_pipeline.warehouse.storage import Warehouse


def main(argv: list[str] | None = None) -> int:
    """``python -m freshness_pipeline.distributed --now ISO``: one cycle from cron, for a
    deployment without the daemon; exits 1 if any group run failed."""
    parser = argparse.ArgumentParser(prog="python -m freshness_pipeline.distributed")
    parser.add_argument("--home", default=None, help="default: $FRESHNESS_HOME, else ./data")
    parser.add_argument("--now", default=None, help="ISO 8601; default: the current time")
    parser.add_argument("--groups", type=int, default=int(os.environ.get(GROUPS_ENV, 2)))
    parser.add_argument("--budget-per-group", type=int, default=None)
    args = parser.parse_args(argv)
    now = parse_now(args.now) if args.now else datetime.now(UTC)
    cycle = run_distributed_cycle(
        args.home or Warehouse().home,
        now,
        n_groups=args.groups,
        budget_per_group=args.budget_per_group,
    )
    for run in cycle.runs:
        status = "ok" if run.success else f"FAILED: {run.error}"
        print(f"{run.label}: run {run.run_id or '-'} {run.run_s:.1f} s, {status}")
    print(f"cycle {now.isoformat()}: {len(cycle.runs)} runs in {cycle.wall_s:.1f} s")
    for note in cycle.notes:
        print(note)
    return 0 if cycle.success else 1


if __name__ == "__main__":
    sys.exit(main())
