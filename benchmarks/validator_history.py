"""Validator trust per cycle: re-reading a month of fetch_log against keeping running totals.

    .venv/bin/python benchmarks/validator_history.py                       # 100, 500, 1,500 hosts
    .venv/bin/python benchmarks/validator_history.py --hosts 100 500 2000  # ~11 min on 2 cores
    .venv/bin/python benchmarks/validator_history.py --hosts 50 200        # under a minute
    .venv/bin/python benchmarks/validator_history.py --out /tmp/vh.md

The fetch stage judges each host's ETag and Last-Modified on the last 30 days of requests. It
used to read them back from fetch_log every cycle, one Parquet file per host per cycle: 120
files a host at four cycles a day, so a cost that grows with hosts times history. It now keeps
per-host running totals (validator_evidence, validator_latest: one file each per host) and
pays instead a small write per cycle. This script puts a number on both sides, on one synthetic
warehouse, so that the trade is judged on figures rather than on file counts alone.

The warehouse is built in a temp folder with the project's own writers (``append_fetch_log``,
``write_partitions``), so the file layout is the real one; nothing touches the network. The
hosts are split between worker processes while it is built, since a file write costs about
2 ms and 1,500 hosts are 180,000 files. Every size is a prefix of the same hosts, so the build
is paid once. Not a unit test.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import multiprocessing
import os
import platform
import random
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import TypeVar

import polars as pl

from freshness_pipeline.warehouse import tables

with warnings.catch_warnings():  # dagster's beta notices on the asset module, once per process
    warnings.simplefilter("ignore")
    from freshness_pipeline.stages.running_totals import (
        VALIDATOR_HISTORY,
        remember_cycle,
        validator_memory,
    )
from freshness_pipeline.science.validators import (
    remember_requests,
    trust_before,
    validator_trust,
)
from freshness_pipeline.warehouse.storage import Warehouse

T = TypeVar("T")

SIZES = (100, 500, 1500)  # 2,000 takes ~11 min on 2 shared cores, most of it writing fetch_log
CYCLE = timedelta(hours=6)
CYCLES = int(VALIDATOR_HISTORY / CYCLE)  # 120: every stored cycle is inside the window
URLS_PER_HOST = 5
START = datetime(2026, 1, 5, tzinfo=UTC)
NOW = START + CYCLES * CYCLE  # the measured cycle; its own rows are the write side's input
REPEATS = 3
MEMORY_TABLES = ("validator_evidence", "validator_latest")

# How servers treat validators, with weights: mostly well-behaved, with each failure mode the
# trust rules look for present, so that the verdicts compared are not all "trusted".
SERVER_KINDS = {
    "good": 0.5,  # ETag from the content, Last-Modified = last change, both honoured
    "lm_only": 0.15,  # no ETag, honest Last-Modified
    "stuck_lm": 0.1,  # template date as Last-Modified, honoured: 304s hide changes
    "volatile_etag": 0.1,  # ETag with a timestamp in it, never matches
    "ignores": 0.05,  # sends validators, always answers 200
    "none": 0.1,  # no validators at all
}
STUCK_DATE = "Mon, 01 Jan 2024 00:00:00 GMT"
VERIFY_SHARE = 0.1  # the plan's unconditional verification sample
ERROR_SHARE = 0.01


def host_name(index: int) -> str:
    return f"h{index:05d}.example.org"


# ---- the synthetic crawl ---------------------------------------------------------------------


@dataclass
class Page:
    """One URL as both sides see it: the server's content and the crawler's last answer."""

    url: str
    change_p: float
    version: int = 0
    changed_at: datetime = START - timedelta(days=90)
    known_fp: str | None = None
    known_etag: str | None = None
    known_lm: str | None = None


def fingerprint(url: str, version: int) -> str:
    return hashlib.blake2b(f"{url}#{version}".encode(), digest_size=8).hexdigest()


def server_validators(kind: str, page: Page, fp: str, at: datetime) -> tuple[str | None, ...]:
    """What the server would send with a body now; the kind decides which lie it tells."""
    honest_lm = format_datetime(page.changed_at, usegmt=True)
    etag = {
        "good": f'W/"{fp[:12]}"',
        "ignores": f'"{fp[:12]}"',
        "volatile_etag": f'"{fp[:8]}-{int(at.timestamp())}"',
    }.get(kind)
    lm = {"stuck_lm": STUCK_DATE, "none": None}.get(kind, honest_lm)
    return etag, lm


def answers_304(
    kind: str, validator: str | None, page: Page, etag: str | None, lm: str | None
) -> bool:
    if validator is None or kind == "ignores":
        return False
    if validator == "etag":
        return etag is not None and etag == page.known_etag
    return lm is not None and lm == page.known_lm


def request_row(kind: str, page: Page, at: datetime, rng: random.Random) -> dict:
    """One request of one cycle, as fetch_log stores it, and the crawler's memory moved on."""
    if rng.random() < page.change_p:
        page.version += 1
        page.changed_at = at - timedelta(minutes=rng.randint(1, 359))
    verify = rng.random() < VERIFY_SHARE
    conditional = not verify and (page.known_etag or page.known_lm) is not None
    validator = ("etag" if page.known_etag else "last_modified") if conditional else None
    row = {
        "url": page.url,
        "fetched_at": at,
        "conditional": conditional,
        "validator": validator,
        "fingerprint_version": 1,
        "plan_reason": "verify" if verify else "due",
        "expected_change": page.change_p,
        "duration_ms": rng.uniform(20, 400),
    }
    if rng.random() < ERROR_SHARE:
        return row | {"outcome": "error", "error": "timeout", "bytes": 0}
    fp = fingerprint(page.url, page.version)
    etag, lm = server_validators(kind, page, fp, at)
    if answers_304(kind, validator, page, etag, lm):
        etag, lm, fp = etag or page.known_etag, lm or page.known_lm, page.known_fp
        row |= {"http_status": 304, "outcome": "not_modified", "bytes": 0}
    else:
        outcome = "new" if page.known_fp is None else "unchanged"
        if page.known_fp is not None and fp != page.known_fp:
            outcome = "changed"
        row |= {"http_status": 200, "outcome": outcome, "bytes": rng.randint(4_000, 60_000)}
    page.known_fp, page.known_etag, page.known_lm = fp, etag, lm
    return row | {"fingerprint": fp, "etag": etag, "last_modified": lm}


def crawl_host(index: int, seed: int) -> pl.DataFrame:
    """A host's 120 cycles of history plus the measured cycle, as fetch_log rows."""
    rng = random.Random(f"{seed}:{index}")
    host = host_name(index)
    kind = rng.choices(list(SERVER_KINDS), weights=list(SERVER_KINDS.values()))[0]
    pages = [
        Page(f"https://{host}/p/{n}", rng.choice((0.01, 0.05, 0.2, 0.6)))
        for n in range(URLS_PER_HOST)
    ]
    rows = [
        request_row(kind, page, START + c * CYCLE, rng) for c in range(CYCLES + 1) for page in pages
    ]
    frame = pl.DataFrame(rows, infer_schema_length=None).with_columns(host=pl.lit(host))
    return tables.conform("fetch_log", frame)


def build_hosts(home: str, indices: Sequence[int], seed: int) -> pl.DataFrame:
    """Worker: write these hosts' fetch_log files, one per cycle, and hand their rows back for
    the running totals (which need every host's rows cycle by cycle)."""
    wh = Warehouse(home)
    frames = []
    for index in indices:
        frame = crawl_host(index, seed)
        for (at,), part in (
            frame.filter(pl.col("fetched_at") < NOW)
            .partition_by("fetched_at", as_dict=True)
            .items()
        ):
            wh.append_fetch_log(host_name(index), at, part)
        frames.append(frame)
    return pl.concat(frames)


def build_fetch_log(home: Path, n_hosts: int, seed: int, jobs: int) -> pl.DataFrame:
    chunks = [list(range(n_hosts))[j::jobs] for j in range(jobs)]
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=spawn) as pool:
        parts = pool.map(build_hosts, [str(home)] * jobs, chunks, [seed] * jobs)
        return pl.concat(list(parts)).sort(["host", "fetched_at", "url"])


def build_memory(wh: Warehouse, rows: pl.DataFrame, hosts: list[str]) -> None:
    """The running totals as the fetch stage leaves them after the 120 cycles: remember_requests
    once a cycle, in memory, and written once at the end (the files of the last cycle)."""
    evidence, latest = tables.empty("validator_evidence"), tables.empty("validator_latest")
    history = rows.filter(pl.col("fetched_at") < NOW)
    for c in range(CYCLES):
        at = START + c * CYCLE
        sent = history.filter(pl.col("fetched_at") == at)
        evidence, latest = remember_requests(evidence, latest, sent, at, VALIDATOR_HISTORY)
    wh.write_partitions("validator_latest", hosts, latest)
    wh.write_partitions("validator_evidence", hosts, evidence)


# ---- the two ways ----------------------------------------------------------------------------


def old_way(wh: Warehouse, hosts: list[str]) -> pl.DataFrame:
    return validator_trust(wh.read_fetch_log(hosts, NOW - VALIDATOR_HISTORY))


def new_read(wh: Warehouse, hosts: list[str]) -> pl.DataFrame:
    evidence, _ = validator_memory(wh, hosts, NOW)
    return trust_before(evidence, NOW, VALIDATOR_HISTORY)


def new_write(
    wh: Warehouse, hosts: list[str], memory: tuple[pl.DataFrame, pl.DataFrame], sent: pl.DataFrame
) -> None:
    """What the fetch stage adds after its requests (``running_totals.remember_cycle``, with
    the fetch_totals it keeps beside the validator evidence); repeatable, since a
    re-run of cycle NOW replaces that cycle's counts. Every host sent requests this cycle, so
    every host's three files are written."""
    classes = sent.select("url", pl.lit("page").alias("url_class"))
    remember_cycle(wh, hosts, NOW, memory, sent, classes)


def best_of(fn: Callable[[], T], repeats: int = REPEATS) -> tuple[float, T]:
    """Best of ``repeats`` after one untimed call, and that call's answer: the first call is the
    one that pays for the OS file cache, and both ways should be compared warm (or both cold,
    which we cannot). The answer is what the verdicts are checked on, so the slow way is not run
    a fifth time for the check."""
    answer = fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), answer


def files_of(wh: Warehouse, table: str, hosts: list[str]) -> tuple[int, float]:
    """(files, MB) the way reads: every fetch_log file here is inside the 30-day window."""
    paths = [p for h in hosts for p in wh.partition_dir(table, h).glob("*.parquet")]
    return len(paths), sum(p.stat().st_size for p in paths) / 1e6


@dataclass
class Row:
    hosts: int
    old_files: int
    old_mb: float
    old_s: float
    new_files: int
    new_mb: float
    read_s: float
    write_s: float
    distrusted: tuple[int, int]  # hosts whose ETag / Last-Modified is not trusted


def measure_reads(wh: Warehouse, hosts: list[str]) -> Row:
    old_s, old = best_of(lambda: old_way(wh, hosts))
    read_s, new = best_of(lambda: new_read(wh, hosts))
    assert old.height == len(hosts), (old.height, len(hosts))
    assert old.equals(new), "the running totals and the fetch_log disagree on the verdicts"
    old_files, old_mb = files_of(wh, "fetch_log", hosts)
    memory = [files_of(wh, t, hosts) for t in MEMORY_TABLES]
    return Row(
        hosts=len(hosts),
        old_files=old_files,
        old_mb=old_mb,
        old_s=old_s,
        new_files=sum(n for n, _ in memory),
        new_mb=sum(mb for _, mb in memory),
        read_s=read_s,
        write_s=float("nan"),
        distrusted=(
            old.filter(~pl.col("etag_trusted")).height,
            old.filter(~pl.col("last_modified_trusted")).height,
        ),
    )


def measure_write(wh: Warehouse, hosts: list[str], rows: pl.DataFrame) -> float:
    memory = validator_memory(wh, hosts, NOW)
    sent = rows.filter((pl.col("fetched_at") == NOW) & pl.col("host").is_in(hosts))
    return best_of(lambda: new_write(wh, hosts, memory, sent))[0]


# ---- report ----------------------------------------------------------------------------------


def machine_facts(started: datetime) -> list[str]:
    return [
        f"- date: {started:%Y-%m-%d %H:%M} UTC (start of the run)",
        f"- machine: {os.cpu_count()} cores ({platform.machine()}), {platform.system()}",
        f"- Python {platform.python_version()}, polars {pl.__version__}",
    ]


def table(rows: list[Row]) -> list[str]:
    head = (
        "| hosts | old: fetch_log files | old: MB | old: read + judge s "
        "| new: files | new: MB | new: read + judge s | new: write s "
        "| old / new read | old / (new read + write) |"
    )
    lines = [head, "|" + "---:|" * 10]
    for r in rows:
        lines.append(
            f"| {r.hosts:,} | {r.old_files:,} | {r.old_mb:.1f} | {r.old_s:.3f} "
            f"| {r.new_files:,} | {r.new_mb:.2f} | {r.read_s:.3f} | {r.write_s:.3f} "
            f"| {r.old_s / r.read_s:.1f}× | {r.old_s / (r.read_s + r.write_s):.1f}× |"
        )
    return lines


DOC_HEAD = f"""# Validator trust: a month of fetch_log against running totals

Generated by `benchmarks/validator_history.py`. Each cycle the fetch stage decides, per host,
whether to send ETags and Last-Modified dates (`science.validators`), on the last 30 days of
requests. Two ways to get there, timed on one warehouse:

- **old**: `validator_trust(wh.read_fetch_log(hosts, now - VALIDATOR_HISTORY))`. Reads every
  host's fetch_log files of the window (one per host per cycle) and recomputes the evidence.
- **new, read side**: `validator_memory(wh, hosts, now)`, then `trust_before(evidence, now,
  VALIDATOR_HISTORY)`. Reads two small files per host (validator_evidence, validator_latest)
  and sums counts.
- **new, write side**: what the new way adds after the fetch: `running_totals.remember_cycle`
  for the cycle's sent rows, which writes validator_evidence, validator_latest and the
  fetch_totals kept beside them, three files per host (every host here sent requests
  this cycle; a host without any keeps its files).
  The old way had no such step. Appending to fetch_log is the same in both ways, so it is not
  timed.

The script asserts that both ways give equal verdict frames (`DataFrame.equals`: counts,
verdicts and reasons) at every size.

## How the warehouse is built

- Everything is in a temp folder, with no network.
- Each host has {URLS_PER_HOST} URLs, fetched every cycle for {CYCLES} cycles of 6 h
  (30 days). Every stored cycle is inside the window.
- A server kind is drawn per host: honest ETag and Last-Modified, Last-Modified only, stuck
  Last-Modified, volatile ETag, validators ignored, or no validators. Each URL changes with a
  per-cycle probability of 0.01, 0.05, 0.2 or 0.6.
- The crawler sends If-None-Match when it knows an ETag, else If-Modified-Since. It sends
  neither on a {VERIFY_SHARE:.0%} verification sample. {ERROR_SHARE:.0%} of requests time out.
- The rows are therefore a mix of 200s (new, changed, unchanged, with fingerprints), 304s and
  errors, with `etag`, `last_modified` and `validator` set as the fetch stage sets them.
- The fetch_log files are written with `Warehouse.append_fetch_log`, one per host per cycle.
- The running totals come from `remember_requests` called once per cycle, then
  `write_partitions`, as the fetch stage leaves them.
- The sizes are prefixes of one warehouse, so the build is paid once.

## How it is timed

- Each figure is wall-clock seconds, the best of {REPEATS} runs.
- Each way first runs once untimed. That run loads the OS file cache, so both ways are compared
  warm. A cold read, such as the first cycle after a reboot, would cost the old way more, since
  it opens {CYCLES // len(MEMORY_TABLES)} times as many files. That case is not measured.
- "files" and "MB" are the Parquet files each way opens and their size on disk. The new way
  also checks that each host's evidence file exists, which is one `stat` per host.
- The write side is timed after all the reads, so the reads see the files as the 120 cycles
  left them.

**Caveat**: this is one run on a shared 2-core machine, so treat the seconds as rough. The file
counts are exact, and the ratios are more stable than the seconds.
"""


def verdict_note(row: Row) -> str:
    """The check means little if every host is trusted, so say how many are not."""
    etag, lm = row.distrusted
    return (
        f"Verdicts at {row.hosts:,} hosts, the same both ways: hosts with the ETag distrusted "
        f"{etag:,}, with Last-Modified distrusted {lm:,}."
    )


def report(rows: list[Row], started: datetime, build_s: float, total_s: float, command: str) -> str:
    lines = [
        DOC_HEAD,
        "## Result",
        "",
        *machine_facts(started),
        f"- command: `{command}`",
        f"- building the warehouse (fetch_log, then the running totals): {build_s:.0f} s; "
        f"whole run: {total_s:.0f} s",
        "",
        *table(rows),
        "",
        verdict_note(rows[-1]),
        "",
    ]
    return "\n".join(lines)


# ---- main ------------------------------------------------------------------------------------


def run(sizes: list[int], seed: int, jobs: int, tmp: str | None) -> tuple[list[Row], float]:
    with tempfile.TemporaryDirectory(prefix="validator-history-", dir=tmp) as home:
        wh = Warehouse(home)
        hosts = [host_name(i) for i in range(max(sizes))]
        start = time.perf_counter()
        rows = build_fetch_log(Path(home), len(hosts), seed, jobs)
        build_memory(wh, rows, hosts)
        build_s = time.perf_counter() - start
        print(f"built {len(hosts):,} hosts x {CYCLES} cycles in {build_s:.0f} s", flush=True)
        results = []
        for n in sizes:
            results.append(measure_reads(wh, hosts[:n]))
            print(f"  {n:,} hosts: reads timed, verdicts equal", flush=True)
        for result in results:
            result.write_s = measure_write(wh, hosts[: result.hosts], rows)
            print(f"  {result.hosts:,} hosts: write timed", flush=True)
        return results, build_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="build processes")
    parser.add_argument("--tmp", default=None, help="parent folder of the temp warehouse")
    parser.add_argument("--out", default="docs/validator_history.md", help="'' to skip")
    args = parser.parse_args()
    sizes = sorted(set(args.hosts))
    started = time.perf_counter()
    started_at = datetime.now(UTC)
    print("\n".join(machine_facts(started_at)), flush=True)
    rows, build_s = run(sizes, args.seed, max(1, args.jobs), args.tmp)
    command = " ".join([".venv/bin/python", "benchmarks/validator_history.py", *sys.argv[1:]])
    text = report(rows, started_at, build_s, time.perf_counter() - started, command)
    print("\n" + "\n".join(table(rows)) + "\n\n" + verdict_note(rows[-1]))
    if args.out:
        Path(args.out).write_text(text)
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
