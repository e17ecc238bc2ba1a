"""What the Dagster side costs at 10,000 host partitions, before any page is fetched.

    .venv/bin/python benchmarks/dagster_definitions.py [--hosts 10000] [--repeat 5]

Measured, each several times (median, min, max):

- loading the code location in a fresh interpreter, as the code server does on start and on
  every "Reload definitions": import, repository resolution, and the repository snapshot the
  webserver receives; and `dagster definitions validate`, the CI gate;
- registering the hosts as dynamic partitions in a sqlite instance (what `freshness seed` does),
  once from empty and once as a small addition to the full set;
- one evaluation of the cycle schedule over every registered host, as the daemon's tick does;
- one steady-state evaluation of the new-hosts sensor (every host already registered), which
  reads every host's seeds file each time it runs.

Everything runs against a temporary sqlite DAGSTER_HOME and FRESHNESS_HOME; nothing touches the
network. Figures go in docs/dagster.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

warnings.filterwarnings("ignore")

LOAD_SNIPPET = """
import json, time, warnings
warnings.filterwarnings("ignore")
t0 = time.perf_counter()
from freshness_pipeline.definitions import defs
t1 = time.perf_counter()
repo = defs.get_repository_def()
t2 = time.perf_counter()
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster_shared.serdes import serialize_value
snap = serialize_value(RepositorySnap.from_def(repo))
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "resolve": t2 - t1, "snapshot": t3 - t2, "bytes": len(snap)}))
"""


def stats(samples: list[float]) -> tuple[float, float, float]:
    return statistics.median(samples), min(samples), max(samples)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def load_in_fresh_interpreter(repeat: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"wall": [], "import": [], "resolve": [], "snapshot": []}
    size = 0
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", LOAD_SNIPPET],
            capture_output=True,
            text=True,
            check=True,
        )
        out["wall"].append(time.perf_counter() - start)
        parts = json.loads(done.stdout.strip().splitlines()[-1])
        size = parts.pop("bytes")
        for key, value in parts.items():
            out[key].append(value)
    out["snapshot_kib"] = [size / 1024]
    return out


def validate_cli(repeat: int) -> list[float]:
    dagster = Path(sys.executable).with_name("dagster")
    command = [str(dagster)] if dagster.exists() else [sys.executable, "-m", "dagster"]
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [*command, "definitions", "validate", "-m", "freshness_pipeline.definitions"],
            capture_output=True,
            check=True,
        )
        samples.append(time.perf_counter() - start)
    return samples


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--sensor-hosts",
        type=int,
        default=None,
        help="hosts with a seeds file for the sensor row (default: --hosts; 0 skips it)",
    )
    args = parser.parse_args(argv)
    sensor_hosts = args.hosts if args.sensor_hosts is None else args.sensor_hosts

    with tempfile.TemporaryDirectory(prefix="fp-bench-") as tmp:
        root = Path(tmp)
        os.environ["DAGSTER_HOME"] = str(root / "dagster")
        os.environ["FRESHNESS_HOME"] = str(root / "home")
        (root / "dagster").mkdir()

        import dagster as dg
        import polars as pl

        from freshness_pipeline.app.runner import open_instance
        from freshness_pipeline.definitions import defs
        from freshness_pipeline.defs.partitions import register_hosts
        from freshness_pipeline.defs.sensors import new_hosts_sensor
        from freshness_pipeline.warehouse.storage import Warehouse

        rows: list[tuple[str, list[float], str]] = []
        print(f"loading the code location {args.repeat}x in fresh interpreters ...", flush=True)
        load = load_in_fresh_interpreter(args.repeat)
        rows += [
            ("load: fresh interpreter, wall", load["wall"], "python start + all below"),
            ("load: import definitions", load["import"], "dagster, polars, assets"),
            ("load: resolve repository", load["resolve"], "defs.get_repository_def()"),
            (
                "load: repository snapshot",
                load["snapshot"],
                f"what the webserver gets ({load['snapshot_kib'][0]:.0f} KiB)",
            ),
        ]
        validate_repeat = max(1, min(3, args.repeat))
        print(f"dagster definitions validate {validate_repeat}x ...", flush=True)
        rows.append(
            ("dagster definitions validate", validate_cli(validate_repeat), "CLI, wall time")
        )

        hosts = [f"host{i:05d}.example" for i in range(args.hosts)]
        print(f"registering {args.hosts} hosts {args.repeat}x ...", flush=True)
        register = []
        for i in range(args.repeat):
            (root / f"register-{i}").mkdir()
            (root / f"register-{i}" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
            scratch = dg.DagsterInstance.local_temp(str(root / f"register-{i}"))
            register.append(timed(lambda s=scratch: register_hosts(s, hosts)))
            scratch.dispose()
        rows.append((f"register {args.hosts} hosts (empty instance)", register, "one call"))

        repo = defs.get_repository_def()
        instance = open_instance(root / "home")  # the dagster.yaml `freshness seed` writes
        register_hosts(instance, hosts[:-100])
        rows.append(
            (
                f"register 100 more (on {args.hosts - 100})",
                [timed(lambda: register_hosts(instance, hosts))],
                "reads the known keys first",
            )
        )

        schedule = repo.get_schedule_def("freshness_cycle_schedule")
        tick = datetime(2026, 11, 30, 13, tzinfo=UTC)
        requests = []

        def evaluate() -> None:
            context = dg.build_schedule_context(
                instance=instance, scheduled_execution_time=tick, repository_def=repo
            )
            requests.append(schedule.evaluate_tick(context).run_requests)

        print(f"evaluating the schedule over {args.hosts} hosts {args.repeat}x ...", flush=True)
        rows.append(
            (
                f"schedule tick over {args.hosts} hosts",
                [timed(evaluate) for _ in range(args.repeat)],
                f"{len(requests[-1])} RunRequest (one range run)",
            )
        )

        if sensor_hosts:
            print(f"writing {sensor_hosts} seeds files for the sensor ...", flush=True)
            warehouse = Warehouse()
            for host in hosts[:sensor_hosts]:
                warehouse.write_partition(
                    "seeds", host, pl.DataFrame({"url": [f"https://{host}/"], "host": [host]})
                )
            context = dg.build_sensor_context(instance=instance, repository_def=repo)
            sensor_repeat = max(1, min(3, args.repeat))
            results = []
            samples = [
                timed(lambda: results.append(new_hosts_sensor(context)))
                for _ in range(sensor_repeat)
            ]
            assert isinstance(results[-1], dg.SkipReason), results[-1]
            rows.append(
                (
                    f"sensor tick, {sensor_hosts} seeded hosts",
                    samples,
                    "steady state: nothing new; reads every seeds file",
                )
            )
        instance.dispose()

    width = max(len(name) for name, _, _ in rows)
    print()
    print(f"{'measurement':<{width}}  {'median s':>9}  {'min s':>7}  {'max s':>7}  {'n':>2}  note")
    for name, samples, note in rows:
        median, low, high = stats(samples)
        print(f"{name:<{width}}  {median:9.3f}  {low:7.3f}  {high:7.3f}  {len(samples):2d}  {note}")
    print(
        f"\npython {sys.version.split()[0]}, {os.cpu_count()} CPUs, sqlite instance in a temp dir"
    )


if __name__ == "__main__":
    main()
