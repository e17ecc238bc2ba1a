"""The `freshness` command: seed, cycle, demo, report, and the crawled copy's diff, export and
reextract.

Here the wall clock only defaults ``--now``. Below, it is read only where real time is meant
(the schedule's and sensors' ticks, the age of Dagster runs being pruned, the date a WARC file
was written); what a cycle plans, fetches and estimates takes the cycle's ``now``, so a cycle
can be replayed as of any time.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from freshness_pipeline.app.cycle_lines import discovery_line, held_back_line, summary_line
from freshness_pipeline.app.seed_lines import seed_summary
from freshness_pipeline.app.terminal import BUSY_EXIT, Output, console, errors, wide
from freshness_pipeline.app.terminal import failed as _failed
from freshness_pipeline.app.terminal import unwritable as _unwritable
from freshness_pipeline.defs.cycle_time import parse_now

if TYPE_CHECKING:
    from freshness_pipeline.app.report import Views
    from freshness_pipeline.warehouse.storage import Warehouse

# Dagster, polars and DuckDB are imported by the commands that need them, so that `--help`
# and a usage error answer at once.

# Dagster flags the beta/preview APIs we rely on (single-run backfills, partitioned checks)
# on every import; a command-line user can do nothing about them.
warnings.filterwarnings("ignore", module=r"dagster\..*")
warnings.filterwarnings("ignore", message=r".*(beta|preview).*", category=Warning)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Keep a crawled copy of many web pages fresh for the least fetching.",
)


def _command(fn: Callable[..., None], **options: Any) -> Callable[..., None]:
    """``app.command`` with the docstring's lines joined into its paragraphs: rich prints a
    docstring's line breaks where they fall, mid-sentence in ``freshness --help``."""
    text = inspect.cleandoc(fn.__doc__ or "")
    help_text = "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))
    command: Callable[..., None] = app.command(help=help_text, **options)(fn)
    return command


def _command_taking_more_values(fn: Callable[..., None]) -> Callable[..., None]:
    """A command whose arguments left over (it has no positional ones) are more values of its
    repeatable option: ``--host a b`` as well as ``--host a --host b``, both of which the
    usage line ``[--host HOST ...]`` reads as."""
    return _command(fn, context_settings={"allow_extra_args": True})


HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Home folder (default: $FRESHNESS_HOME, else ./data)."),
]
NowOption = Annotated[
    str | None,
    typer.Option("--now", help="The cycle's time, ISO 8601, UTC unless it says (default: now)."),
]


def _existing_warehouse(home: Path | None, hint: str) -> Warehouse:
    """The home's warehouse; exit 2 where there is none (a mistyped --home must not become an
    empty home)."""
    from freshness_pipeline.warehouse.storage import Warehouse

    warehouse = Warehouse(home)
    if not warehouse.root.exists():
        raise _failed("error", f"no warehouse in {warehouse.home}: {hint}", 2)
    return warehouse


def _now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    return _moment(text, "--now")  # an empty --now (an unset shell variable) is bad input


def _moment(text: str, option: str) -> datetime:
    """A time option's value, or exit 2 naming the option."""
    try:
        return parse_now(text, option)
    except ValueError as exc:
        raise _failed("error", exc, 2) from exc


@_command
def seed(
    path: Annotated[
        Path,
        typer.Argument(
            help="CSV with a `url` header (optional `value`, `url_class`; commas, semicolons or tabs) "
            "or one URL per line."
        ),
    ],
    home: HomeOption = None,
    now: NowOption = None,
) -> None:
    """Add seed URLs. Idempotent; bad rows are reported with their line number and skipped."""
    moment = _now(now)  # bad input is said before the pipeline is loaded
    if not path.exists() or not path.is_file():
        errors.print(f"[red]error:[/] seed file {str(path)!r} does not exist or is not a file")
        raise typer.Exit(2)
    from freshness_pipeline.app.runner import DEMO_MARKER, load_seeds
    from freshness_pipeline.warehouse.storage import HomeBusy, Warehouse

    folder = Warehouse(home).home
    if (folder / DEMO_MARKER).exists():
        raise _failed(
            "error",
            f"{folder} is the demo's home: `freshness demo` resets it on every run, and your "
            "seeds would go with it (the demo's hosts are in it too). Seed another home "
            f"(--home DIR or FRESHNESS_HOME), or delete {folder / DEMO_MARKER} to make this "
            "one yours",
            2,
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        errors.print(f"[red]error:[/] cannot read {str(path)!r}: {exc.strerror}")
        raise typer.Exit(2) from exc
    try:
        result = load_seeds(home, data, added_at=moment)
    except HomeBusy as exc:
        raise _failed("seed refused", exc, BUSY_EXIT) from exc
    except OSError as exc:
        raise _unwritable(exc, "seed") from exc
    for line, reason in result.parse.errors:
        errors.print(f"{escape(str(path))}:{line}: skipped: {escape(reason)}")
    if result.parse.fatal:
        errors.print(f"[red]error:[/] {escape(str(path))}: {escape(result.parse.fatal)}")
        raise typer.Exit(2)  # bad input, not a failed pipeline
    console.print(seed_summary(result), soft_wrap=True)
    for note in result.notes:
        errors.print(f"[yellow]note:[/] {escape(note)}")


@_command_taking_more_values
def cycle(
    ctx: typer.Context,
    home: HomeOption = None,
    now: NowOption = None,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            min=0,
            help=(
                "At most N page fetches this cycle, over all hosts (default: every fetch worth "
                "making that the hosts' capacities allow)."
            ),
        ),
    ] = None,
    host: Annotated[
        list[str] | None,
        typer.Option(
            "--host",
            help="Only these hosts (--host a b, or repeated): host[:port] as `freshness hosts` "
            "lists them, or a URL.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Build the plan; fetch nothing.", metavar="")
    ] = False,
    time_limit: Annotated[
        float,
        typer.Option(
            "--time-limit",
            min=0,
            help="Seconds for fetching; the rest is deferred to the next cycle (0: no limit).",
        ),
    ] = 0.0,
    retention_days: Annotated[
        float,
        typer.Option(
            "--retention-days",
            min=0,
            help="Prune fetch_log cycles older than this many days (default 0: keep all).",
        ),
    ] = 0.0,
    fetch_processes: Annotated[
        int,
        typer.Option(
            "--fetch-processes", min=1, help="Split the fetching over N processes (hosts whole)."
        ),
    ] = 1,
) -> None:
    """Run one cycle of the whole graph as of --now."""
    if ctx.args:
        if not host:
            raise _failed("error", f"unexpected argument {ctx.args[0]!r} (hosts follow --host)", 2)
        host = [*host, *ctx.args]
    moment = _now(now)  # a bad --now is said before the pipeline is loaded
    from freshness_pipeline.app.runner import CycleFailed, UnknownHosts, UnreadableConfig, run_cycle
    from freshness_pipeline.warehouse.storage import HomeBusy, Warehouse
    from freshness_pipeline.web.netguard import allowed_networks

    folder = Warehouse(home).home
    if not folder.exists():  # a mistyped --home must not become an empty home; a home being
        # seeded right now (no warehouse yet, its lock held) is busy, not missing
        raise _failed("error", f"no warehouse in {folder}: run `freshness seed`", 2)
    try:
        allowed_networks()  # a typo in FRESHNESS_ALLOW_NETWORKS is bad input, said before a run
    except ValueError as exc:
        raise _failed("error", exc, 2) from exc
    from freshness_pipeline.app.undo import future_note

    ahead = future_note(moment)
    if ahead:  # said before the run, which can take long; a script never waits on a question
        errors.print(f"[yellow]note:[/] {escape(ahead)}")
    try:
        outcome = run_cycle(
            home,
            moment,
            budget=budget,
            hosts=host,
            dry_run=dry_run,
            fetch_time_limit_s=time_limit,
            retention_days=retention_days,
            fetch_processes=fetch_processes,
            undo_point=ahead is not None,
            now_given=now is not None,
        )
    except (UnknownHosts, UnreadableConfig) as exc:
        raise _failed("error", exc, 2) from exc
    except CycleFailed as exc:
        raise _failed(exc.label, exc, exc.exit_code) from exc
    except HomeBusy as exc:
        raise _failed("cycle refused", exc, BUSY_EXIT) from exc
    except OSError as exc:
        where = f" ({escape(str(exc.filename))})" if exc.filename else ""
        errors.print(
            f"[red]cycle failed:[/] cannot write the home folder{where}: "
            f"{escape(str(exc.strerror or exc))}; the previous tables are intact"
        )
        raise typer.Exit(1) from exc
    except Exception as exc:  # the pipeline itself failed: say what, keep the tables
        errors.print(
            f"[red]cycle failed:[/] {type(exc).__name__}: {escape(str(exc))}; the previous "
            "tables are intact"
        )
        raise typer.Exit(1) from exc
    # one line each, whatever the terminal's width: a log or a pipe read "(new" and "3)" on
    # two lines (found by a newcomer)
    console.print(summary_line(moment, outcome, dry_run=dry_run), soft_wrap=True)
    found = discovery_line(outcome.discovery)
    if found:
        console.print(found, soft_wrap=True)
    held = held_back_line(outcome, dry_run=dry_run)
    if held:
        errors.print(held)
    for note in outcome.notes:
        errors.print(f"[yellow]note:[/] {escape(note)}")


def _latest(views: Views) -> datetime:
    """The report's default time; with nothing seeded there is no cycle to report on."""
    from freshness_pipeline.app.report import latest_cycle_time

    try:
        return latest_cycle_time(views)
    except ValueError as exc:
        errors.print(
            f"[red]error:[/] {escape(str(exc))}: run `freshness seed` and `freshness cycle`"
        )
        raise typer.Exit(2) from exc


@_command
def hosts(
    home: HomeOption = None,
    retire: Annotated[
        list[str] | None,
        typer.Option(
            "--retire",
            help="Remove this host from the crawl: its rows in every table and its Dagster "
            "partition (the WARC archive keeps its records). Repeatable.",
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Retire without asking.", metavar="")] = False,
) -> None:
    """The seeded hosts: URLs by status, Dagster partition and newest cycle; --retire removes
    one."""
    from rich.table import Table

    from freshness_pipeline.app.host_names import host_key_of, unknown_hosts_message
    from freshness_pipeline.app.runner import UnknownHosts, host_summary, retire_host
    from freshness_pipeline.config import ConfigError
    from freshness_pipeline.warehouse.storage import HomeBusy

    _existing_warehouse(home, "run `freshness seed`")
    try:
        summary = host_summary(home)
    except ConfigError as exc:  # the partitions shown depend on it: said, not a traceback
        raise _failed("error", exc, 2) from exc
    if retire:
        known = summary["host"].to_list()
        retire = list(dict.fromkeys(host_key_of(h) for h in retire))
        unknown = sorted(set(retire) - set(known))
        if unknown:
            message = unknown_hosts_message(unknown, known)
            raise _failed("error", f"unknown host(s): {message}", 2)
        if not yes:
            if not console.is_terminal:
                errors.print("[red]error:[/] retiring deletes the hosts' tables: pass --yes")
                raise typer.Exit(2)
            if not typer.confirm(f"Retire {', '.join(retire)} and delete their tables?"):
                raise typer.Exit(1)
        for host in retire:
            try:
                removed = retire_host(home, host)
            except HomeBusy as exc:
                raise _failed("retire refused", exc, BUSY_EXIT) from exc
            except (UnknownHosts, ConfigError) as exc:
                raise _failed("error", exc, 2) from exc
            except OSError as exc:
                raise _unwritable(exc, "retire") from exc
            console.print(f"retired {host.lower()}: {len(removed)} tables' files removed")
        return
    table = Table(title=f"{summary.height} host{'s' * (summary.height != 1)}")
    for name in summary.columns:
        table.add_column(name, justify="left" if name in ("host", "partition") else "right")
    for row in summary.iter_rows():
        table.add_row(*["" if v is None else str(v) for v in row])
    wide.print(table)


ReportNowOption = Annotated[
    str | None,
    typer.Option(
        "--now",
        help="The time the copy's expected age is measured at, ISO 8601 (default: the newest "
        "cycle); the counts are the newest cycle's tables whatever it says.",
    ),
]


@_command
def report(
    home: HomeOption = None,
    now: ReportNowOption = None,
    host: Annotated[
        list[str] | None,
        typer.Option(
            "--host", help="Only this host in the by-host table (repeatable; host or host:port)."
        ),
    ] = None,
    all_hosts: Annotated[
        bool,
        typer.Option("--all-hosts", help="Every host in the by-host table, however many."),
    ] = False,
) -> None:
    """Metrics per host and per URL class: 304 share, unchanged-body share, requests per
    detected change, expected age (freshness lag), errors. The by-host table lists the hosts
    with the most URLs (30) unless --host or --all-hosts says otherwise."""
    from freshness_pipeline.app.report import (
        DEFAULT_HOST_ROWS,
        nothing_fetched_yet,
        open_views,
        print_report,
    )

    chosen = _now(now) if now is not None else None  # validated like `cycle --now`, first
    warehouse = _existing_warehouse(home, "run `freshness seed` and `freshness cycle`")
    stale = warehouse.ensure_views()
    with open_views(warehouse) as (views, note):
        if note or stale:
            errors.print(f"[yellow]note:[/] {escape(str(note or stale))}")
        try:
            print_report(
                views,
                chosen or _latest(views),
                wide,
                hosts=host,
                host_rows=None if all_hosts else DEFAULT_HOST_ROWS,
            )
        except ValueError as exc:
            errors.print(f"[red]error:[/] {escape(str(exc))}")
            raise typer.Exit(2) from exc
        if nothing_fetched_yet(views):
            errors.print(
                "[yellow]note:[/] no cycle has fetched anything yet (a dry run fetches nothing):"
                " the figures are zeros until `freshness cycle` runs"
            )
    wide.print(
        f"SQL: open {warehouse.duckdb_path} read-only (views host_metrics, class_metrics, ...)"
    )


@_command
def demo(
    home: HomeOption = None,
    cycles: Annotated[
        int, typer.Option("--cycles", min=1, help="Simulated cycles (6 h each).")
    ] = 24,
    budget_share: Annotated[
        float,
        typer.Option(
            "--budget-share", min=0.001, max=1.0, help="Budget per cycle as a share of pages."
        ),
    ] = 0.1,
    seed_: Annotated[int, typer.Option("--seed", help="Seed of the synthetic web.")] = 0,
) -> None:
    """Start the synthetic web on loopback, crawl it for several simulated cycles, report."""
    from freshness_pipeline.app.demo import DemoError, run_demo

    try:
        run_demo(home, cycles=cycles, budget_share=budget_share, seed=seed_, console=wide)
    except DemoError as exc:
        raise _failed("error", exc, 2) from exc
    except OSError as exc:
        raise _unwritable(exc, "demo") from exc


# Typer keeps the line breaks of every help paragraph but the first: one line per paragraph.
_DIFF_HELP = (
    "What changed in a page: a unified diff of its fields and text between a version and the "
    "version before it, from page_versions."
    "\n\n"
    "Coloured on a terminal, plain text when piped or redirected. A page with only one version "
    "(at or before --at) is shown as all added, against /dev/null, as a new file is, with a "
    "note on stderr; it is not an error."
    "\n\n"
    "Exit 2, with a message naming the problem, for a URL the home has no version of, a --at "
    "before the page's first version, or a --at that is not an ISO 8601 time."
)


@app.command(help=_DIFF_HELP)
def diff(
    url: Annotated[str, typer.Argument(help="The page's URL, as seeded or crawled.")],
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            help="Diff the newest version observed at or before this time, ISO 8601 "
            "(default: the newest version).",
        ),
    ] = None,
    home: HomeOption = None,
) -> None:
    """A diff is read by a person at a terminal or fed to a tool: colour for one, plain text
    for the other, and the first version of a page shown the way a new file is."""
    moment = _moment(at, "--at") if at is not None else None
    from freshness_pipeline.app.crawled_copy import (
        CopyError,
        QueryError,
        iso_utc,
        print_diff,
        version_diff,
    )
    from freshness_pipeline.warehouse.storage import Warehouse

    try:
        result = version_diff(Warehouse(home), url, moment)
    except CopyError as exc:
        raise _failed("error", exc, 2) from exc
    except QueryError as exc:
        raise _failed("diff failed", exc, 1) from exc
    observed = iso_utc(result.new.observed_at)
    if result.old is None:
        before = f" at or before --at {iso_utc(moment)}" if moment is not None else ""
        errors.print(
            f"[yellow]note:[/] {escape(result.url)} has only one version{before} (observed "
            f"at {observed}, {result.new.outcome}): shown as all added"
        )
    elif not result.lines and result.old.is_bytes and result.new.is_bytes:
        errors.print(
            f"[yellow]note:[/] {escape(result.url)} is not text (its versions are its bytes): "
            f"they changed between {iso_utc(result.old.observed_at)} "
            f"({escape(result.old.archived_at)}) and {observed} "
            f"({escape(result.new.archived_at)})"
        )
    elif not result.lines:
        errors.print(
            f"[yellow]note:[/] no difference in fields or text between the versions observed "
            f"at {iso_utc(result.old.observed_at)} and {observed}"
        )
    print_diff(result, Output(soft_wrap=True, highlight=False))


class ExportFormat(StrEnum):
    jsonl = "jsonl"
    parquet = "parquet"
    csv = "csv"


_EXPORT_HELP = (
    "For a downstream consumer: the newest version of every URL that changed or appeared in "
    "the window [--since, --until), and a tombstone for every URL that went gone in it."
    "\n\n"
    "--since is inclusive (a version observed at it counts), --until exclusive (one observed at "
    "it does not; default: no end). A version is the newest observed in the window (new, "
    "changed or re-extracted); a URL that went gone (404/410) in the window gets only its "
    "tombstone."
    "\n\n"
    "JSON lines: one object per URL, {url, observed_at, outcome, title, text, fields (an "
    'object), fingerprint}, or {url, status: "gone", gone_at} for a gone URL. Parquet and CSV: '
    "the same rows as columns url, observed_at, outcome, title, text, fields (JSON text), "
    "fingerprint, status ('gone' or empty), gone_at. Times are ISO 8601 UTC (Parquet: UTC "
    "timestamps)."
    "\n\n"
    "Rows come in no set order (sorting would hold the whole window); memory stays bounded "
    "whatever the window's size. A file is written under a temporary name and renamed when "
    "complete."
    "\n\n"
    "Exit 2 for a bad time, --until before --since, an unknown format or an --out that cannot "
    "be written."
)


@app.command(help=_EXPORT_HELP)
def export(
    since: Annotated[
        str,
        typer.Option(
            "--since", help="Start of the window, ISO 8601, inclusive (a change at it counts)."
        ),
    ],
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            help="End of the window, ISO 8601, exclusive (a change at it does not count; "
            "default: no end).",
        ),
    ] = None,
    fmt: Annotated[
        ExportFormat, typer.Option("--format", help="jsonl, parquet or csv.")
    ] = ExportFormat.jsonl,
    out: Annotated[
        str,
        typer.Option(
            "--out",
            help="File to write (under a temporary name, renamed when complete), or - for stdout.",
        ),
    ] = "-",
    home: HomeOption = None,
) -> None:
    """A consumer mirrors the copy by applying each window's export in turn: the newest
    version of a page replaces its copy, a tombstone deletes it, and back-to-back windows
    (one's --until the next one's --since) neither miss nor repeat a change. While a cycle
    runs, a window ending after its time is refused: its rows are written when it ends."""
    start = _moment(since, "--since")
    end = _moment(until, "--until") if until is not None else None
    from freshness_pipeline.app.crawled_copy import CopyError, QueryError, TargetError
    from freshness_pipeline.app.export import broken_pipe
    from freshness_pipeline.app.export import export as export_copy
    from freshness_pipeline.warehouse.storage import Warehouse

    target = None if out == "-" else Path(out).expanduser()
    try:
        summary = export_copy(
            Warehouse(home), start, end, fmt.value, out=target, stream=sys.stdout.buffer
        )
    except CopyError as exc:
        what = f"--out {exc}" if isinstance(exc, TargetError) else str(exc)
        errors.print(f"[red]error:[/] {escape(what)}")
        raise typer.Exit(2) from exc
    except QueryError as exc:
        errors.print(f"[red]export failed:[/] {escape(str(exc))}; nothing was written")
        raise typer.Exit(1) from exc
    except OSError as exc:
        if target is None and broken_pipe(exc):
            # the reader stopped early (`| head`): it has what it asked for, nothing more to
            # write and nothing failed (exit 1 read as a failed export under pipefail)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(0) from None
        errors.print(
            f"[red]export failed:[/] {escape(str(exc.strerror or exc))}"
            + (f" ({escape(str(exc.filename))})" if exc.filename else "")
        )
        raise typer.Exit(1) from exc
    written = "stdout" if target is None else str(target)
    errors.print(
        f"exported {summary.rows} URLs ({summary.versions} versions, {summary.gone} gone) "
        f"to {escape(written)}"
    )


@_command
def undo(
    yes: Annotated[
        bool, typer.Option("--yes", help="Take back the cycles run after it too.", metavar="")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Take back the last cycle dated ahead of the machine's clock, or over 7 days after its
    hosts' newest (a mistyped --now or launchpad time): every table and archive file as they
    were before it. Seeds stay as they are now."""
    from freshness_pipeline.app.undo import undo_cycle
    from freshness_pipeline.warehouse.storage import HomeBusy
    from freshness_pipeline.warehouse.undo import NothingToUndo

    warehouse = _existing_warehouse(home, "nothing to undo")
    try:
        done = undo_cycle(warehouse.home, since_ok=yes)
    except (NothingToUndo, ValueError) as exc:
        raise _failed("undo refused", exc, 2) from exc
    except HomeBusy as exc:
        raise _failed("undo refused", exc, BUSY_EXIT) from exc
    except OSError as exc:
        raise _unwritable(exc, "undo") from exc
    later = len(done.later)
    console.print(
        f"took back the cycle of {done.moment.isoformat()}"
        + (f" and {later} cycle(s) after it" if later else "")
        + f": {done.restored} files put back, {done.removed} removed"
    )


@_command
def reextract(
    url_class: Annotated[
        str | None,
        typer.Option("--url-class", help="Only this URL class (default: every class)."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Re-extract every page, not only those of another fingerprint version.",
            metavar="",
        ),
    ] = False,
    home: HomeOption = None,
) -> None:
    """Re-derive fingerprints, titles, texts and fields from the WARC archive after a change of
    a class's selectors, fields or json_ld, fetching nothing: the next fetch of an unchanged
    page is then a 304 or 'unchanged', not a re-extraction."""
    if url_class is not None and not url_class.strip():
        errors.print("[red]error:[/] --url-class must name a URL class")
        raise typer.Exit(2)
    from freshness_pipeline.app.reextract import ReextractInputError
    from freshness_pipeline.app.reextract import reextract as reextract_pages
    from freshness_pipeline.warehouse.storage import HomeBusy

    try:
        done = reextract_pages(
            home, url_class=url_class.strip() if url_class else None, force=force
        )
    except ReextractInputError as exc:
        raise _failed("error", exc, 2) from exc
    except HomeBusy as exc:
        raise _failed("reextract refused", exc, BUSY_EXIT) from exc
    except Exception as exc:  # each host's files are old or new, never half written
        errors.print(
            f"[red]reextract failed:[/] {type(exc).__name__}: {escape(str(exc))}; the tables of "
            "every host not yet re-extracted are as they were"
        )
        raise typer.Exit(1) from exc
    console.print(done.line(), soft_wrap=True)  # one line, also when piped


if __name__ == "__main__":  # pragma: no cover
    app()
