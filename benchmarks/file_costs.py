"""What one host's file costs: the storage layout's share of a cycle at ten thousand hosts.

    .venv/bin/python benchmarks/file_costs.py              # 10,000 hosts x 100 rows, ~2 min
    .venv/bin/python benchmarks/file_costs.py --quick      # 1,000 hosts
    .venv/bin/python benchmarks/file_costs.py --out docs/file_costs.md

The warehouse keeps one Parquet file per host and table (the storage contract: DuckDB views,
per-host backfills and atomic replaces rest on it), so a cycle at 10,000 hosts writes and reads
tens of thousands of small files, and what a small file costs, whatever is in it, sets a
floor under every step. This measures that cost in one run, on the same rows laid out as the
warehouse lays them (``Warehouse.write_partitions`` and ``Warehouse.read``, as the steps call
them) and as the alternatives a reader might think of:

- **warehouse**: the table written host by host (first into empty folders, then replacing
  every file with the next cycle's rows, then the same rows once more, which leaves every
  file in place: ``warehouse/host_parts.py``) and read back for all hosts from its files, the
  way a step reads a table another step or cycle wrote; and read right after its write, which
  the warehouse answers from the frame it wrote (``warehouse/last_write.py``);
- **one file**: the same rows as one Parquet file, written and read once (what the contract
  rules out; the floor of the bytes and the encoder's work per row);
- **Parquet to memory**: every host's rows encoded to an in-memory buffer, no file at all (the
  encoder's fixed cost per file);
- **one streaming pass**: polars' own multi-file sink (``sink_parquet`` with ``PartitionBy``),
  every host's file in one engine run (an unstable polars API; each file a temp name, as an
  atomic replace would need);
- **bare files**: the same number of files of the same size written with ``os.write`` and
  renamed into place (the file system's share).

Two tables: ``url_inventory`` (flat columns) and ``url_state`` (three list columns of ten
observations each, the heaviest table a cycle reads). Each figure is the median of
``--rounds``; CPU is user + system of this process, all threads (the warehouse writes over a
thread pool, polars reads over its own). Not a unit test.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cpu_model, own_cpu_seconds, publish  # noqa: E402 - benchmarks/, beside this script

from freshness_pipeline.warehouse import tables  # noqa: E402
from freshness_pipeline.warehouse.host_parts import split_by  # noqa: E402
from freshness_pipeline.warehouse.last_write import LAST_WRITE  # noqa: E402
from freshness_pipeline.warehouse.storage import Warehouse, wait_for_freed_files  # noqa: E402

NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)
OBSERVATIONS = 10


def pages(hosts: list[str], rows: int) -> dict[str, list[str]]:
    """``rows`` URLs on each host, the hosts interleaved (as a crawl's rows arrive)."""
    host = [hosts[i % len(hosts)] for i in range(len(hosts) * rows)]
    return {"url": [f"http://{h}/section/page-{i}.html" for i, h in enumerate(host)], "host": host}


def inventory_rows(hosts: list[str], rows: int) -> pl.DataFrame:
    n = len(hosts) * rows
    return tables.conform(
        "url_inventory",
        pl.DataFrame(
            {
                **pages(hosts, rows),
                "source": "seed",
                "value": [1.0 + (i % 7) for i in range(n)],
                "first_seen_at": NOW - timedelta(days=30),
                "last_seen_at": NOW,
            }
        ),
    ).sort("host")


def state_rows(hosts: list[str], rows: int) -> pl.DataFrame:
    n = len(hosts) * rows
    return tables.conform(
        "url_state",
        pl.DataFrame(
            {
                **pages(hosts, rows),
                "status": "active",
                "value": 1.0,
                "last_fetched_at": NOW,
                "last_seen_at": NOW,
                "change_rate": [0.01 * (1 + i % 300) for i in range(n)],
                "fingerprint": [f"{i:016x}" for i in range(n)],
                "etag": [f'"{i:x}-1388"' for i in range(n)],
                "n_fetches": OBSERVATIONS + 1,
                "n_obs": OBSERVATIONS,
                "obs_interval_days": [[0.25 * (1 + (i + k) % 8) for k in range(OBSERVATIONS)]
                                      for i in range(n)],
                "obs_changed": [[(i + k) % 3 == 0 for k in range(OBSERVATIONS)] for i in range(n)],
                "obs_age_days": [[None] * OBSERVATIONS for _ in range(n)],
            },
            schema_overrides={"obs_age_days": pl.List(pl.Float64)},
        ),
    ).sort("host")  # fmt: skip


def measured(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of ``fn()``."""
    wall, cpu = time.perf_counter(), own_cpu_seconds()
    fn()
    return time.perf_counter() - wall, own_cpu_seconds() - cpu


def one_round(
    table: str, frame: pl.DataFrame, parts: dict, hosts: list[str], work: Path
) -> tuple[dict[str, tuple[float, float]], list[int]]:
    """Every way's (wall, CPU) seconds once, and the sizes of the warehouse's files."""
    figures: dict[str, tuple[float, float]] = {}
    wh = Warehouse(work / "home")
    figures["warehouse write"] = measured(lambda: wh.write_partitions(table, hosts, frame))
    wait_for_freed_files()
    # the next cycle's rows (each seen 6 hours later) replace every file, as a cycle does
    later = frame.with_columns(pl.col("last_seen_at") + timedelta(hours=6))
    figures["warehouse replace"] = measured(lambda: wh.write_partitions(table, hosts, later))
    wait_for_freed_files()
    # the same rows again: every file's footer says it holds them, and none is written
    figures["warehouse, rows unchanged"] = measured(
        lambda: wh.write_partitions(table, hosts, later)
    )
    # right after the write, the warehouse answers from the frame it wrote (last_write.py);
    # a read in another step or process opens the files
    figures["warehouse read, right after"] = measured(lambda: wh.read(table, hosts))
    LAST_WRITE.forget(str(wh.root), {table})
    figures["warehouse read"] = measured(lambda: wh.read(table, hosts))
    sizes = [os.stat(path).st_size for path in wh.files(table, hosts)]

    single = work / "one.parquet"
    figures["one file write"] = measured(lambda: frame.write_parquet(single, compression="zstd"))
    figures["one file read"] = measured(lambda: pl.read_parquet(single))

    def to_memory() -> None:
        for part in parts.values():
            part.write_parquet(io.BytesIO(), compression="zstd", statistics=True)

    figures["Parquet to memory"] = measured(to_memory)

    sink = work / "sink"

    def path_of(args: pl.io.partition.FileProviderArgs) -> str:
        folder = sink / f"host={args.partition_keys['host'][0]}"
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder / f"data.parquet.tmp-{uuid.uuid4().hex}")

    figures["one streaming pass"] = measured(
        lambda: frame.lazy().sink_parquet(
            pl.PartitionBy(sink, key="host", include_key=True, file_path_provider=path_of),
            compression="zstd",
            statistics=True,
            mkdir=True,
        )
    )

    folders = [work / "bare" / f"host={i}" for i in range(len(hosts))]
    for folder in folders:
        folder.mkdir(parents=True)
    payload = os.urandom(int(statistics.mean(sizes)))

    def bare_files() -> None:
        for folder in folders:
            temp = folder / f"data.parquet.tmp-{uuid.uuid4().hex}"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, payload)
            finally:
                os.close(fd)
            os.replace(temp, folder / "data.parquet")

    figures["bare files"] = measured(bare_files)
    return figures, sizes


def one_table(table: str, frame: pl.DataFrame, hosts: list[str], work: Path, rounds: int) -> dict:
    """Every way's median (wall, CPU) seconds over ``rounds`` for one table's rows."""
    parts = split_by(frame, "host")
    runs: list[dict[str, tuple[float, float]]] = []
    sizes: list[int] = []
    for r in range(rounds):
        folder = work / f"{table}-{r}"
        figures, sizes = one_round(table, frame, parts, hosts, folder)
        runs.append(figures)
        shutil.rmtree(folder, ignore_errors=True)
    med = {
        name: (
            statistics.median(run[name][0] for run in runs),
            statistics.median(run[name][1] for run in runs),
        )
        for name in runs[0]
    }
    return {"figures": med, "file_kb": statistics.mean(sizes) / 1024}


def report(args: argparse.Namespace, found: dict[str, dict], rows_by_table: dict[str, int]) -> str:
    n = args.hosts
    lines = [
        "# What one host's file costs",
        "",
        "Generated by `.venv/bin/python benchmarks/file_costs.py"
        + (" --quick" if args.quick else "")
        + "`; do not edit by hand.",
        "",
        f"{n:,} hosts x {args.rows} rows per table, median of {args.rounds} rounds, "
        f"{cpu_model()}, {os.cpu_count()} CPUs, load average "
        f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())} at the end. Per file: the way's "
        f"seconds divided by {n:,} (the one-file ways too, so that they compare).",
        "",
    ]
    for table, res in found.items():
        figures = res["figures"]
        lines += [
            f"## {table} ({rows_by_table[table]:,} rows, {res['file_kb']:.1f} KB per host file)",
            "",
            "| way | wall s | CPU s | wall ms per host | CPU ms per host |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, (wall, cpu) in figures.items():
            lines.append(
                f"| {name} | {wall:.2f} | {cpu:.2f} | {wall / n * 1e3:.3f} | {cpu / n * 1e3:.3f} |"
            )
        write, read = figures["warehouse replace"], figures["warehouse read"]
        one_w, one_r = figures["one file write"], figures["one file read"]
        lines += [
            "",
            f"- a replace of every host's file: {write[0] / max(one_w[0], 1e-9):.1f}x the wall "
            f"time of writing the rows as one file; a read of every host: "
            f"{read[0] / max(one_r[0], 1e-9):.1f}x reading one file.",
            f"- the encoder alone (Parquet to memory) is {figures['Parquet to memory'][1] / max(write[1], 1e-9):.0%} "
            f"of the replace's CPU; the file system alone (bare files) "
            f"{figures['bare files'][1] / max(write[1], 1e-9):.0%}.",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=None, help="10,000 (quick: 1,000)")
    parser.add_argument("--rows", type=int, default=100, help="rows per host and table")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tmp", default=None, help="parent folder of the temporary files")
    parser.add_argument("--out", default=None, help="also write the report to this file")
    args = parser.parse_args()
    if args.hosts is None:
        args.hosts = 1_000 if args.quick else 10_000
    hosts = [f"host-{i:05d}.example" for i in range(args.hosts)]
    found: dict[str, dict] = {}
    rows_by_table: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="file-costs-", dir=args.tmp) as tmp:
        for table, make in (("url_inventory", inventory_rows), ("url_state", state_rows)):
            frame = make(hosts, args.rows)
            rows_by_table[table] = frame.height
            print(f"{table}: {frame.height:,} rows on {len(hosts):,} hosts ...", flush=True)
            found[table] = one_table(table, frame, hosts, Path(tmp), args.rounds)
            del frame
    text = report(args, found, rows_by_table)
    publish(text, args.out)


if __name__ == "__main__":
    main()
