"""The crawled copy's cost: what the WARC archive holds per 1,000 fetches, with revisit records
against archiving every response in full, and `freshness export` of 10k to 1M versions.

    .venv/bin/python benchmarks/crawled_copy.py              # demo web 24 cycles, nginx 3,000 pages x 6, export 10k/100k/1M
    .venv/bin/python benchmarks/crawled_copy.py --quick      # demo web 8 cycles, nginx 1,000 x 4, export 10k/100k
    .venv/bin/python benchmarks/crawled_copy.py --only export --sizes 10000 1000000

A full run writes docs/crawled_copy.md (``--out`` elsewhere, ``--out ''`` nowhere); ``--json``
saves the figures. Every figure in that file is printed by this script. Not a unit test; the
only traffic is to loopback addresses.

**Space.** Real cycles of the product (runner.run_cycle, the graph the CLI and the schedule run)
over two webs on loopback:

- the demo's synthetic web (freshness_pipeline.synthweb, ``build_world(0)``: five sites with
  honest validators, Last-Modified only, none, volatile boilerplate and a Crawl-delay), at the
  demo's budget of 10 % of the pages per six-hour cycle;
- nginx serving static HTML files (~5 KB of varied words each) on ten loopback addresses, every
  page fetched every cycle, 10 % of the files rewritten (new words, new mtime) between cycles:
  nginx's own ETag and Last-Modified, so an unchanged page is a 304.

The archive is read back record by record. "With revisits" is the archive as the product writes
it (a 304, or a 200 whose payload digest equals the page's last original, is a revisit record:
headers, no body). "In full" is the same archive with each revisit record replaced by the full
response record an archiver without deduplication would have written: the original's payload
under the response's headers (a 304's are the original's, it said they still hold), dated and
targeted as the revisit, serialized with warcio's WARCWriter (gzip per record). The product's
writer is not changed for this; as a control, the stored response records re-serialized the same
way are compared with their stored size. Fetches are the archive's request records (pages,
robots.txt, sitemaps and feeds alike); the page fetches are also given apart.

**Export.** Homes of 10k, 100k and 1M page_versions rows written through the warehouse's own
writer (storage.Warehouse.write_partitions: one file per host and cycle) over 1,000 hosts and 8
six-hour cycles, so that only the rows per file grow with the size: two versions per URL (new,
then changed, ~1 KB of text each) and 1 % of the URLs gone in the window. Each export is the
CLI in a fresh process, ``freshness export --since <first cycle> --format F --out FILE``; wall
seconds, CPU seconds (user + system, from ``wait4``) and peak RSS (the child's VmHWM, sampled
every 10 ms; not ``ru_maxrss``, which Linux starts at the parent's RSS at fork). The homes are
built in a child of their own, so the parent stays small. The "startup" row is the same command
on a window with no rows: the interpreter, the imports and the file listing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from io import BytesIO
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402 (benchmarks/, beside this script)
    run_child,
    run_measured,
    send_result,
    status_kb,
)
from loopback_nginx import NginxSite, running_nginx  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "crawled_copy.md"
CYCLE = timedelta(hours=6)
START = datetime(2025, 1, 6, tzinfo=UTC)

NGINX_HOSTS = 10
NGINX_FIRST = 41  # 127.0.0.41 ...
NGINX_CHANGE_SHARE = 0.10
FILE_MTIME = 1_767_225_600  # 2026-01-01T00:00:00Z, moved an hour per rewrite

EXPORT_HOSTS = 1000
EXPORT_CYCLES = 8
EXPORT_GONE_SHARE = 0.01
EXPORT_FORMATS = ("jsonl", "parquet", "csv")

_PROSE = (
    "freshness crawler page change rate revisit schedule budget host server cache validator "
    "etag modified content fingerprint extract title article main header footer table river "
    "mountain garden window market street coffee letter winter summer yellow orange purple "
    "quiet rapid gentle bright hidden simple modern ancient narrow distant honest curious "
    "report update notice review answer record sample signal metric figure result session"
)
_WORDS = _PROSE.split()


# ---- space: what the archive holds ------------------------------------------------------------


def _full_response_size(revisit: Any, original: Any) -> int:
    """The gzip member of the response record an archiver without revisits would have written
    for ``revisit``: ``original``'s payload under the response's own headers (for a 304, the
    original's: the server said they still hold), serialized by warcio."""
    from warcio.statusandheaders import StatusAndHeaders  # type: ignore[import-untyped]
    from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]

    head = original if revisit.http_status == 304 or not revisit.http_headers else revisit
    http = StatusAndHeaders(
        f"{head.http_status} {head.http_reason or ''}".strip(),
        list(head.http_headers),
        protocol="HTTP/1.1",
    )
    kept = {"WARC-Target-URI", "WARC-Date", "WARC-Record-ID", "WARC-IP-Address", "WARC-Warcinfo-ID"}
    warc_headers = {k: v for k, v in revisit.warc_headers if k in kept}
    warc_headers.update({k: v for k, v in revisit.warc_headers if k.startswith("WARC-Freshness")})
    buffer = BytesIO()
    writer = WARCWriter(buffer, gzip=True)
    record = writer.create_warc_record(
        revisit.target_uri,
        "response",
        payload=BytesIO(original.payload),
        http_headers=http,
        warc_headers_dict=warc_headers,
    )
    writer.write_record(record)
    return len(buffer.getvalue())


def archive_figures(home: Path) -> dict[str, Any]:
    """Bytes and records of a home's archive, as written and as it would be in full."""
    from freshness_pipeline.warehouse.archive import (
        FETCH_KIND_FIELD,
        ArchiveReader,
        archive_dir_for,
        index_name_for,
        iter_records,
        list_warcs,
    )

    archive = archive_dir_for(home)
    reader = ArchiveReader(archive)
    stored: Counter[str] = Counter()
    records: Counter[str] = Counter()
    requests: Counter[str] = Counter()
    profiles: Counter[str] = Counter()
    full_revisits = 0
    control_stored = control_warcio = 0
    index_bytes = 0
    warc_bytes = 0
    for name in list_warcs(archive):
        warc_bytes += (archive / name).stat().st_size
        index = archive / index_name_for(name)
        index_bytes += index.stat().st_size if index.exists() else 0
        for record in iter_records(archive / name):
            stored[record.record_type] += record.length
            records[record.record_type] += 1
            if record.record_type == "request":
                requests[record.header(FETCH_KIND_FIELD) or "page"] += 1
            elif record.record_type == "revisit":
                profiles[(record.header("WARC-Profile") or "").rsplit("/", 1)[-1]] += 1
                full_revisits += _full_response_size(record, reader.find_original(record))
            elif record.record_type == "response" and records["response"] % 10 == 1:
                # the control: warcio's serialization of a response the product stored
                control_stored += record.length
                control_warcio += _full_response_size(record, record)
    with_revisits = sum(stored.values())
    in_full = with_revisits - stored["revisit"] + full_revisits
    tables = 0
    for table in ("page_versions", "changes"):
        folder = home / "warehouse" / table
        tables += sum(p.stat().st_size for p in folder.glob("host=*/cycle-*.parquet"))
    return {
        "fetches": sum(requests.values()),
        "page_fetches": requests["page"],
        "requests_by_kind": dict(requests),
        "records": dict(records),
        "revisit_profiles": dict(profiles),
        "stored_bytes_by_type": dict(stored),
        "warc_bytes": warc_bytes,
        "index_bytes": index_bytes,
        "with_revisits": with_revisits,
        "in_full": in_full,
        "revisit_bytes": stored["revisit"],
        "revisits_in_full": full_revisits,
        "control_stored": control_stored,
        "control_warcio": control_warcio,
        "history_table_bytes": tables,
    }


def _environment() -> None:
    os.environ["FRESHNESS_ALLOW_NETWORKS"] = "127.0.0.0/8"
    os.environ.pop("DAGSTER_HOME", None)
    os.environ.pop("FRESHNESS_HOME", None)


def space_demo(work: Path, cycles: int) -> dict[str, Any]:
    """The demo's web and budget, ``cycles`` six-hour cycles."""
    from freshness_pipeline.app.runner import load_seeds, open_instance, run_cycle
    from freshness_pipeline.synthweb import SyntheticWeb, build_world

    _environment()
    home = work / "demo-home"
    world = build_world(0, start=START, horizon_days=cycles * CYCLE / timedelta(days=1) + 1)
    instance = open_instance(home)
    started = time.perf_counter()
    with SyntheticWeb(world) as web:
        web.set_now(START)
        truth = web.truth()
        seeds = web.seeds_csv(work / "demo-seeds.csv", at=START)
        load_seeds(home, seeds.read_bytes(), added_at=START)
        crawlable = [u for u in truth.urls() if not truth.disallowed(u)]
        budget = max(1, round(0.1 * len(crawlable)))
        for k in range(cycles):
            now = START + k * CYCLE
            web.set_now(now)
            run_cycle(home, now, budget=budget, instance=instance)
            print(f"  demo cycle {k + 1}/{cycles}", flush=True)
    figures = archive_figures(home)
    figures |= {
        "web": "demo (synthweb)",
        "pages": len(crawlable),
        "sites": len(web.base_urls),
        "cycles": cycles,
        "budget": budget,
        "wall_s": time.perf_counter() - started,
    }
    return figures


# Each address serves its own folder, so the hosts' pages and robots.txt are files apart.
SITE = NginxSite(
    server="""root "{root}/$server_addr";""",
    http_options="keepalive_requests 100000;",
    worker_connections=1024,
    files_limit=None,
)


def _address(i: int) -> str:
    return f"127.0.0.{NGINX_FIRST + i}"


def _page_html(rng: random.Random, host: str, page: int, version: int) -> str:
    words = " ".join(rng.choices(_WORDS, k=rng.randint(650, 760)))
    sentences = [s.capitalize() + "." for s in words.split(" river ") if s]
    body = "\n".join(f"<p>{s}</p>" for s in sentences)
    return (
        "<!doctype html>\n<html><head><meta charset=utf-8>"
        f"<title>Page {page} of {host}, version {version}</title></head><body>\n"
        '<nav><a href="/">home</a></nav>\n'
        f"<main><h1>Page {page}, version {version}</h1>\n{body}\n</main>\n"
        f"<footer>{host}</footer></body></html>\n"
    )


def _write_page(root: Path, host: int, page: int, version: int, rng: random.Random) -> None:
    target = root / _address(host) / "p" / f"{page}.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_page_html(rng, _address(host), page, version))
    mtime = FILE_MTIME + version * 3600
    os.utime(target, (mtime, mtime))


def space_nginx(work: Path, pages: int, cycles: int) -> dict[str, Any]:
    """Every page every cycle against nginx's own validators, 10 % of files rewritten between
    cycles."""
    from freshness_pipeline.app.runner import load_seeds, open_instance, run_cycle

    _environment()
    rng = random.Random(7)
    root = work / "nginx-root"
    versions = {(h, p): 0 for h in range(NGINX_HOSTS) for p in range(pages // NGINX_HOSTS)}
    for h in range(NGINX_HOSTS):
        robots = root / _address(h) / "robots.txt"
        robots.parent.mkdir(parents=True, exist_ok=True)
        robots.write_text("User-agent: *\nDisallow:\n")
    for (h, p), v in versions.items():
        _write_page(root, h, p, v, rng)
    home = work / "nginx-home"
    started = time.perf_counter()
    addresses = [_address(h) for h in range(NGINX_HOSTS)]
    with running_nginx(SITE, work / "nginx", root, addresses) as server:
        port = server.port
        seeds = "url\n" + "".join(f"http://{_address(h)}:{port}/p/{p}.html\n" for h, p in versions)
        load_seeds(home, seeds.encode(), added_at=START)
        instance = open_instance(home)
        for k in range(cycles):
            if k:
                for key in rng.sample(sorted(versions), round(NGINX_CHANGE_SHARE * len(versions))):
                    versions[key] += 1
                    _write_page(root, key[0], key[1], versions[key], rng)
            run_cycle(home, START + k * CYCLE, budget=len(versions), instance=instance)
            print(f"  nginx cycle {k + 1}/{cycles}", flush=True)
    figures = archive_figures(home)
    figures |= {
        "web": "nginx (static files)",
        "pages": len(versions),
        "sites": NGINX_HOSTS,
        "cycles": cycles,
        "budget": len(versions),
        "wall_s": time.perf_counter() - started,
    }
    return figures


# ---- export: 10k to 1M versions ------------------------------------------------------------------


def build_export_home(home: Path, n_versions: int) -> dict[str, Any]:
    """A home of ``n_versions`` page_versions rows (two per URL) and the URLs' url_state, written
    by the warehouse's own writer, columns built by polars expressions over the whole frame."""
    import polars as pl

    from freshness_pipeline.warehouse import tables
    from freshness_pipeline.warehouse.storage import Warehouse

    started = time.perf_counter()
    wh = Warehouse(home)
    n_urls = n_versions // 2
    hosts = [f"h{i:05d}.example" for i in range(EXPORT_HOSTS)]
    paragraph = " ".join(random.Random(3).choices(_WORDS, k=150))
    i = pl.int_range(n_versions, eager=True).alias("i")
    base = pl.DataFrame(i).with_columns(
        url_id=pl.col("i") // 2,
        second=(pl.col("i") % 2) == 1,
    )
    host = pl.format("h{}.example", (pl.col("url_id") % EXPORT_HOSTS).cast(pl.String).str.zfill(5))
    cycle = (pl.col("url_id") % (EXPORT_CYCLES - 1)) + pl.col("second").cast(pl.Int64)
    start = pl.lit(START).cast(tables.UTC_TIME)
    versions = base.with_columns(
        host=host,
        url=pl.format("https://{}/p/{}", host, pl.col("url_id")),
        observed_at=start + pl.duration(hours=cycle * 6),
        outcome=pl.when(pl.col("second")).then(pl.lit("changed")).otherwise(pl.lit("new")),
        url_class=pl.lit("article"),
        fingerprint=pl.col("i").hash(7).cast(pl.String),
        fingerprint_version=pl.lit(1, pl.Int64),
        title=pl.format("Page {} version {}", pl.col("url_id"), pl.col("second").cast(pl.Int8)),
        text=pl.format(
            "{}\n{} {}\n{}\n{}",
            pl.col("url_id"),
            pl.col("i").hash(11),
            pl.lit(paragraph),
            pl.col("i").hash(13),
            pl.lit(paragraph),
        ),
        content_type=pl.lit("text/html"),
    ).with_columns(
        fields=pl.format('{{"price": "{}", "title": "{}"}}', pl.col("i") % 1000, pl.col("title"))
    )
    wh.write_partitions("page_versions", hosts, versions)
    urls = versions.filter(pl.col("second")).select("url", "host", "observed_at")
    gone = (pl.col("url").hash(5) % 1000) < round(EXPORT_GONE_SHARE * 1000)
    state = urls.with_columns(
        status=pl.when(gone).then(pl.lit("gone")).otherwise(pl.lit("active")),
        gone_at=pl.when(gone).then(pl.col("observed_at") + timedelta(hours=1)),
        last_seen_at=pl.col("observed_at"),
        url_class=pl.lit("article"),
    )
    wh.write_partitions("url_state", hosts, state)
    # the requests the tombstones are read from: the gone URLs' last live answer, then gone
    went = state.filter(pl.col("status") == "gone")
    answers = pl.concat(
        [
            went.select("url", "host", pl.col("observed_at").alias("fetched_at")).with_columns(
                outcome=pl.lit("changed")
            ),
            went.select("url", "host", pl.col("gone_at").alias("fetched_at")).with_columns(
                outcome=pl.lit("gone")
            ),
        ]
    )
    wh.write_partitions("fetch_log", hosts, answers)
    files = len(wh.files("page_versions"))
    return {
        "versions": n_versions,
        "urls": n_urls,
        "hosts": EXPORT_HOSTS,
        "files": files,
        "gone": int(state["status"].eq("gone").sum()),
        "build_s": time.perf_counter() - started,
        "parquet_bytes": sum(p.stat().st_size for p in wh.files("page_versions")),
    }


def measure(command: list[str], env: dict[str, str], cwd: Path | None = None) -> dict[str, Any]:
    """Wall, CPU (from wait4) and peak RSS of one child: its VmHWM sampled every 10 ms, which
    only grows, so the last sample is within 10 ms of its peak. Not ru_maxrss: Linux starts a
    child's at its parent's RSS at fork."""
    run = run_measured(
        command,
        probe=lambda pid: status_kb("VmHWM", pid),
        every_s=0.01,
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    last = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
    return {
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "peak_rss_mb": run.peak_sample_kb / 1024,
        "stderr": last,
        # a failed export is a figure too (the export before this release ran out of memory)
        "error": None if run.returncode == 0 else f"exit {run.returncode}: {last}",
    }


def cli_module(code: Path) -> str:
    """The CLI's module in the checkout ``code``: ``freshness_pipeline.app.cli``, or
    ``freshness_pipeline.cli`` in a checkout from before the package's layers."""
    if (code / "freshness_pipeline" / "app" / "cli.py").exists():
        return "freshness_pipeline.app.cli"
    return "freshness_pipeline.cli"


def export_runs(
    work: Path, sizes: list[int], codes: list[tuple[str, Path]]
) -> list[dict[str, Any]]:
    """Each size's home built once, then exported by each checkout in ``codes`` (label, folder
    whose ``freshness_pipeline`` the CLI runs)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8"}
    env.pop("DAGSTER_HOME", None)
    since = START.isoformat()
    runs: list[dict[str, Any]] = []
    for size in sizes:
        home = work / f"export-{size}"
        # in a child, so that this process stays small (and none of the frames it built is
        # in memory while the exports run)
        built = run_child(
            __file__,
            ["--build-home", str(home), "--sizes", str(size)],
            what=f"building the {size:,}-version home",
            env=env,
        )
        print(
            f"  built {size:,} versions in {built['files']:,} files ({built['build_s']:.0f} s)",
            flush=True,
        )
        empty = (START + timedelta(days=365)).isoformat()
        for label, code in codes:
            # in the checkout's folder: `python -m` puts the working folder first on sys.path
            code_env = {**env, "PYTHONPATH": str(code)}
            cli = [sys.executable, "-m", cli_module(code), "export", "--home", str(home)]
            startup = measure(
                [*cli, "--since", empty, "--out", str(work / "empty.jsonl")], code_env, code
            )
            runs.append({**built, "code": label, "format": "startup", **startup, "out_bytes": 0})
            for fmt in EXPORT_FORMATS:
                out = work / f"export-{size}.{fmt}"
                done = measure(
                    [*cli, "--since", since, "--format", fmt, "--out", str(out)], code_env, code
                )
                size_out = out.stat().st_size if out.exists() else 0
                runs.append({**built, "code": label, "format": fmt, **done, "out_bytes": size_out})
                out.unlink(missing_ok=True)
                print(
                    f"  {label:>8} {size:>9,} {fmt:7} {done['wall_s']:6.1f} s wall "
                    f"{done['cpu_s']:6.1f} s CPU {done['peak_rss_mb']:6.0f} MB peak; "
                    f"{done['stderr']}",
                    flush=True,
                )
        shutil.rmtree(home)
    return runs


# ---- report ----------------------------------------------------------------------------------


def _kb(n: float) -> str:
    return f"{n / 1024:,.0f}"


def space_section(webs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## Space: the archive per 1,000 fetches",
        "",
        "| web | pages | cycles | fetches (pages) | responses / revisits | WARC KB per 1,000 fetches, with revisits | in full | in full / with revisits | CDXJ KB per 1,000 | page_versions + changes KB per 1,000 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for w in webs:
        per = 1000 / max(1, w["fetches"])
        records = w["records"]
        lines.append(
            f"| {w['web']} | {w['pages']:,} on {w['sites']} hosts | {w['cycles']} | "
            f"{w['fetches']:,} ({w['page_fetches']:,}) | "
            f"{records.get('response', 0):,} / {records.get('revisit', 0):,} | "
            f"{_kb(w['with_revisits'] * per)} | {_kb(w['in_full'] * per)} | "
            f"{w['in_full'] / max(1, w['with_revisits']):.2f}x | {_kb(w['index_bytes'] * per)} | "
            f"{_kb(w['history_table_bytes'] * per)} |"
        )
    lines += [
        "",
        "What the rows are made of (bytes as stored, gzip per record):",
        "",
        "| web | revisit profiles | a revisit as stored / in full (bytes, mean) | requests by kind | warcio control: stored responses re-serialized / as stored |",
        "|---|---|---|---|---|",
    ]
    for w in webs:
        n = max(1, w["records"].get("revisit", 0))
        profiles = ", ".join(f"{k} {v:,}" for k, v in sorted(w["revisit_profiles"].items()))
        kinds = ", ".join(f"{k} {v:,}" for k, v in sorted(w["requests_by_kind"].items()))
        control = w["control_warcio"] / max(1, w["control_stored"])
        lines.append(
            f"| {w['web']} | {profiles or 'none'} | {w['revisit_bytes'] / n:,.0f} / "
            f"{w['revisits_in_full'] / n:,.0f} | {kinds} | {control:.3f} |"
        )
    return lines


def export_section(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## `freshness export` from 10k to 1M versions",
        "",
        "| code | versions | URLs (gone) | files | format | wall s | CPU s | peak RSS MB | output MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        output = f"{r['out_bytes'] / 1e6:,.1f}" if not r.get("error") else f"failed: {r['error']}"
        lines.append(
            f"| {r.get('code', 'this')} | {r['versions']:,} | {r['urls']:,} ({r['gone']:,}) | "
            f"{r['files']:,} | {r['format']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
            f"{r['peak_rss_mb']:.0f} | {output} |"
        )
    by = {(r.get("code", "this"), r["versions"], r["format"]): r for r in runs}
    sizes = sorted({r["versions"] for r in runs})
    codes = list(dict.fromkeys(r.get("code", "this") for r in runs))
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        lines += ["", f"From {small:,} to {large:,} versions ({large // small:,}x the rows):", ""]
        for code in codes:
            for fmt in EXPORT_FORMATS:
                a, b = by.get((code, small, fmt)), by.get((code, large, fmt))
                if not (a and b):
                    continue
                if a.get("error") or b.get("error"):
                    failed = [f"{r['versions']:,}" for r in (a, b) if r.get("error")]
                    lines.append(f"- {code}, {fmt}: failed at {' and '.join(failed)} versions")
                    continue
                startup = by[(code, large, "startup")]["cpu_s"]
                lines.append(
                    f"- {code}, {fmt}: peak RSS {a['peak_rss_mb']:.0f} -> "
                    f"{b['peak_rss_mb']:.0f} MB ({b['peak_rss_mb'] / a['peak_rss_mb']:.2f}x), "
                    f"{(b['cpu_s'] - startup) / (large / 1e6):.1f} CPU s per million versions "
                    "past startup"
                )
    return lines


def report(saved: dict[str, Any]) -> str:
    lines = [
        "# The crawled copy: space on disk and export at scale",
        "",
        f"Generated by `{saved['command']}` on {saved['date']} ({os.cpu_count()} CPUs, shared), "
        f"commit {saved['commit']}. The method is in the script's docstring "
        "([`benchmarks/crawled_copy.py`](../benchmarks/crawled_copy.py)); in short below.",
        "",
    ]
    if saved.get("space"):
        lines += space_section(saved["space"])
        lines += [
            "",
            "- *With revisits* is the archive as written; *in full* replaces each revisit record "
            "by the full response record (the original's payload, the response's headers) that "
            "an archive without deduplication would hold, serialized by warcio. The product's "
            "writer is unchanged; the control column shows warcio's serialization of the stored "
            "responses against their stored size (1.00 would be the same bytes).",
            "- Fetches count every request the archive recorded: pages, robots.txt, sitemaps "
            "and feeds. On the demo web a cycle fetches 10 % of the pages (the demo's budget); "
            "on nginx every page every cycle, with 10 % of the files rewritten between cycles.",
            "- page_versions and changes grow with the versions kept (new and changed bodies), "
            "not with the fetches; their figure is given per 1,000 fetches only to set it beside "
            "the archive's.",
            "",
        ]
    if saved.get("export"):
        lines += export_section(saved["export"])
        lines += [
            "",
            "- Each home: 1,000 hosts x 8 cycles of page_versions files (written by "
            "`Warehouse.write_partitions`), two versions per URL, ~1 KB of text each, 1 % of "
            "URLs gone in the window. The export window covers every cycle, so every URL is "
            "in it once: its newest version, or its tombstone.",
            "- *startup* is the same command over a window with no rows (the interpreter, the "
            "imports, listing the files).",
        ]
        others = sorted({r["code"] for r in saved["export"] if r.get("code", "this") != "this"})
        if others:
            lines.append(
                f"- *{', '.join(others)}*: the export of that commit (DuckDB over the window's "
                "files, its memory limited to 256 MB), run on the same homes with `--before-code`;"
                " *this*: the checkout the script ran from."
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("space", "export"), default=None)
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument("--out", default=None, help="markdown file ('' for none)")
    parser.add_argument("--json", default=None, help="save the figures as JSON")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument(
        "--before-code",
        default=None,
        help="a checkout of an earlier commit: its export runs on the same homes too",
    )
    parser.add_argument("--before-label", default="before", help="its name in the table")
    parser.add_argument("--build-home", default=None, help=argparse.SUPPRESS)  # the child's job
    args = parser.parse_args(argv)
    if args.build_home:
        send_result(build_export_home(Path(args.build_home), args.sizes[0]))
        return 0
    sizes = args.sizes or ([10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000])
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    shown = ["benchmarks/crawled_copy.py", *(argv if argv is not None else sys.argv[1:])]
    saved: dict[str, Any] = {
        "command": " ".join(shown),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": commit or "unknown",
    }
    with tempfile.TemporaryDirectory(prefix="crawled-copy-", dir=args.work) as scratch:
        work = Path(scratch)
        if args.only in (None, "space"):
            print("space: demo web", flush=True)
            demo = space_demo(work, 8 if args.quick else 24)
            print("space: nginx", flush=True)
            nginx = space_nginx(work, 1000 if args.quick else 3000, 4 if args.quick else 6)
            saved["space"] = [demo, nginx]
        if args.only in (None, "export"):
            print("export", flush=True)
            codes = [("this", REPO)]
            if args.before_code:
                codes.insert(0, (args.before_label, Path(args.before_code).resolve()))
            saved["export"] = export_runs(work, sizes, codes)
    text = report(saved)
    print(text)
    out = DEFAULT_OUT if args.out is None and not args.quick else args.out
    if out:
        Path(out).write_text(text)
        print(f"wrote {out}")
    if args.json:
        Path(args.json).write_text(json.dumps(saved, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
