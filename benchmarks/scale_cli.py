"""Scale through the CLI: what a user with a large crawl meets with the default configuration.

    .venv/bin/python benchmarks/scale_cli.py               # 1,000,000 URLs on 10,000 hosts
    .venv/bin/python benchmarks/scale_cli.py --quick       # 100,000 URLs on 1,000 hosts
    .venv/bin/python benchmarks/scale_cli.py --code /tmp/clone   # the same against another checkout
    .venv/bin/python benchmarks/scale_cli.py --out /tmp/scale.md --json /tmp/scale.json

A black-box benchmark: every phase is the ``freshness`` command in a fresh process, on a fresh
home with no ``freshness.toml`` (the defaults), with ``DAGSTER_HOME`` unset so the instance is
``<home>/dagster``:

1. ``freshness seed big.csv``: ``--urls`` URLs spread evenly over ``--hosts`` hosts;
2. the floor: a bare polars ``scan_parquet`` of the seeded inventory (every host's seeds file)
   and a sort by value and URL, in its own interpreter;
3. ``freshness cycle --dry-run --budget <urls / 10>``;
4. ``freshness cycle --budget <urls / 10>`` (``--real-cycles`` of them, 6 h apart) against one
   nginx on loopback, with ``FRESHNESS_ALLOW_NETWORKS=127.0.0.0/8``.

The web: nginx (one worker, no access log) listens on one port of ``--hosts`` loopback addresses
127.64.0.1, 127.64.0.2, ... (250 per /24), so each address is one host of the crawl, and answers
every ``/p/<n>`` from one of ten ~5 KB HTML templates with the URI, host and page number written
in by ``sub_filter`` (the templates, robots.txt and page layout of benchmarks/growth.py, so the
pages fingerprint apart and answer conditional GETs with 304). A few hosts are checked for 200,
Last-Modified and 304 before anything is measured.

Per phase: wall seconds, CPU seconds (user + system of the command and every process it reaped,
from ``wait4``), peak RSS of the command's process tree (the largest sum of the tree's VmRSS,
sampled every 50 ms, or the command's own ru_maxrss if larger), and the growth of the Dagster
instance folder (``<home>/dagster``) with the rows the instance's sqlite files gained. For a real
cycle, the ``fetch_results`` step's wall time from the instance's step stats, and the cycle's
"non-fetch" time (its wall minus that step). The targets are printed with each figure.
``--code DIR`` runs the commands from the checkout in DIR (``PYTHONPATH``, so ``python -m
freshness_pipeline.app.cli``) with this venv's packages: how the "before" column of docs/scaling.md
is measured against a clone of an earlier commit. Without it they run from this script's own
checkout the same way, whichever checkout the venv has installed. Not a unit test.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from growth import SITE as GROWTH_SITE  # benchmarks/, beside this script
from growth import write_site
from harness import publish, run_measured, tree_rss_kb
from loopback_nginx import NginxSite, running_nginx

CLASSES = ("index", "listing", "article", "detail", "static")
SEEDED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CYCLE = timedelta(hours=6)
FULL = (1_000_000, 10_000)
QUICK = (100_000, 1_000)
# 127.0.0.x belongs to fetch_rate.py, 127.0.2.x to growth.py.
FIRST_OCTETS = (127, 64)
PER_SUBNET = 250
CLEARED_ENV = ("DAGSTER_HOME", "FRESHNESS_HOME", "DAGSTER_EVENT_BATCH_SIZE", "PYTHONPATH")
CHECKOUT = Path(__file__).resolve().parents[1]

TARGETS = {
    "seed_s": 60.0,
    "seed_rss_mb": 2048.0,
    "dry_s": 120.0,
    "dry_x_floor": 5.0,
    "cycle_rss_mb": 4096.0,
    "storage_mb": 50.0,
    "non_fetch_x_dry": 2.0,
}


def address(i: int) -> str:
    return f"{FIRST_OCTETS[0]}.{FIRST_OCTETS[1] + i // (PER_SUBNET * 250)}.{(i // PER_SUBNET) % 250}.{i % PER_SUBNET + 1}"


# ---- the web -------------------------------------------------------------------------------------


def nginx_site(n_hosts: int) -> NginxSite:
    """growth.py's site on ``n_hosts`` addresses: every listening socket takes a connection slot
    and a file, so growth.py's limits grow by one of each per address (two files)."""
    return dataclasses.replace(
        GROWTH_SITE,
        worker_connections=GROWTH_SITE.worker_connections + n_hosts,
        files_limit=(GROWTH_SITE.files_limit or 0) + 2 * n_hosts,
    )


def page_url(port: int, host: int, page: int) -> str:
    return f"http://{address(host)}:{port}/p/{page}"


def check_web(port: int, n_hosts: int) -> str:
    """A sample of hosts answers a page with Last-Modified, and 304 to If-Modified-Since."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    sample = sorted({0, n_hosts - 1, *random.Random(1).sample(range(n_hosts), min(20, n_hosts))})
    for host in sample:
        url = page_url(port, host, 123 + host)
        with opener.open(url, timeout=5) as response:
            body, modified = response.read(), response.headers.get("Last-Modified")
        if f"/p/{123 + host}".encode() not in body or not modified:
            raise SystemExit(f"{url}: URI not in the body or no Last-Modified")
        request = urllib.request.Request(url, headers={"If-Modified-Since": modified})
        try:
            opener.open(request, timeout=5)
            raise SystemExit(f"{url}: If-Modified-Since did not give 304")
        except urllib.error.HTTPError as exc:
            if exc.code != 304:
                raise SystemExit(f"{url}: If-Modified-Since gave {exc.code}") from exc
    return f"{len(sample)} sampled hosts answered 200 with Last-Modified, then 304"


def seed_csv(path: Path, n_urls: int, n_hosts: int, port: int) -> None:
    """``n_urls`` URLs, host by host, /p/0 .. /p/<n_urls / n_hosts - 1> on each, values 1-10."""
    with path.open("w") as out:
        out.write("url,value,url_class\n")
        for i in range(n_urls):
            host, page = i % n_hosts, i // n_hosts
            out.write(
                f"{page_url(port, host, page)},{1.0 + (i * 7) % 10},{CLASSES[page % len(CLASSES)]}\n"
            )


# ---- measuring one command --------------------------------------------------------------------


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.exists() else 0


def instance_rows(folder: Path) -> dict[str, int]:
    """Rows per table of the instance's sqlite files (read-only), summed over files."""
    rows: dict[str, int] = {}
    for db in folder.rglob("*.db"):
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for name in names:
                if name in ("event_logs", "asset_check_executions", "runs", "asset_keys"):
                    count = con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]  # noqa: S608
                    rows[name] = rows.get(name, 0) + count
    return rows


def run_command(
    name: str, argv: list[str], env: dict[str, str], log: Path, dagster_dir: Path | None = None
) -> dict:
    """Run ``argv`` to its end; wall, CPU, peak RSS of its tree, and what it added to the
    Dagster instance folder."""
    before = folder_bytes(dagster_dir) if dagster_dir else 0
    rows_before = instance_rows(dagster_dir) if dagster_dir and dagster_dir.exists() else {}
    with open(log, "ab") as err:
        err.write(f"\n==== {name}: {' '.join(argv)}\n".encode())
        err.flush()
        # cwd: not the checkout, whose folder `python -m` would put first on sys.path
        run = run_measured(
            argv,
            probe=tree_rss_kb,
            every_s=0.05,
            env=env,
            cwd=log.parent,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    if run.returncode != 0:
        sys.stderr.write(log.read_text(errors="replace")[-4000:])
        raise SystemExit(f"{name} failed (exit {run.returncode}): {run.stdout[-2000:]}")
    result = {
        "name": name,
        "seconds": run.wall_s,
        "cpu": run.cpu_s,
        "peak_rss_mb": max(run.peak_sample_kb, run.max_rss_kb) / 1024,
        "stdout": run.stdout.strip(),
        # (epoch seconds, tree RSS kB) every 50 ms: which step the peak falls in (step_peaks)
        "rss_samples": run.samples,
    }
    if dagster_dir:
        after = instance_rows(dagster_dir)
        result["storage_mb"] = (folder_bytes(dagster_dir) - before) / 1e6
        result["rows_added"] = {k: v - rows_before.get(k, 0) for k, v in after.items()}
    return result


FLOOR = """
import sys, time
t0 = time.perf_counter()
import polars as pl
t1 = time.perf_counter()
frame = (
    pl.scan_parquet(sys.argv[1], hive_partitioning=False)
    .sort(["value", "url"], descending=[True, False])
    .collect()
)
t2 = time.perf_counter()
print(frame.height, t1 - t0, t2 - t1)
"""


def step_times(dagster_dir: Path, python: str, env: dict[str, str]) -> dict[str, list[float]]:
    """[start, end] epoch seconds of each step of the newest run, from the instance's step
    stats (in a separate interpreter: the benchmark's own process stays free of dagster's
    imports)."""
    code = (
        "import json, sys, dagster as dg\n"
        "i = dg.DagsterInstance.from_config(sys.argv[1])\n"
        "run = i.get_runs(limit=1)[0]\n"
        "print(json.dumps({s.step_key: [s.start_time, s.end_time]\n"
        "    for s in i.get_run_step_stats(run.run_id) if s.end_time and s.start_time}))\n"
    )
    done = subprocess.run(
        [python, "-c", code, str(dagster_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def step_peaks(result: dict, times: dict[str, list[float]]) -> dict[str, float]:
    """Peak tree RSS (MB) sampled while each step ran."""
    peaks: dict[str, float] = {}
    for name, (start, end) in times.items():
        inside = [kb for at, kb in result.get("rss_samples", []) if start <= at <= end]
        if inside:
            peaks[name] = max(inside) / 1024
    return peaks


def timed_steps(result: dict, dagster_dir: Path, python: str, env: dict[str, str]) -> None:
    """Add each step's wall seconds and peak RSS to a phase's result."""
    times = step_times(dagster_dir, python, env)
    result["steps"] = {name: end - start for name, (start, end) in times.items()}
    result["step_peak_mb"] = step_peaks(result, times)
    result.pop("rss_samples", None)


# ---- the benchmark ------------------------------------------------------------------------------


def cli_module(code: Path) -> str:
    """The CLI's module in the checkout ``code``: ``freshness_pipeline.app.cli``, or
    ``freshness_pipeline.cli`` in a checkout from before the package's layers."""
    if (code / "freshness_pipeline" / "app" / "cli.py").exists():
        return "freshness_pipeline.app.cli"
    return "freshness_pipeline.cli"


def benchmark(args: argparse.Namespace) -> dict:
    n_urls, n_hosts = (args.urls, args.hosts) if args.urls else (QUICK if args.quick else FULL)
    if n_hosts > 62 * PER_SUBNET * 250:
        raise SystemExit(f"at most {62 * PER_SUBNET * 250} hosts")
    budget = n_urls // 10
    python = sys.executable
    env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    env |= {"FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8", "NO_PROXY": "*", "no_proxy": "*"}
    # The checkout's own package, not the venv's install, which may be another checkout's
    code = Path(args.code).resolve() if args.code else CHECKOUT
    env["PYTHONPATH"] = str(code)
    cli = [python, "-m", cli_module(code)]
    where = subprocess.run(
        [python, "-c", "import freshness_pipeline as f; print(f.__path__[0])"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        check=True,
    ).stdout.strip()
    print(f"the CLI runs {where}", flush=True)
    load0 = os.getloadavg()
    phases: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="scale-cli-", dir=args.tmp) as name:
        tmp = Path(name)
        write_site(tmp / "root", 11)
        addresses = [address(i) for i in range(n_hosts)]
        with running_nginx(nginx_site(n_hosts), tmp / "nginx", tmp / "root", addresses) as server:
            note = check_web(server.port, n_hosts)
            print(
                f"nginx on {address(0)}..{address(n_hosts - 1)}:{server.port}; {note}", flush=True
            )
            csv = tmp / "big.csv"
            seed_csv(csv, n_urls, n_hosts, server.port)
            home, log = tmp / "home", tmp / "commands.log"
            if args.config:
                home.mkdir()
                (home / "freshness.toml").write_text(args.config.replace("\\n", "\n") + "\n")
            dagster_dir = home / "dagster"
            home_args = ["--home", str(home)]

            def step(label: str, argv: list[str], instance: bool = True) -> dict:
                print(f"{label} ...", flush=True)
                if args.profile and argv[: len(cli)] == cli:
                    # the same command under cProfile (it inflates CPU: compare profiles only)
                    out = Path(args.profile) / f"{label.replace(' ', '_')}.prof"
                    out.parent.mkdir(parents=True, exist_ok=True)
                    argv = [python, "-m", "cProfile", "-o", str(out), *argv[1:]]
                result = run_command(label, argv, env, log, dagster_dir if instance else None)
                print(
                    f"  {result['seconds']:.1f} s, {result['peak_rss_mb']:,.0f} MB: "
                    f"{' '.join(result['stdout'].split())}",
                    flush=True,
                )
                phases.append(result)
                return result

            step("seed", [*cli, "seed", str(csv), *home_args, "--now", SEEDED_AT.isoformat()])
            glob = str(home / "warehouse" / "seeds" / "host=*" / "*.parquet")
            floor = step("floor", [python, "-c", FLOOR, glob], instance=False)
            rows, imported, work = floor["stdout"].split()
            floor |= {"rows": int(rows), "import_s": float(imported), "work_s": float(work)}
            if floor["rows"] != n_urls:
                raise SystemExit(f"the floor read {rows} URLs, not {n_urls}")
            cycle = [*cli, "cycle", "--budget", str(budget), *home_args]
            dry = step("dry run", [*cycle, "--dry-run", "--now", NOW.isoformat()])
            timed_steps(dry, dagster_dir, python, env)
            for i in range(args.real_cycles):
                label = f"cycle {i + 1}"
                real = step(label, [*cycle, "--now", (NOW + i * CYCLE).isoformat()])
                timed_steps(real, dagster_dir, python, env)
                real["fetch_step_s"] = real["steps"].get("fetch_results", 0.0)
                if args.keep_each:
                    # a home per cycle, to rerun the next cycle or one step of it on its own
                    shutil.copytree(home, Path(args.keep_each) / f"after-cycle-{i + 1}")
            if args.keep_each:
                (Path(args.keep_each) / "port").write_text(f"{server.port}\n")
            if args.keep:
                shutil.copytree(home, args.keep)
            phases.append(
                {
                    "name": "home",
                    "warehouse_mb": folder_bytes(home / "warehouse") / 1e6,
                    "dagster_mb": folder_bytes(dagster_dir) / 1e6,
                }
            )
    return {
        "urls": n_urls,
        "hosts": n_hosts,
        "budget": budget,
        "code": where,
        "config": args.config,
        "phases": [{k: v for k, v in p.items() if k != "rss_samples"} for p in phases],
        "load": [list(load0), list(os.getloadavg())],
        "started": datetime.now(UTC).isoformat(timespec="minutes"),
    }


def verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def report(saved: dict) -> str:
    by_name = {p["name"]: p for p in saved["phases"]}
    floor, dry, seed = by_name["floor"], by_name["dry run"], by_name["seed"]
    cycles = [p for p in saved["phases"] if p["name"].startswith("cycle ")]
    lines = [
        f"{saved['urls']:,} URLs on {saved['hosts']:,} loopback hosts, budget {saved['budget']:,}, "
        + (
            f"freshness.toml: {saved['config']!r}"
            if saved.get("config")
            else "the defaults (no freshness.toml)"
        )
        + f"; code: {saved['code']}",
        "",
        "| phase | wall s | CPU s | peak RSS MB | x floor (wall) | Dagster storage +MB "
        "| event_logs +rows | asset_check_executions +rows | output |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for p in saved["phases"]:
        if p["name"] == "home":
            continue
        rows = p.get("rows_added", {})
        storage = f"{p['storage_mb']:.1f}" if "storage_mb" in p else ""
        ratio = {"floor": "1.0", "seed": ""}.get(
            p["name"], f"{p['seconds'] / floor['seconds']:.1f}"
        )
        lines.append(
            f"| {p['name']} | {p['seconds']:.1f} | {p['cpu']:.1f} | {p['peak_rss_mb']:,.0f} "
            f"| {ratio} | {storage} | {rows.get('event_logs', '')} "
            f"| {rows.get('asset_check_executions', '')} "
            f"| {' '.join(p['stdout'].split())[:120]} |"
        )
    home = by_name.get("home", {})
    timed = [p for p in (dry, *cycles) if p.get("steps")]
    # the real cycle runs every step, in order; the dry run a prefix of them
    names = list(dict.fromkeys(k for p in reversed(timed) for k in p["steps"]))
    if timed:
        lines += [
            "",
            "Each step's wall seconds (the instance's step stats; a check's step is named "
            "<asset>_<check>), and the command outside the run's steps (start-up, definitions, "
            "the run's bookkeeping between steps, views):",
            "",
            "| step | " + " | ".join(p["name"] for p in timed) + " |",
            "|---|" + "---:|" * len(timed),
        ]
        for name in names:
            lines.append(
                f"| {name} | "
                + " | ".join(f"{p['steps'][name]:.1f}" if name in p["steps"] else "" for p in timed)
                + " |"
            )
        lines.append(
            "| outside the steps | "
            + " | ".join(f"{p['seconds'] - sum(p['steps'].values()):.1f}" for p in timed)
            + " |"
        )
        if any(p.get("step_peak_mb") for p in timed):
            lines += [
                "",
                "Peak RSS (MB) of the command's process tree while each step ran (sampled every "
                "50 ms):",
                "",
                "| step | " + " | ".join(p["name"] for p in timed) + " |",
                "|---|" + "---:|" * len(timed),
            ]
            for name in names:
                peaks = [p.get("step_peak_mb", {}).get(name) for p in timed]
                lines.append(
                    f"| {name} | "
                    + " | ".join("" if v is None else f"{v:,.0f}" for v in peaks)
                    + " |"
                )
    lines += [
        "",
        f"- floor: a fresh interpreter's `scan_parquet` of the {floor['rows']:,} seeded URLs "
        f"({saved['hosts']:,} files) sorted by value and URL: {floor['seconds']:.2f} s wall, of "
        f"which {floor['import_s']:.2f} s importing polars and {floor['work_s']:.2f} s the scan "
        "and sort.",
    ]
    for c in cycles:
        non_fetch = c["seconds"] - c["fetch_step_s"]
        c["non_fetch_s"] = non_fetch
        lines.append(
            f"- {c['name']}: the fetch_results step took {c['fetch_step_s']:.1f} s of "
            f"{c['seconds']:.1f} s; the rest (non-fetch) {non_fetch:.1f} s = "
            f"{non_fetch / dry['seconds']:.2f}x the dry run."
        )
    if home:
        lines.append(
            f"- the home at the end: warehouse {home['warehouse_mb']:,.0f} MB, Dagster instance "
            f"{home['dagster_mb']:,.1f} MB."
        )
    per_cycle = [p for p in (dry, *cycles)]
    t = TARGETS
    lines += [
        "",
        "| target | figure | |",
        "|---|---:|---|",
        f"| seed <= {t['seed_s']:.0f} s | {seed['seconds']:.1f} s | {verdict(seed['seconds'] <= t['seed_s'])} |",
        f"| seed <= {t['seed_rss_mb'] / 1024:.0f} GB | {seed['peak_rss_mb']:,.0f} MB "
        f"| {verdict(seed['peak_rss_mb'] <= t['seed_rss_mb'])} |",
        f"| dry run <= {t['dry_s']:.0f} s | {dry['seconds']:.1f} s | {verdict(dry['seconds'] <= t['dry_s'])} |",
        f"| dry run <= {t['dry_x_floor']:.0f}x the floor | {dry['seconds'] / floor['seconds']:.1f}x "
        f"| {verdict(dry['seconds'] / floor['seconds'] <= t['dry_x_floor'])} |",
    ]
    for p in per_cycle:
        lines.append(
            f"| {p['name']}: peak RSS < {t['cycle_rss_mb'] / 1024:.0f} GB | {p['peak_rss_mb']:,.0f} MB "
            f"| {verdict(p['peak_rss_mb'] < t['cycle_rss_mb'])} |"
        )
        lines.append(
            f"| {p['name']}: Dagster storage < {t['storage_mb']:.0f} MB | {p['storage_mb']:.1f} MB "
            f"| {verdict(p['storage_mb'] < t['storage_mb'])} |"
        )
    for c in cycles:
        ratio = c["non_fetch_s"] / dry["seconds"]
        lines.append(
            f"| {c['name']}: non-fetch <= {t['non_fetch_x_dry']:.0f}x the dry run | {ratio:.2f}x "
            f"| {verdict(ratio <= t['non_fetch_x_dry'])} |"
        )
    (a1, a5, a15), (b1, b5, b15) = saved["load"]
    lines += [
        "",
        f"- load average (1 / 5 / 15 min): {a1:.2f} / {a5:.2f} / {a15:.2f} at the start, "
        f"{b1:.2f} / {b5:.2f} / {b15:.2f} at the end; {os.cpu_count()} CPUs shared with nginx "
        "and other users' jobs.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 URLs on 1,000 hosts")
    parser.add_argument("--urls", type=int, default=0, help="URLs (with --hosts)")
    parser.add_argument("--hosts", type=int, default=0, help="hosts (with --urls)")
    parser.add_argument("--real-cycles", type=int, default=1, help="real cycles after the dry run")
    parser.add_argument(
        "--code", default=None, help="run the CLI from this checkout instead of the script's own"
    )
    parser.add_argument(
        "--config",
        default="",
        help="freshness.toml for the home, e.g. '[partitioning]\\nhost_buckets = 0'",
    )
    parser.add_argument("--tmp", default=None, help="parent folder of the temporary files")
    parser.add_argument("--keep", default=None, help="copy the home here at the end")
    parser.add_argument(
        "--keep-each",
        default=None,
        help="copy the home after each real cycle to DIR/after-cycle-<n> (and nginx's port to DIR/port)",
    )
    parser.add_argument(
        "--profile", default=None, help="run each command under cProfile, profiles in this folder"
    )
    parser.add_argument("--out", default=None, help="also write the report to this file")
    parser.add_argument("--json", default=None, help="also write the raw figures to this file")
    parser.add_argument("--report-from", default=None, help="print the report of a --json file")
    args = parser.parse_args()
    if args.report_from:
        print(report(json.loads(Path(args.report_from).read_text())))
        return
    if bool(args.urls) != bool(args.hosts):
        parser.error("--urls and --hosts go together")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    saved = benchmark(args)
    if args.json:
        Path(args.json).write_text(json.dumps(saved))
    text = report(saved)
    publish(text, args.out)


if __name__ == "__main__":
    main()
