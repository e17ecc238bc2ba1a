"""What running a cycle through Dagster costs over calling the same functions directly.

    .venv/bin/python benchmarks/orchestration.py                    # 1,000 and 10,000 hosts
    .venv/bin/python benchmarks/orchestration.py --quick            # 200 hosts
    .venv/bin/python benchmarks/orchestration.py --hosts 1000 --urls-per-host 20 --runs 2

A dry-run cycle (url_inventory, url_candidates, revisit_plan; no network: with dry_run the
inventory skips robots.txt and sitemaps) over ``--hosts`` hosts of ``--urls-per-host`` seeded
URLs, three ways, each in its own interpreter and on its own copy of the seeded home:

- direct: the asset modules' pure helpers (merge_inventory, canonical_candidates,
  apply_robots, plan_inputs, with_lastmod_hints, build_plan, the blocking checks' functions),
  reading and writing the same tables through storage.Warehouse, frames passed in memory;
- dagster sqlite: ``runner.run_cycle(dry_run=True)`` against the sqlite instance under the home,
  as ``freshness cycle --dry-run`` runs it;
- dagster ephemeral: the same with ``instance=dg.DagsterInstance.ephemeral()`` (in-memory
  storage), which separates what Dagster's execution costs from what its sqlite writes cost;
- dagster buckets: the sqlite instance again, with ``[partitioning] host_buckets = --buckets``
  in the home's freshness.toml: Dagster tracks hash buckets of hosts, the warehouse still one
  file per host and table.

Each interpreter runs ``--runs`` cycles in a row on its home (the first one cold: first
inventory, first events; later ones steady state), so both are reported. For the Dagster modes
the event-log writes are timed by wrapping the instance's event storage: that is the
per-(asset, partition) bookkeeping, about 10 ms each in sqlite on this machine. The plans of all
three are compared (same selected URLs), so a faster path cannot be a wrong one. Not a unit test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness import TimeInside, own_cpu_seconds, run_child, send_result  # benchmarks/

warnings.filterwarnings("ignore")  # dagster's beta/preview warnings, once per import

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CYCLE = timedelta(hours=6)
MODES = ("direct", "sqlite", "ephemeral", "buckets")
# The instance is the one under each temp home, written one event at a time, as by default.
CLEARED_ENV = ("DAGSTER_HOME", "FRESHNESS_HOME", "DAGSTER_EVENT_BATCH_SIZE")
CLASSES = ("index", "listing", "article", "detail", "static")


def seed_csv(n_hosts: int, per_host: int) -> bytes:
    lines = ["url,value,url_class"]
    for h in range(n_hosts):
        for k in range(per_host):
            value = 1.0 + (h * 31 + k * 7) % 10
            lines.append(f"https://h{h:06d}.example/page/{k},{value},{CLASSES[k % len(CLASSES)]}")
    return ("\n".join(lines) + "\n").encode()


# ---- the direct path --------------------------------------------------------------------------


def direct_cycle(home: Path, now: datetime, budget: int) -> dict:
    """The three planning steps of a dry run, in order, with frames passed in memory: the
    functions the assets call (cycle_inventory, cycle_candidates, cycle_plan) and their blocking
    checks.

    Host discovery uses one scan of the seeds (``hosts_in``) where run_cycle asks the Dagster
    instance; everything else is the code the assets run, so the difference to run_cycle is what
    orchestration adds: the instance, the event log, and the IO manager re-reading each asset's
    output from Parquet for the next step.
    """

    from freshness_pipeline.defs.checks import duplicate_urls, hosts_over_capacity, plan_over_budget
    from freshness_pipeline.defs.resources import CycleResource, WarehouseResource
    from freshness_pipeline.stages.candidates import cycle_candidates
    from freshness_pipeline.stages.inventory import cycle_inventory
    from freshness_pipeline.stages.plan import cycle_plan
    from freshness_pipeline.warehouse.storage import Warehouse

    cycle = CycleResource(now=now.isoformat(), budget=budget, dry_run=True)
    wh = Warehouse(home)
    config = WarehouseResource(home=str(home)).pipeline_config()  # <home>/freshness.toml
    with wh.exclusive(f"direct cycle {now.isoformat()}"):
        wh.sweep_temp_files()
        hosts = wh.hosts_in("seeds")
        # url_inventory (a dry run: no robots.txt or sitemap fetches)
        inventory = cycle_inventory(wh, hosts, now, http=None).frame
        wh.write_partitions("url_inventory", hosts, inventory)
        # url_candidates (+ its blocking check)
        candidates = cycle_candidates(wh, hosts, inventory, now, config).frame
        wh.write_partitions("url_candidates", hosts, candidates)
        if duplicate_urls(candidates):
            raise RuntimeError("duplicate candidate URLs")
        # revisit_plan (+ its blocking check)
        plan = cycle_plan(
            wh,
            hosts,
            candidates,
            now,
            window_s=cycle.window_s(),
            budget=cycle.budget_or_none(),
            objective=cycle.plan_objective(config),
            settings=config,
        ).frame
        wh.write_partitions("revisit_plan", hosts, plan)
        if plan_over_budget(plan, cycle.budget_or_none()) or hosts_over_capacity(
            plan, cycle.fetch_window_s
        ):
            raise RuntimeError("plan over budget or capacity")
        wh.ensure_views()
    return {"planned": int(plan["selected"].sum() or 0)}


# ---- the Dagster path, with its event-log writes timed -----------------------------------------


class EventTimer:
    """Wraps one instance's event storage so every stored event is counted and timed.

    Only ``store_event``: the sqlite and in-memory storages' ``store_event_batch`` is the base
    class's loop over it (and batching is off unless DAGSTER_EVENT_BATCH_SIZE is set).
    """

    def __init__(self, instance) -> None:
        self.seconds = 0.0
        self.events: Counter[str] = Counter()
        storage = instance.event_log_storage
        store_one = storage.store_event

        def timed_one(event):
            start = time.perf_counter()
            try:
                return store_one(event)
            finally:
                self.seconds += time.perf_counter() - start
                self.events[_kind(event)] += 1

        storage.store_event = timed_one

    def take(self) -> tuple[float, dict[str, int]]:
        seconds, events = self.seconds, dict(self.events)
        self.seconds, self.events = 0.0, Counter()
        return seconds, events


def _kind(event) -> str:
    dagster_event = getattr(event, "dagster_event", None)
    return dagster_event.event_type_value if dagster_event is not None else "log message"


def dagster_cycle(home: Path, now: datetime, budget: int, instance, timer: EventTimer) -> dict:
    from freshness_pipeline.app import runner

    # What run_cycle calls by these names: registering the hosts as partitions (not when
    # bucketed) and the one run of the cycle job.
    register = TimeInside(runner, "register_hosts")
    execute = TimeInside(runner, "execute_cycle_run")
    try:
        outcome = runner.run_cycle(home, now, budget=budget, dry_run=True, instance=instance)
    finally:
        register.restore()
        execute.restore()
    event_seconds, events = timer.take()
    return {
        "planned": outcome.planned,
        "runs": outcome.runs,
        "register": register.seconds,
        "run": execute.seconds,
        "event_store": event_seconds,
        "events": events,
    }


def child(args: argparse.Namespace) -> None:
    start = time.perf_counter()
    import dagster as dg

    from freshness_pipeline.app import runner

    imported = time.perf_counter() - start
    home = Path(args.home)
    budget = args.hosts * args.urls_per_host // 10
    instance = None
    timer = None
    if args.mode in ("sqlite", "buckets"):
        instance = runner.open_instance(home)
    elif args.mode == "ephemeral":
        instance = dg.DagsterInstance.ephemeral()
    if instance is not None:
        timer = EventTimer(instance)
    cycles = []
    for i in range(args.runs):
        now = NOW + i * CYCLE
        t, cpu = time.perf_counter(), own_cpu_seconds()
        if args.mode == "direct":
            detail = direct_cycle(home, now, budget)
        else:
            detail = dagster_cycle(home, now, budget, instance, timer)
        detail["seconds"] = time.perf_counter() - t
        detail["cpu"] = own_cpu_seconds() - cpu
        cycles.append(detail)
    send_result({"import": imported, "cycles": cycles})


def selected_digest(home: Path) -> tuple[int, int]:
    import polars as pl

    from freshness_pipeline.warehouse.storage import Warehouse

    plan = Warehouse(home).read("revisit_plan").filter(pl.col("selected"))
    return plan.height, int(plan.select(pl.col("url").hash(0).sum()).item() or 0)


# ---- driver ------------------------------------------------------------------------------------


def seed_home(home: Path, n_hosts: int, per_host: int) -> float:
    from freshness_pipeline.app.runner import load_seeds

    start = time.perf_counter()
    load = load_seeds(home, seed_csv(n_hosts, per_host), added_at=NOW - timedelta(days=1))
    if load.hosts != n_hosts:
        raise SystemExit(f"seeded {load.hosts} hosts, wanted {n_hosts}")
    return time.perf_counter() - start


def spawn(args: argparse.Namespace, mode: str, home: Path, n_hosts: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    child_args = [
        "--child",
        *("--mode", mode, "--home", str(home)),
        *("--hosts", str(n_hosts), "--urls-per-host", str(args.urls_per_host)),
        *("--runs", str(args.runs)),
    ]
    return run_child(__file__, child_args, what=f"{mode} at {n_hosts} hosts", env=env)


def machine_note() -> str:
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} "
        "(1 / 5 / 15 min) at the end"
    )


def run_size(args: argparse.Namespace, tmp: Path, n_hosts: int) -> list[str]:
    base = tmp / f"h{n_hosts}"
    modes = ["direct", *(m for m in args.modes if m != "direct")]
    homes = {mode: base / mode for mode in MODES}
    print(f"seeding {n_hosts:,} hosts x {args.urls_per_host} URLs ...", flush=True)
    # The sqlite home is seeded through load_seeds (hosts registered in its instance, as
    # `freshness seed` does); the others get a copy of its warehouse only, because the copied
    # dagster.yaml would point back at the first home's storage.
    seeded = seed_home(homes["sqlite"], n_hosts, args.urls_per_host)
    for mode in ("direct", "ephemeral", "buckets"):
        if mode not in modes:
            continue
        shutil.copytree(homes["sqlite"] / "warehouse", homes[mode] / "warehouse")
    if "buckets" in modes:
        (homes["buckets"] / "freshness.toml").write_text(
            f"[partitioning]\nhost_buckets = {args.buckets}\n"
        )
    results = {}
    for mode in modes:
        results[mode] = spawn(args, mode, homes[mode], n_hosts)
        took = ", ".join(f"{c['seconds']:.1f}" for c in results[mode]["cycles"])
        print(f"  {mode:9} cycles: {took} s", flush=True)
    digests = {mode: selected_digest(homes[mode]) for mode in modes}
    same = len(set(digests.values())) == 1

    urls = n_hosts * args.urls_per_host
    lines = [
        f"### {n_hosts:,} hosts x {args.urls_per_host} URLs ({urls:,} URLs), budget {urls // 10:,}, "
        f"{args.buckets} host buckets",
        "",
        "| mode | cycle | total s | x direct | CPU s | x direct (CPU) | register hosts s "
        "| job run s | event-log writes s (events) | rest s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i in range(args.runs):
        direct = results["direct"]["cycles"][i]["seconds"]
        direct_cpu = results["direct"]["cycles"][i]["cpu"]
        label = "1 (cold)" if i == 0 else f"{i + 1} (warm)"
        lines.append(f"| direct | {label} | {direct:.2f} | 1.0 | {direct_cpu:.2f} | 1.0 | | | | |")
        for mode in modes[1:]:
            c = results[mode]["cycles"][i]
            rest = c["seconds"] - c["register"] - c["run"]
            n_events = sum(c["events"].values())
            lines.append(
                f"| dagster {mode} | {label} | {c['seconds']:.2f} | "
                f"{c['seconds'] / direct:.1f} | {c['cpu']:.2f} | {c['cpu'] / direct_cpu:.1f} | "
                f"{c['register']:.2f} | {c['run']:.2f} | "
                f"{c['event_store']:.2f} ({n_events:,}) | {rest:.2f} |"
            )
    lines.append("")
    for mode in modes[1:]:
        last = results[mode]["cycles"][-1]
        top = ", ".join(
            f"{k} {v:,}" for k, v in sorted(last["events"].items(), key=lambda kv: -kv[1])[:4]
        )
        per_event = 1000 * last["event_store"] / max(1, sum(last["events"].values()))
        lines.append(f"- last {mode} cycle's events: {top}, ...; {per_event:.1f} ms per event")
    lines.append(
        f"same selected URLs in all {len(modes)} ways: {'yes' if same else 'NO: ' + str(digests)} "
        f"({digests['direct'][0]:,} selected); seeding took {seeded:.1f} s; importing "
        f"freshness_pipeline.app.runner (dagster) took {results[modes[-1]]['import']:.1f} s per process"
    )
    lines.append(f"machine: {machine_note()}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--urls-per-host", type=int, default=20)
    parser.add_argument("--runs", type=int, default=2, help="cycles in a row per mode")
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=MODES,
        default=list(MODES),
        help="which ways to run (direct always runs: it is the reference)",
    )
    parser.add_argument("--buckets", type=int, default=64, help="host buckets of that mode")
    parser.add_argument("--quick", action="store_true", help="200 hosts only")
    parser.add_argument("--tmp", default=None, help="parent folder of the temporary homes")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.hosts = args.hosts[0]
        child(args)
        return
    if args.quick:
        args.hosts = [200]
    out: list[str] = []
    with tempfile.TemporaryDirectory(prefix="orchestration-", dir=args.tmp) as tmp:
        for n_hosts in args.hosts:
            out += [*run_size(args, Path(tmp), n_hosts), ""]
    print()
    print("\n".join(out))


if __name__ == "__main__":
    main()
