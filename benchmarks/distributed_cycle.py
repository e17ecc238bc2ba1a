"""The same cycles in-process and on two Celery workers must leave the same tables.

    .venv/bin/python benchmarks/distributed_cycle.py            # 3 cycles, 10 sites, about 3 min
    .venv/bin/python benchmarks/distributed_cycle.py --quick    # 2 cycles, 6 smaller sites, about 2 min

What it does, all on this machine and on loopback only:

1. installs what is missing: ``redis-server`` (Debian package, apt-get) and the project's
   ``distributed`` extra (dagster-celery, celery, redis) into this interpreter's environment;
2. starts redis-server on 127.0.0.1 at a free port, without persistence, in a temp folder;
3. serves a synthetic web (every behaviour but 'volatile', whose pages differ per request) on a
   frozen clock that it sets to each cycle's time before either home crawls it;
4. seeds three homes (A, B, C) with the same seeds and ``host_buckets = --buckets``;
5. starts ``--workers`` Celery workers (``celery -A freshness_pipeline.celery_app worker -c 1``,
   separate processes, distinct names) against home B's sqlite instance;
6. runs ``--cycles`` cycles 6 h apart, without a budget: home B with
   ``distributed.run_distributed_cycle`` (``--groups`` concurrent bucket-group runs whose steps
   the workers execute); home A in-process with ``runner.execute_cycle_run``, one run per group
   over that group's bucket range with the run config and tags of the group's Celery run, in
   turn (not ``run_cycle(hosts=...)``: it splits a group's range at its empty buckets into
   runs that each plan their own hosts, which is another computation); home C in-process with
   one ``run_cycle`` over every host;
7. compares every table of A and B (url_state, fetch_results, fetch_log, url_candidates and the
   rest), leaving out only what a run measures or where it writes rather than what it computes
   (``duration_ms`` and host_capacity's ``latency_s``, wall-clock timings; ``warc_filename``,
   ``warc_offset``, ``warc_length`` and the record id and location inside ``archived``: the
   WARC file is named after the process that writes it, and its record ids are random; the
   payload digests stay compared), and prints PASS or FAIL, each cycle's wall time three
   ways and which worker ran which steps (from the runs' event logs); then shows how C differs
   from B, which is not a failure: the plan's reserved verify/re-estimate picks, its ranks and
   the change prior are drawn over a run's hosts, so a cycle split into runs is a different
   (equally valid) cycle from one run over everything, budget or not (docs/distributed.md);
8. stops every process it started (workers, redis, the synthetic web), also on failure or
   Ctrl-C, and exits 1 on a mismatch or a failed run.

Not a unit test: it installs packages and takes minutes. ``docs/distributed.md`` has the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import traceback
import warnings
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

warnings.filterwarnings("ignore")  # dagster's beta/preview warnings, once per import

ROOT = Path(__file__).resolve().parents[1]
STEP = timedelta(hours=6)
# The only columns allowed to differ: wall-clock timings (a fetch's duration, a host's response
# latency) and where an archive record was written (the WARC file is named after the writing
# process; offsets and lengths follow from the write order and the record's random id).
IGNORED_COLUMNS = ("duration_ms", "latency_s", "warc_filename", "warc_offset", "warc_length")
# ``archived`` (archive.ArchivedOriginal as JSON) is compared without these keys, for the same
# reasons; its URI, date, payload digest, MIME type, status and index key stay compared.
ARCHIVED_LOCATION_KEYS = ("id", "file", "offset", "length")
CLEARED_ENV = ("DAGSTER_HOME", "FRESHNESS_HOME", "FRESHNESS_CELERY_BACKEND")


def log(message: str) -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------- installs
def ensure_redis_server() -> str:
    """The Debian package's binary; installed on first use (the package's service does not
    start in this container, and this script never uses it)."""
    found = shutil.which("redis-server")
    if found:
        return found
    log("installing redis-server (apt-get) ...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "redis-server"]
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, check=True)
        subprocess.run(install, env=env, check=True)
    found = shutil.which("redis-server")
    if not found:
        raise SystemExit("redis-server is still missing after apt-get install")
    return found


def ensure_distributed_extra() -> None:
    """The ``distributed`` extra's requirements, as pyproject.toml pins them, without
    reinstalling the project itself."""
    if importlib.util.find_spec("dagster_celery") is not None:
        return
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["distributed"]
    log(f"installing the distributed extra: {' '.join(extra)} ...")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *extra], check=True)
    importlib.invalidate_caches()


# ---------------------------------------------------------------------------- processes
class Started:
    """Every process this script starts, each in its own session so that a stop reaches its
    children too (a Celery worker's pool processes)."""

    def __init__(self) -> None:
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, cmd: list[str], *, env: dict, log_path: Path) -> subprocess.Popen:
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                cmd,
                env=env,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append((name, proc))
        return proc

    def stop_all(self, grace_s: float = 20.0) -> list[str]:
        """SIGTERM each group (a Celery worker's warm shutdown), SIGKILL what is left after
        the grace time; returns the names of groups that still had processes then."""
        for _, proc in self.procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for _, proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        killed = []
        for name, proc in self.procs:
            if _group_alive(proc.pid):
                killed.append(name)
                _signal_group(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                killed.append(f"{name} (unreaped)")
        self.procs.clear()
        return killed


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_redis(started: Started, binary: str, folder: Path) -> str:
    folder.mkdir()
    port = free_loopback_port()
    cmd = [binary, "--bind", "127.0.0.1", "--port", str(port), "--protected-mode", "yes"]
    cmd += ["--save", "", "--appendonly", "no", "--dir", str(folder), "--daemonize", "no"]
    started.start("redis", cmd, env=dict(os.environ), log_path=folder / "redis.log")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"redis did not answer on 127.0.0.1:{port}: see {folder / 'redis.log'}")


def start_workers(started: Started, n: int, env: dict, folder: Path) -> list[str]:
    names = [f"w{i + 1}@freshness" for i in range(n)]
    for name in names:
        cmd = [sys.executable, "-m", "celery", "-A", "freshness_pipeline.celery_app", "worker"]
        cmd += ["-c", "1", "-n", name, "--loglevel", "INFO", "--without-gossip"]
        cmd += ["--without-mingle"]
        started.start(name, cmd, env=env, log_path=folder / f"{name.split('@')[0]}.log")
    from freshness_pipeline.celery_app import app

    deadline = time.monotonic() + 120  # each worker imports dagster and polars first
    while time.monotonic() < deadline:
        answered = {name for reply in app.control.ping(timeout=1.0) or [] for name in reply}
        if set(names) <= answered:
            return names
        for name, proc in started.procs:
            if proc.poll() is not None:
                raise SystemExit(f"{name} exited with {proc.returncode}: see {folder}")
    raise SystemExit(f"workers {names} did not answer a ping within 120 s: see {folder}")


# ---------------------------------------------------------------------------- the crawl
def build_sites(quick: bool):
    from freshness_pipeline.synthweb import SiteSpec

    k = 1 if quick else 2
    sites = [
        SiteSpec("honest", "honest", 30 * k, sitemap_index=True, gzip_pages=True),
        SiteSpec("lastmod", "lastmod_only", 20 * k),
        SiteSpec("novalid", "no_validators", 20 * k),
        SiteSpec(
            "polite", "polite", 20 * k, crawl_delay=0.05, disallow=("/private/",), n_private=4
        ),
        SiteSpec("honest2", "honest", 15 * k),
        SiteSpec("honest3", "honest", 15 * k),
    ]
    if not quick:
        sites += [
            SiteSpec("honest4", "honest", 30),
            SiteSpec("lastmod2", "lastmod_only", 30),
            SiteSpec("novalid2", "no_validators", 30),
            SiteSpec("honest5", "honest", 30),
        ]
    return sites


def seed_home(home: Path, seeds: bytes, n_buckets: int, start):
    from freshness_pipeline.app.runner import load_seeds, open_instance

    home.mkdir()
    (home / "freshness.toml").write_text(f"[partitioning]\nhost_buckets = {n_buckets}\n")
    load_seeds(home, seeds, added_at=start)
    return open_instance(home)


def sortable(frame) -> list[str]:
    return [c for c, t in frame.schema.items() if not t.is_nested()]


def table_names(*homes: Path) -> list[str]:
    from freshness_pipeline.warehouse.storage import Warehouse

    return sorted({p.name for h in homes for p in Warehouse(h).root.iterdir() if p.is_dir()})


def comparable(frame):
    """``frame`` without the columns that say what a run measured or where it wrote
    (IGNORED_COLUMNS, ARCHIVED_LOCATION_KEYS)."""
    import polars as pl

    frame = frame.drop(IGNORED_COLUMNS, strict=False)
    if "archived" not in frame.columns:
        return frame

    def content(text: str | None) -> str | None:
        if text is None:
            return None
        record = json.loads(text)
        for key in ARCHIVED_LOCATION_KEYS:
            record.pop(key, None)
        return json.dumps(record, sort_keys=True)

    return frame.with_columns(
        pl.col("archived").map_elements(content, return_dtype=pl.String, skip_nulls=True)
    )


def run_group_in_process(home: Path, instance, now, first: str, last: str) -> tuple[int, str]:
    """(requests sent, error or '') of one group's run in this process: the single-machine
    cycle job over the bucket range ``first``..``last``, with the run config and tags that
    ``run_distributed_cycle`` gives the group's Celery run, under the home's writer lock."""
    import dagster as dg

    from freshness_pipeline.app.runner import execute_cycle_run, failure_message
    from freshness_pipeline.defs.distributed import group_run_tags
    from freshness_pipeline.defs.partitions import home_partitioning
    from freshness_pipeline.defs.schedules import cycle_run_config
    from freshness_pipeline.warehouse.storage import Warehouse

    warehouse = Warehouse(home)
    run_config = cycle_run_config(now.isoformat(), -1)
    run_config["loggers"] = {"console": {"config": {"log_level": "WARNING"}}}
    with warehouse.exclusive(f"group run {first}...{last} {now.isoformat()}"):
        result = execute_cycle_run(
            warehouse.home,
            home_partitioning(warehouse),
            instance,
            run_config=run_config,
            tags=group_run_tags(first, last, now.isoformat()),
        )
    if not result.success:
        return 0, failure_message(result.all_events, "the run failed")
    for event in result.get_asset_observation_events():
        observation = event.asset_observation_data.asset_observation
        if observation.asset_key == dg.AssetKey("fetch_results"):
            sent = observation.metadata.get("requests_sent")
            return (int(sent.value) if sent is not None else 0), ""
    return 0, ""


def compare_homes(a: Path, b: Path) -> tuple[list[str], list[str]]:
    """(per-table lines, problems): every table either warehouse has, compared row for row
    after sorting on every plain column, so that write order does not matter. A differing
    table is described by the rows only one side has and the columns where they differ."""
    import polars as pl
    from polars.testing import assert_frame_equal

    from freshness_pipeline.warehouse.storage import Warehouse

    lines, problems = [], []
    for table in table_names(a, b):
        left = comparable(Warehouse(a).read(table))
        right = comparable(Warehouse(b).read(table))
        order = sortable(left)
        try:
            assert_frame_equal(left.sort(order), right.sort(order))
        except AssertionError:
            only = left.join(right, on=order, how="anti", nulls_equal=True).height
            key = ["url"] if "url" in left.columns and left["url"].is_unique().all() else None
            columns = ""
            if key and left.height == right.height:
                both = left.join(right, on=key, suffix="__b")
                differ = [
                    c
                    for c in order
                    if c not in key and both.filter(pl.col(c).ne_missing(pl.col(f"{c}__b"))).height
                ]
                columns = f" in {', '.join(differ)}"
            text = f"{only} of {left.height} rows differ{columns}"
            problems.append(f"{table}: {text}")
            lines.append(f"  {table:18s} {left.height:6d} rows vs {right.height:6d}  {text}")
        else:
            lines.append(f"  {table:18s} {left.height:6d} rows  equal")
    return lines, problems


def step_times(instance, run_id: str) -> dict[str, tuple[str, float]]:
    """Step key -> (worker, seconds from the worker's start event to the step's end)."""
    import dagster as dg

    began: dict[str, tuple[str, float]] = {}
    ended: dict[str, float] = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or record.step_key is None:
            continue
        if event.event_type == dg.DagsterEventType.ENGINE_EVENT:
            data = event.engine_event_data
            worker = data.metadata.get("Celery worker") if data and data.metadata else None
            if worker is not None:
                began[record.step_key] = (str(worker.value), record.timestamp)
        elif event.event_type in (
            dg.DagsterEventType.STEP_SUCCESS,
            dg.DagsterEventType.STEP_FAILURE,
        ):
            ended[record.step_key] = record.timestamp
    return {key: (worker, ended.get(key, start) - start) for key, (worker, start) in began.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 cycles, 6 smaller sites")
    parser.add_argument("--cycles", type=int, default=None, help="default 3 (2 with --quick)")
    parser.add_argument("--buckets", type=int, default=8, help="host_buckets of both homes")
    parser.add_argument("--groups", type=int, default=2, help="concurrent bucket-group runs")
    parser.add_argument("--workers", type=int, default=2, help="Celery workers, -c 1 each")
    parser.add_argument("--seed", type=int, default=11, help="synthetic world seed")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = parser.parse_args(argv)
    cycles = args.cycles or (2 if args.quick else 3)

    redis_binary = ensure_redis_server()
    ensure_distributed_extra()
    for name in CLEARED_ENV:  # both homes keep their own instance under <home>/dagster
        os.environ.pop(name, None)
    os.environ["FRESHNESS_ALLOW_NETWORKS"] = "127.0.0.0/8"  # the synthetic web only

    from freshness_pipeline.app.distributed import run_distributed_cycle
    from freshness_pipeline.app.runner import run_cycle
    from freshness_pipeline.defs.distributed import BROKER_ENV, bucket_groups
    from freshness_pipeline.defs.partitions import hosts_in_buckets
    from freshness_pipeline.synthweb import DEFAULT_START, SyntheticWeb, build_world
    from freshness_pipeline.warehouse.storage import DEFAULT_RETENTION_DAYS, Warehouse

    tmp = Path(tempfile.mkdtemp(prefix="distributed-cycle-"))
    started = Started()
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    status = 1
    try:
        broker = start_redis(started, redis_binary, tmp / "redis")
        os.environ[BROKER_ENV] = broker
        log(f"redis: {broker} (no persistence, {tmp / 'redis'})")
        world = build_world(
            args.seed, start=DEFAULT_START, horizon_days=2, sites=build_sites(args.quick)
        )
        with SyntheticWeb(world) as web:
            web.set_now(DEFAULT_START)
            seeds = web.seeds_csv(tmp / "seeds.csv", variants=True).read_bytes()
            home_a, home_b, home_c = tmp / "in_process", tmp / "celery", tmp / "one_run"
            inst_a = seed_home(home_a, seeds, args.buckets, DEFAULT_START)
            inst_b = seed_home(home_b, seeds, args.buckets, DEFAULT_START)
            inst_c = seed_home(home_c, seeds, args.buckets, DEFAULT_START)
            hosts = Warehouse(home_b).hosts_in("seeds")
            warehouse_a = Warehouse(home_a)
            groups = bucket_groups(args.buckets, args.groups)
            log(
                f"synthetic web: {len(world.pages)} pages on {len(hosts)} hosts; "
                f"{args.buckets} buckets in {len(groups)} groups:"
            )
            group_hosts = []
            for first, last in groups:
                keys = _keys(args.buckets)
                keys = keys[keys.index(first) : keys.index(last) + 1]
                group_hosts.append(hosts_in_buckets(keys, args.buckets, hosts))
                log(f"  {first}...{last}: {len(group_hosts[-1])} hosts")

            worker_env = {
                **os.environ,
                "FRESHNESS_HOME": str(home_b),
                "DAGSTER_HOME": str(home_b / "dagster"),
                "PYTHONWARNINGS": "ignore",
            }
            t0 = time.perf_counter()
            names = start_workers(started, args.workers, worker_env, tmp)
            log(f"workers up in {time.perf_counter() - t0:.1f} s: {', '.join(names)}")

            per_worker: dict[str, list[float]] = defaultdict(list)
            failed: list[str] = []
            walls: dict[str, list[float]] = defaultdict(list)
            log("")
            log(
                "wall s per cycle: A = in-process, the same group runs in turn; "
                "B = celery, the groups' runs at once; C = in-process, one run"
            )
            log(
                "cycle  now                            A      B      C  B's runs: process s / run s, steps per worker"
            )
            for i in range(cycles):
                now = DEFAULT_START + i * STEP
                web.set_now(now)
                t = time.perf_counter()
                fetched = 0
                for first, last in groups:  # as run_distributed_cycle runs them, empty or not
                    sent, error = run_group_in_process(home_a, inst_a, now, first, last)
                    fetched += sent
                    if error:
                        failed.append(f"cycle {i + 1} A {first}...{last}: {error}")
                if DEFAULT_RETENTION_DAYS:  # what run_distributed_cycle does after its runs
                    warehouse_a.prune_fetch_log(now - timedelta(days=DEFAULT_RETENTION_DAYS))
                warehouse_a.ensure_views()
                walls["A"].append(time.perf_counter() - t)
                b = run_distributed_cycle(home_b, now, n_groups=args.groups)
                walls["B"].append(b.wall_s)
                t = time.perf_counter()
                c = run_cycle(home_c, now, instance=inst_c)
                walls["C"].append(time.perf_counter() - t)
                runs = []
                for run in b.runs:
                    if not run.success:
                        failed.append(f"cycle {i + 1} {run.label}: {run.error}")
                    times = step_times(inst_b, run.run_id) if run.run_id else {}
                    split: dict[str, int] = defaultdict(int)
                    for worker, seconds in times.values():
                        split[worker.split("@")[0]] += 1
                        per_worker[worker].append(seconds)
                    runs.append(
                        f"{run.wall_s:.1f}/{run.run_s:.1f} "
                        + " ".join(f"{w}:{n}" for w, n in sorted(split.items()))
                    )
                log(
                    f"{i + 1:5d}  {now.isoformat()}  {walls['A'][-1]:5.1f}  {b.wall_s:5.1f}  "
                    f"{walls['C'][-1]:5.1f}  " + "; ".join(runs)
                )
                log(f"       fetched {fetched} (one run: {c.fetched}), outcomes {c.outcomes}")

            log("")
            log("steps per worker, all cycles (busy s: the worker's start event to the step's end)")
            for worker in sorted(per_worker):
                secs = per_worker[worker]
                log(f"  {worker:18s} {len(secs):3d} steps  {sum(secs):7.1f} s")
            log("")
            log("last cycle, step -> worker:")
            for run in b.runs:
                if not run.run_id:
                    continue
                for key, (worker, seconds) in sorted(step_times(inst_b, run.run_id).items()):
                    log(f"  {run.label:20s} {key:45s} {worker:14s} {seconds:6.2f} s")

        lines, problems = compare_homes(home_a, home_b)
        log("")
        log(
            "tables, A (in-process, same group runs) vs B (celery), timings and archive "
            "locations left out:"
        )
        for line in lines:
            log(line)
        problems = failed + problems
        log("")
        log("for comparison, C (in-process, one run per cycle) vs B (celery), not a failure:")
        for line in compare_homes(home_c, home_b)[0]:
            log(line)
        log("")
        if problems:
            log("FAIL")
            for problem in problems:
                log(f"  {problem}")
        else:
            log(f"PASS: {cycles} cycles, every table equal")
            status = 0
    except KeyboardInterrupt:
        log("interrupted")
        status = 130
    except Exception as exc:  # dagster turns a SIGTERM during an in-process run into a failure
        traceback.print_exc()
        log(f"error: {type(exc).__name__}: {exc}")
        status = 1
    finally:
        leftover = started.stop_all()
        signal.signal(signal.SIGTERM, previous_term)
        if leftover:
            log(f"had to SIGKILL: {', '.join(leftover)}")
        else:
            log("stopped: workers, redis, synthetic web")
        if status != 0:
            for path in sorted(tmp.glob("w*.log")):
                log(f"--- {path.name} (last lines)")
                log("\n".join(path.read_text(errors="replace").splitlines()[-15:]))
        if args.keep or status not in (0, 130):
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


def _keys(n: int) -> list[str]:
    from freshness_pipeline.defs.partitions import bucket_keys

    return bucket_keys(n)


def _raise_interrupt(*_: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
