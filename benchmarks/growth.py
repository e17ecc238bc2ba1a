"""Growth: what one whole cycle costs as the crawl grows from 10,000 to a million URLs.

    .venv/bin/python benchmarks/growth.py                  # 10k, 100k and 1M URLs
    .venv/bin/python benchmarks/growth.py --quick          # 10k and 100k
    .venv/bin/python benchmarks/growth.py --sizes 20000 200000 --out /tmp/growth.md
    .venv/bin/python benchmarks/growth.py --sizes 100000 --profile url_candidates url_state

Issue 6, part 4. The other benchmarks time one stage on synthetic tables; this one runs the
real thing end to end, as ``freshness cycle`` does, so that a cost that only shows when the
stages meet (an IO manager re-reading a table, a join that fans out, a per-host loop) shows
too. One nginx, started here and stopped at the end, listens on 100 loopback addresses
127.0.2.1..127.0.2.100 (one port, one host each) and answers every ``/p/<n>`` from one of ten
~5 KB HTML templates, with ``sub_filter`` writing the URI, the host and the page number into the
text: the pipeline fingerprints extracted, normalized text (runs of four or more digits are
dropped as counters, so the number is also written in groups of at most three digits) and
treats equal content on one host as duplicates, so every URL must read differently. The
templates have a fixed mtime: Last-Modified is kept (``sub_filter_last_modified on``), nginx
weakens the ETag to ``W/"mtime-size"`` of the template, and both kinds of conditional GET are
checked to answer 304 before anything is measured. robots.txt allows everything with no
Crawl-delay and names no sitemap (so /sitemap.xml is asked for once per host and is a 404).

For each size, in a fresh interpreter and a fresh home with ``[partitioning] host_buckets = 64``:
``runner.load_seeds`` (timed on its own), then two ``runner.run_cycle`` calls 6 simulated hours
apart with a budget of a tenth of the URLs and ``FRESHNESS_ALLOW_NETWORKS=127.0.0.0/8``. The
first cycle meets only new pages; the second mostly too (the planner spends its budget on pages
never fetched before revisiting), so its revalidations are its re-estimate and verify shares;
what each cycle planned and sent is in the report. Per cycle: wall and CPU seconds (user +
system, all threads), the child's peak RSS during that cycle (VmHWM, reset through
/proc/self/clear_refs), the plan and fetch counts, requests per second of the fetch step, each
asset's wall time from Dagster's own step stats of the run, and each step's CPU seconds and RSS
read at its step events (wall time alone means little on a shared machine). After each cycle
the child collects garbage and counts the polars frames still alive. Seconds and megabytes per
1,000 URLs are printed per size, with the slope between sizes: a fixed cost per cycle makes the
per-1,000 figure fall with size, so the slope is what tells linear from superlinear.

``--profile STEP [STEP ...]`` runs cProfile inside those steps (of cycle ``--profile-cycle``);
``--json`` keeps the raw figures and ``--report-from`` prints their report again. nginx and the
client share the machine's cores; the report gives nginx's CPU and the load average. Not a unit
test.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

from harness import (  # benchmarks/, beside this script
    TimeInside,
    cpu_model,
    memory_gib,
    own_cpu_seconds,
    own_peak_rss_mb,
    own_rss_mb,
    process_cpu_seconds,
    publish,
    reset_own_peak_rss,
    run_child,
    send_progress,
    send_result,
)
from loopback_nginx import NginxSite, running_nginx

warnings.filterwarnings("ignore")  # dagster's beta/preview warnings, once per child's import

N_HOSTS = 100
ADDRESS_PREFIX = "127.0.2."  # 127.0.2.1 .. 127.0.2.100; 127.0.0.11-30 belong to fetch_rate.py
N_TEMPLATES = 10
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CYCLE = timedelta(hours=6)
# Fixed and before NOW, so Last-Modified is known, never moves and is never "in the future".
FILE_MTIME = 1_767_225_600  # 2026-01-01T00:00:00Z
SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000, 100_000)
ASSETS = ("url_inventory", "url_candidates", "revisit_plan", "fetch_results", "url_state")
CLASSES = ("index", "listing", "article", "detail", "static")
CLEARED_ENV = ("DAGSTER_HOME", "FRESHNESS_HOME", "DAGSTER_EVENT_BATCH_SIZE")


# ---- the site: templates and nginx ---------------------------------------------------------------

_PROSE = (
    "freshness crawler page change rate revisit schedule budget host server cache validator "
    "etag modified content fingerprint extract title article main header footer table river "
    "mountain garden window market street coffee letter winter summer yellow orange purple "
    "quiet rapid gentle bright hidden simple modern ancient narrow distant honest curious "
    "report update notice review answer record sample signal metric figure result session "
    "travel museum library theatre harbour station village valley forest island desert"
)
WORDS = _PROSE.split()


def template_html(rng: random.Random, size: int) -> str:
    """~``size`` bytes of HTML whose placeholders nginx fills per request: @@URI@@, @@HOST@@ and
    @@PAGE@@ (the page number in groups of at most three digits, which normalization keeps)."""
    title = " ".join(rng.choices(WORDS, k=4)).capitalize()
    paragraphs: list[str] = []
    length = 0
    while length < size - 700:
        text = " ".join(rng.choices(WORDS, k=rng.randint(25, 60))).capitalize() + "."
        paragraphs.append(f"<p>{text}</p>")
        length += len(text) + 8
    body = "\n".join(paragraphs)
    return (
        "<!doctype html>\n<html><head><meta charset=utf-8>"
        f"<title>{title}, page @@PAGE@@ on @@HOST@@</title></head><body>\n"
        '<nav><a href="/">home</a> <a href="/about">about</a></nav>\n'
        f"<main><h1>{title}: @@URI@@</h1>\n"
        "<p>This is @@URI@@ of @@HOST@@, page @@PAGE@@.</p>\n"
        f"{body}\n</main>\n"
        "<footer>@@HOST@@</footer></body></html>\n"
    )


def write_site(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    (root / "t").mkdir(parents=True, exist_ok=True)
    for k in range(N_TEMPLATES):
        target = root / "t" / f"t{k}.html"
        target.write_text(template_html(rng, rng.randint(4800, 5200)))
        os.utime(target, (FILE_MTIME, FILE_MTIME))
    robots = root / "robots.txt"
    robots.write_text("User-agent: *\nDisallow:\n")
    os.utime(robots, (FILE_MTIME, FILE_MTIME))


# The page number n of /p/<n> is split by the location's regex into groups of at most three
# digits (g1 g2 g3; g1 can only be longer past a billion) and its last digit picks the template.
# Pages are built per request, so the open-file cache holds only the ten templates.
SITE = NginxSite(
    server="""
        root "{root}";

        location = /robots.txt {{
        }}

        location ~ "^/p/(?<g1>\\d*?)(?<g2>\\d{{0,3}}?)(?<g3>\\d{{0,2}}(?<last>\\d))$" {{
            alias "{root}/t/t$last.html";
            default_type text/html;
            sub_filter_once off;
            sub_filter_last_modified on;
            sub_filter "@@URI@@" "$request_uri";
            sub_filter "@@HOST@@" "$host";
            sub_filter "@@PAGE@@" "$g1 $g2 $g3";
        }}

        location / {{
            return 404;
        }}
    """,
    http_options="""
        keepalive_timeout 60s;
        keepalive_requests 1000000;
        open_file_cache max=64 inactive=600s;
    """,
)


def address(host: int) -> str:
    return f"{ADDRESS_PREFIX}{host + 1}"


def page_url(port: int, host: int, page: int) -> str:
    return f"http://{address(host)}:{port}/p/{page}"


def check_site(port: int) -> list[str]:
    """Before measuring: every host answers a page with Last-Modified, If-Modified-Since and
    If-None-Match give 304, and pages of one host have distinct content fingerprints (else the
    pipeline would see duplicates and plan something else than the benchmark means)."""
    from freshness_pipeline.science.fingerprint import content_fingerprint

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, no proxy

    def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
        try:
            with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), b""

    notes: list[str] = []
    etags: set[str] = set()
    for host in range(N_HOSTS):
        url = page_url(port, host, 1000 + host)
        status, headers, body = get(url)
        if status != 200 or f"/p/{1000 + host}".encode() not in body:
            raise SystemExit(f"{url}: status {status}, URI not in the body")
        modified = headers.get("Last-Modified")
        if not modified:
            raise SystemExit(f"{url}: no Last-Modified (sub_filter_last_modified?)")
        if headers.get("ETag"):
            etags.add(headers["ETag"])
        if get(url, {"If-Modified-Since": modified})[0] != 304:
            raise SystemExit(f"{url}: If-Modified-Since {modified} did not give 304")
        if headers.get("ETag") and get(url, {"If-None-Match": headers["ETag"]})[0] != 304:
            raise SystemExit(f"{url}: If-None-Match {headers['ETag']} did not give 304")
        if get(f"http://{address(host)}:{port}/robots.txt")[0] != 200:
            raise SystemExit(f"host {host}: no robots.txt")
    notes.append(
        f"Last-Modified kept and If-Modified-Since answered 304 on all {N_HOSTS} hosts; "
        f"{len(etags)} distinct ETags on the 200s, e.g. {min(etags, default='none')}: "
        "sub_filter weakens nginx's ETag to W/ and it is the template's mtime-size, shared by "
        "every URL on that template; If-None-Match with it also answered 304"
    )
    # Pages across the number range, including 4+ digit numbers that normalization would
    # drop if they were written as one run of digits.
    pages = sorted({*range(0, 200), *range(990, 1100), *range(9_900, 10_000), 123_456, 999_999})
    prints: dict[str, int] = {}
    for page in pages:
        status, headers, body = get(page_url(port, 0, page))
        fp = content_fingerprint(body, content_type=headers.get("Content-Type"))
        if fp in prints:
            raise SystemExit(f"/p/{page} and /p/{prints[fp]} have the same fingerprint")
        prints[fp] = page
    notes.append(f"{len(pages)} sampled pages of one host: {len(prints)} distinct fingerprints")
    return notes


# ---- one size, in its own interpreter ---------------------------------------------------------


def seed_csv(size: int, port: int) -> bytes:
    """``size`` URLs spread evenly over the hosts, /p/0 .. /p/<size/100 - 1> on each, so that
    every host serves all ten templates."""
    lines = ["url,value,url_class"]
    for i in range(size):
        host, page = i % N_HOSTS, i // N_HOSTS
        lines.append(
            f"{page_url(port, host, page)},{1.0 + (i * 7) % 10},{CLASSES[page % len(CLASSES)]}"
        )
    return ("\n".join(lines) + "\n").encode()


class StepClock:
    """Wraps the instance's event storage to read CPU seconds and the peak RSS at each step's
    start and end events, and at the run's (the in-process executor stores them synchronously,
    in the step's thread): Dagster's step stats have wall time only, and under other users' load
    CPU is the figure that holds. ``--profile`` switches cProfile on for exactly one step."""

    RUN_START, RUN_ENDS = "PIPELINE_START", ("PIPELINE_SUCCESS", "PIPELINE_FAILURE")

    def __init__(self, instance, profile_steps: list[str]) -> None:
        self.cpu: dict[str, float] = {}
        self.peak: dict[str, float] = {}
        self.start_rss: dict[str, float] = {}
        self.run_cpu = 0.0
        self.cycle_peak = 0.0
        self._started: dict[str, float] = {}
        self._run_started: float | None = None
        self.profile_steps = profile_steps
        self.profilers: dict = {}
        self.profiling = False
        storage = instance.event_log_storage
        store_one = storage.store_event

        def timed(event):
            self._note(event)
            return store_one(event)

        storage.store_event = timed

    def _note(self, event) -> None:
        dagster_event = getattr(event, "dagster_event", None)
        if dagster_event is None:
            return
        kind = dagster_event.event_type_value
        if kind == self.RUN_START:
            self._run_started = own_cpu_seconds()
        elif kind in self.RUN_ENDS and self._run_started is not None:
            self.run_cpu += own_cpu_seconds() - self._run_started
            self._run_started = None
        if not event.step_key:
            return
        if kind == "STEP_START":
            # The peak so far belongs to the cycle; from here on VmHWM is this step's own.
            self.cycle_peak = max(self.cycle_peak, own_peak_rss_mb())
            reset_own_peak_rss()
            self.start_rss[event.step_key] = own_rss_mb()
            self._started[event.step_key] = own_cpu_seconds()
            if self.profiling and event.step_key in self.profile_steps:
                import cProfile

                self.profilers[event.step_key] = cProfile.Profile()
                self.profilers[event.step_key].enable()
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and event.step_key in self._started:
            if self.profiling and event.step_key in self.profilers:
                self.profilers[event.step_key].disable()
            spent = own_cpu_seconds() - self._started.pop(event.step_key)
            self.cpu[event.step_key] = self.cpu.get(event.step_key, 0.0) + spent
            peak = own_peak_rss_mb()
            self.peak[event.step_key] = max(self.peak.get(event.step_key, 0.0), peak)
            self.cycle_peak = max(self.cycle_peak, peak)

    def start_cycle(self) -> None:
        reset_own_peak_rss()
        self.cycle_peak = own_peak_rss_mb()

    def take(self) -> dict:
        """This cycle's figures; the cycle's peak is the highest of every stretch's VmHWM."""
        out = {
            "step_cpu": self.cpu,
            "step_peak_rss_mb": self.peak,
            "step_start_rss_mb": self.start_rss,
            "run_cpu": self.run_cpu,
            "peak_rss_mb": max(self.cycle_peak, own_peak_rss_mb()),
        }
        self.cpu, self.peak, self.start_rss = {}, {}, {}
        self.run_cpu, self.cycle_peak = 0.0, 0.0
        return out

    def profile_texts(self, top: int) -> dict[str, str]:
        import io
        import pstats

        texts = {}
        for step in self.profile_steps:
            if step not in self.profilers:
                texts[step] = f"(step {step} never ran)"
                continue
            out = io.StringIO()
            stats = pstats.Stats(self.profilers[step], stream=out).strip_dirs()
            stats.sort_stats("cumulative").print_stats(top)
            stats.sort_stats("tottime").print_stats(top)
            texts[step] = out.getvalue()
        return texts


def child(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    import polars as pl

    from freshness_pipeline.app import runner
    from freshness_pipeline.stages import fetch as fetch_module
    from freshness_pipeline.warehouse.storage import Warehouse

    imported = time.perf_counter() - t0
    home = Path(args.home)
    home.mkdir(parents=True, exist_ok=True)
    (home / "freshness.toml").write_text(f"[partitioning]\nhost_buckets = {args.buckets}\n")
    size = args.size
    data = seed_csv(size, args.port)
    baseline_rss = own_rss_mb()

    reset_own_peak_rss()
    wall, cpu = time.perf_counter(), own_cpu_seconds()
    load = runner.load_seeds(home, data, added_at=NOW - timedelta(days=1))
    seed = {
        "seconds": time.perf_counter() - wall,
        "cpu": own_cpu_seconds() - cpu,
        "peak_rss_mb": own_peak_rss_mb(),
        "rows": load.parse.rows.height,
        "hosts": load.hosts,
    }
    del data, load
    if seed["rows"] != size or seed["hosts"] != N_HOSTS:
        raise SystemExit(f"seeded {seed['rows']} URLs on {seed['hosts']} hosts")
    send_progress(f"{size:,} URLs seeded in {seed['seconds']:.1f} s")

    # The network part of the fetch step, apart from its polars and Parquet work.
    network = TimeInside(fetch_module, "fetch_all_sync")

    instance = runner.open_instance(home)
    clock = StepClock(instance, args.profile or [])
    cycles = []
    for i in range(2):
        now = NOW + i * CYCLE
        clock.profiling = bool(args.profile) and i == args.profile_cycle - 1
        network.reset()
        nginx0 = process_cpu_seconds(args.nginx_pid)
        rss_before = own_rss_mb()
        clock.start_cycle()
        wall, cpu = time.perf_counter(), own_cpu_seconds()
        outcome = runner.run_cycle(home, now, budget=size // 10, instance=instance)
        seconds, spent = time.perf_counter() - wall, own_cpu_seconds() - cpu
        measured = clock.take()
        peak = measured["peak_rss_mb"]
        runs = instance.get_runs(limit=outcome.runs)
        steps: dict[str, float] = {}
        run_seconds = 0.0
        for run in runs:
            stats = instance.get_run_stats(run.run_id)
            run_seconds += (stats.end_time or 0.0) - (stats.start_time or 0.0)
            for step in instance.get_run_step_stats(run.run_id):
                if step.start_time is not None and step.end_time is not None:
                    key, took = step.step_key, step.end_time - step.start_time
                    steps[key] = steps.get(key, 0.0) + took
        # What the cycle planned (new pages, re-estimates, verify samples, priority) and what
        # its requests were: conditional ones and their 304s.
        wh = Warehouse(home)
        reasons = wh.read("revisit_plan").filter(pl.col("selected")).group_by("reason").len()
        results = wh.read("fetch_results").filter(pl.col("sent"))
        cycles.append(
            {
                "seconds": seconds,
                "cpu": spent,
                **measured,
                "rss_before_mb": rss_before,
                "rss_after_mb": own_rss_mb(),
                "runs": outcome.runs,
                "run_seconds": run_seconds,
                "planned": outcome.planned,
                "reasons": dict(reasons.iter_rows()),
                "fetched": outcome.fetched,
                "outcomes": outcome.outcomes,
                "conditional": int(results["conditional"].sum() or 0),
                "status_304": int((results["http_status"] == 304).sum()),
                "notes": outcome.notes,
                "steps": steps,
                "network_seconds": network.seconds,
                "network_cpu": network.cpu_seconds,
                "nginx_cpu": process_cpu_seconds(args.nginx_pid) - nginx0,
            }
        )
        del reasons, results
        # What the finished run still holds: dg.materialize keeps every step's output in memory
        # (its output capture), and something keeps that alive after run_cycle returns.
        gc.collect()
        frames = [o for o in gc.get_objects() if isinstance(o, pl.DataFrame)]
        cycles[-1]["live_frames"] = len(frames)
        cycles[-1]["live_frames_mb"] = sum(f.estimated_size() for f in frames) / 2**20
        cycles[-1]["rss_after_gc_mb"] = own_rss_mb()
        del frames
        send_progress(
            f"{size:,} URLs, cycle {i + 1}: {seconds:.1f} s, {outcome.fetched:,} fetched, "
            f"peak {peak:,.0f} MB"
        )
    result = {
        "size": size,
        "import_seconds": imported,
        "baseline_rss_mb": baseline_rss,
        "seed": seed,
        "cycles": cycles,
    }
    if args.profile:
        result["profile"] = clock.profile_texts(args.profile_top)
    send_result(result)


def spawn(args: argparse.Namespace, size: int, tmp: Path, port: int, nginx_pid: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    env["FRESHNESS_ALLOW_NETWORKS"] = "127.0.0.0/8"
    child_args = [
        "--child",
        *("--size", str(size), "--home", str(tmp / f"home-{size}"), "--port", str(port)),
        *("--nginx-pid", str(nginx_pid), "--buckets", str(args.buckets)),
        *("--profile-cycle", str(args.profile_cycle), "--profile-top", str(args.profile_top)),
        *(("--profile", *args.profile) if args.profile else ()),
    ]
    # the log keeps dagster's warnings (one per host's missing sitemap)
    return run_child(
        __file__,
        child_args,
        what=f"the {size:,}-URL child",
        env=env,
        stderr_log=tmp / f"child-{size}.log",
    )


# ---- the report ----------------------------------------------------------------------------------


def machine_note(start_load: list[float]) -> str:
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} CPUs ({cpu_model()}), {memory_gib():.0f} GB RAM, shared by nginx (one "
        "worker process), the client and other users' jobs; load average (1 / 5 / 15 min) "
        f"{start_load[0]:.2f} / {start_load[1]:.2f} / {start_load[2]:.2f} at the start, "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} at the end"
    )


def fmt_num(x: float, spec: str) -> str:
    return "" if x != x else format(x, spec)


def phase_of(r: dict, phase: str) -> dict:
    return r["seed"] if phase == "seed" else r["cycles"][int(phase) - 1]


PHASES = (("seed", "seed"), ("1", "cycle 1"), ("2", "cycle 2"))


def main_table(results: list[dict]) -> list[str]:
    lines = [
        "| URLs | phase | wall s | CPU s | peak RSS MB | planned | fetched | fetch req/s "
        "| network req/s | "
        + " | ".join(f"{a} s" for a in ASSETS)
        + " | checks s | run, between steps s | outside the run s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * (len(ASSETS) + 3),
    ]
    for r in results:
        s = r["seed"]
        blanks = " |" * (len(ASSETS) + 3)
        lines.append(
            f"| {r['size']:,} | seed (load_seeds) | {s['seconds']:.1f} | {s['cpu']:.1f} "
            f"| {s['peak_rss_mb']:,.0f} | | | | |{blanks}"
        )
        for i, c in enumerate(r["cycles"]):
            steps = c["steps"]
            fetch_s = steps.get("fetch_results", float("nan"))
            checks = sum(v for k, v in steps.items() if k not in ASSETS)
            between = c["run_seconds"] - sum(steps.values())
            outside = c["seconds"] - c["run_seconds"]
            label = "cycle 1 (cold)" if i == 0 else "cycle 2 (6 h later)"
            lines.append(
                f"| {r['size']:,} | {label} | {c['seconds']:.1f} | {c['cpu']:.1f} "
                f"| {c['peak_rss_mb']:,.0f} | {c['planned']:,} | {c['fetched']:,} "
                f"| {fmt_num(c['fetched'] / fetch_s, ',.0f')} "
                f"| {fmt_num(c['fetched'] / max(c['network_seconds'], 1e-9), ',.0f')} | "
                + " | ".join(f"{steps.get(a, float('nan')):.1f}" for a in ASSETS)
                + f" | {checks:.1f} | {between:.1f} | {outside:.1f} |"
            )
    lines += [
        "",
        "- fetch req/s = fetched / the fetch_results step (validator trust and running totals, the "
        "requests, fingerprints, the results frame, fetch_log and IO manager writes); network "
        "req/s = fetched / the time inside fetch_all_sync.",
        "- Step seconds are Dagster's step stats (STEP_START to STEP_SUCCESS); checks = the "
        "blocking asset checks' steps; between steps = the run's start-to-end (Dagster's run "
        "stats) minus its steps; outside the run = run_cycle's wall minus the run: building the "
        "job and creating the run, the writer lock, reading the plan and results back, views, "
        "fetch_log pruning.",
    ]
    return lines


def outcome_lines(results: list[dict]) -> list[str]:
    lines = ["What each cycle planned and sent:", ""]
    for r in results:
        for i, c in enumerate(r["cycles"]):
            budget = r["size"] // 10
            outcomes = ", ".join(f"{k} {v:,}" for k, v in sorted(c["outcomes"].items()))
            reasons = ", ".join(f"{k} {v:,}" for k, v in sorted(c["reasons"].items()))
            lines.append(
                f"- {r['size']:,} cycle {i + 1}: budget {budget:,}, planned {c['planned']:,} "
                f"({c['planned'] / budget:.0%}: {reasons}), fetched {c['fetched']:,} "
                f"({c['fetched'] / budget:.0%}); outcomes {outcomes}; {c['conditional']:,} "
                f"conditional requests, {c['status_304']:,} answered 304; nginx CPU "
                f"{c['nginx_cpu']:.1f} s; {c['runs']} run(s)"
                + (f"; notes: {'; '.join(c['notes'])}" if c["notes"] else "")
            )
    return lines


def step_table(results: list[dict]) -> list[str]:
    lines = [
        "CPU seconds of each step and its RSS at start -> peak (MB), read at Dagster's step "
        "events; the run's CPU beside the cycle's (the rest is run_cycle outside the run); "
        "polars DataFrames still alive after run_cycle returned and gc.collect(), and the RSS "
        "then:",
        "",
        "| URLs | cycle | "
        + " | ".join(ASSETS)
        + " | fetch_all_sync CPU s | run CPU s | cycle CPU s | RSS at cycle start MB "
        "| frames alive after (MB) | RSS after MB |",
        "|---:|---|" + "---:|" * (len(ASSETS) + 6),
    ]
    for r in results:
        for i, c in enumerate(r["cycles"]):
            cells = [
                f"{c['step_cpu'].get(a, float('nan')):.1f} s, "
                f"{c['step_start_rss_mb'].get(a, float('nan')):,.0f} -> "
                f"{c['step_peak_rss_mb'].get(a, float('nan')):,.0f} MB"
                for a in ASSETS
            ]
            lines.append(
                f"| {r['size']:,} | {i + 1} | "
                + " | ".join(cells)
                + f" | {c['network_cpu']:.1f} | {c['run_cpu']:.1f} | {c['cpu']:.1f} "
                f"| {c['rss_before_mb']:,.0f} | {c['live_frames']} ({c['live_frames_mb']:,.0f}) "
                f"| {c['rss_after_gc_mb']:,.0f} |"
            )
    return lines


def linearity(results: list[dict]) -> list[str]:
    lines = [
        "Per 1,000 URLs at each size, and the ratio of the largest size to the smallest (1 would "
        "be exactly proportional; below 1, fixed costs still weigh at the small size):",
        "",
        "| URLs | phase | wall s / 1k URLs | CPU s / 1k URLs | peak RSS MB / 1k URLs |",
        "|---:|---|---:|---:|---:|",
    ]

    def per_k(r: dict, phase: str) -> tuple[float, float, float]:
        c, k = phase_of(r, phase), r["size"] / 1000
        return c["seconds"] / k, c["cpu"] / k, c["peak_rss_mb"] / k

    for r in results:
        for phase, name in PHASES:
            w, c, m = per_k(r, phase)
            lines.append(f"| {r['size']:,} | {name} | {w:.3f} | {c:.3f} | {m:.2f} |")
    first, last = results[0], results[-1]
    for phase, name in PHASES:
        a, b = per_k(first, phase), per_k(last, phase)
        lines.append(
            f"| **{last['size']:,} / {first['size']:,}** | {name} | **{b[0] / a[0]:.2f}** "
            f"| **{b[1] / a[1]:.2f}** | **{b[2] / a[2]:.2f}** |"
        )
    pairs = list(zip(results, results[1:], strict=False))
    if not pairs:
        return lines

    def slope(lo: dict, hi: dict, phase: str, get) -> float:
        """Cost per 1,000 extra URLs between two sizes: the fixed part cancels, so a slope that
        grows from one interval to the next is a superlinear cost."""
        return (get(phase_of(hi, phase)) - get(phase_of(lo, phase))) / (
            (hi["size"] - lo["size"]) / 1000
        )

    def ratio_cell(values: list[float]) -> str:
        return f"**{values[-1] / values[0]:.2f}**" if len(values) > 1 and values[0] > 0 else ""

    lines += [
        "",
        "Marginal cost: what each extra 1,000 URLs added between consecutive sizes (fixed costs "
        "cancel; a slope that grows with size is superlinear), in ms of CPU per step, and the "
        "ratio of the last interval's slope to the first's:",
        "",
        "| phase | what | "
        + " | ".join(f"{lo['size']:,} -> {hi['size']:,}" for lo, hi in pairs)
        + " | ratio |",
        "|---|---|" + "---:|" * (len(pairs) + 1),
    ]
    getters = [
        ("wall s", lambda c: c["seconds"], ".3f", 1.0),
        ("CPU s", lambda c: c["cpu"], ".3f", 1.0),
        ("peak RSS MB", lambda c: c["peak_rss_mb"], ".2f", 1.0),
    ]
    for phase, name in PHASES:
        for what, get, spec, scale in getters:
            values = [slope(lo, hi, phase, get) * scale for lo, hi in pairs]
            lines.append(
                f"| {name} | {what} | "
                + " | ".join(format(v, spec) for v in values)
                + f" | {ratio_cell(values)} |"
            )
        if phase == "seed":
            continue
        steps = [*ASSETS, "fetch_all_sync"]
        for step in steps:

            def get(c, step=step):
                if step == "fetch_all_sync":
                    return c["network_cpu"]
                return c["step_cpu"].get(step, 0.0)

            values = [slope(lo, hi, phase, get) * 1000 for lo, hi in pairs]
            lines.append(
                f"| {name} | {step} CPU ms | "
                + " | ".join(f"{v:.1f}" for v in values)
                + f" | {ratio_cell(values)} |"
            )
    return lines


def report(args: argparse.Namespace, saved: dict) -> str:
    results, notes = saved["results"], saved["notes"]
    lines = [
        f"{N_HOSTS} hosts ({address(0)}..{address(N_HOSTS - 1)}, one nginx worker, ~5 KB pages "
        f"from {N_TEMPLATES} templates with sub_filter), [partitioning] host_buckets = "
        f"{args.buckets}, budget = URLs / 10 per cycle, cycle 2 is 6 h after cycle 1",
        "",
        *main_table(results),
        "",
        *outcome_lines(results),
        "",
        *step_table(results),
        "",
        *linearity(results),
        "",
        *(f"- {n}" for n in notes),
        "- child's RSS after its imports, before seeding: "
        + ", ".join(f"{r['baseline_rss_mb']:,.0f} MB" for r in results)
        + f"; importing freshness_pipeline.app.runner took {results[0]['import_seconds']:.1f} s",
        f"- machine: {saved['machine']}",
    ]
    for r in results:
        for step, text in r.get("profile", {}).items():
            lines += [
                "",
                f"cProfile of step {step} at {r['size']:,} URLs, cycle {args.profile_cycle}:",
                "",
                "```",
                text.rstrip(),
                "```",
            ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--quick", action="store_true", help="10,000 and 100,000 URLs only")
    parser.add_argument("--buckets", type=int, default=64, help="[partitioning] host_buckets")
    parser.add_argument("--seed", type=int, default=11, help="templates' random text")
    parser.add_argument("--profile", nargs="+", default=None, help="cProfile these steps")
    parser.add_argument("--profile-cycle", type=int, default=1, choices=(1, 2))
    parser.add_argument("--profile-top", type=int, default=30)
    parser.add_argument("--out", default=None, help="also write the report to this file")
    parser.add_argument("--json", default=None, help="also write the raw figures to this file")
    parser.add_argument("--report-from", default=None, help="print the report of a --json file")
    parser.add_argument("--tmp", default=None, help="parent folder of the temporary files")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--nginx-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.report_from:
        saved = json.loads(Path(args.report_from).read_text())
        args.buckets, args.profile = saved["buckets"], saved["profile"]
        args.profile_cycle = saved["profile_cycle"]
        print(report(args, saved))
        return
    if args.quick:
        args.sizes = list(QUICK_SIZES)
    # A SIGTERM becomes SystemExit so the finally blocks stop nginx and remove the temp dirs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load0 = list(os.getloadavg())
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="growth-", dir=args.tmp) as name:
        tmp = Path(name)
        write_site(tmp / "root", args.seed)
        addresses = [address(h) for h in range(N_HOSTS)]
        with running_nginx(SITE, tmp / "nginx", tmp / "root", addresses) as server:
            print(f"nginx on {address(0)}..{address(N_HOSTS - 1)}:{server.port}", flush=True)
            notes = check_site(server.port)
            for note in notes:
                print(f"  {note}", flush=True)
            for size in args.sizes:
                print(f"{size:,} URLs ...", flush=True)
                results.append(spawn(args, size, tmp, server.port, server.pid))
                shutil.rmtree(tmp / f"home-{size}", ignore_errors=True)
    saved = {
        "results": results,
        "notes": notes,
        "machine": machine_note(load0),
        "buckets": args.buckets,
        "profile": args.profile,
        "profile_cycle": args.profile_cycle,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(saved))
    text = report(args, saved)
    publish(text, args.out)


if __name__ == "__main__":
    main()
