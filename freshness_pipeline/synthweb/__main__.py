"""Serve the default synthetic web for manual poking (curl, a browser, `freshness cycle`).

    python -m freshness_pipeline.synthweb --seed 0 --speed 3600

The simulated clock runs `speed` simulated seconds per real second, so a crawler pointed at it
sees pages change at a watchable pace. Only loopback addresses are bound.
"""

from __future__ import annotations

import argparse
import signal
import time
from datetime import UTC, datetime

from .server import SyntheticWeb
from .world import DEFAULT_START, build_world


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m freshness_pipeline.synthweb")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--speed",
        type=float,
        default=3600.0,
        help="simulated seconds per real second (0 freezes the clock)",
    )
    parser.add_argument(
        "--start",
        type=datetime.fromisoformat,
        default=DEFAULT_START,
        help="simulated start time, ISO 8601 (UTC if no offset)",
    )
    parser.add_argument(
        "--horizon-days",
        type=float,
        default=30.0,
        help="pages stop changing after this many simulated days",
    )
    parser.add_argument("--seeds-csv", default=None, help="also write a seeds CSV to this path")
    args = parser.parse_args(argv)
    start = args.start if args.start.tzinfo else args.start.replace(tzinfo=UTC)

    def _interrupt(*_: object) -> None:
        raise KeyboardInterrupt  # SIGTERM (kill, service managers) shuts down like Ctrl-C

    signal.signal(signal.SIGTERM, _interrupt)
    world = build_world(args.seed, start=start, horizon_days=args.horizon_days)
    with SyntheticWeb(world) as web:
        web.run_clock(args.speed, start)
        for name, url in web.base_urls.items():
            print(f"{name:10s} {world.site(name).behaviour:14s} {url}", flush=True)
        if args.seeds_csv:
            print(f"seeds: {web.seeds_csv(args.seeds_csv)}", flush=True)
        print(
            f"{len(world.pages)} pages; simulated clock from {start.isoformat()} "
            f"at x{args.speed:g}. Ctrl-C to stop.",
            flush=True,
        )
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            print(f"\nstopped at simulated {web.now.isoformat()}")


if __name__ == "__main__":
    main()
