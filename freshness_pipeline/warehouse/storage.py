"""Paths, atomic Parquet writes and the DuckDB views: the only module that reads or writes the
warehouse's tables (the WARC files are warehouse/archive/'s; ``host_parts`` reads a host
file's footer for this one).

Layout: ``<home>/warehouse/<table>/host=<escaped key>/data.parquet`` (``fetch_log`` keeps one
``cycle-<stamp>.parquet`` per cycle instead). Every file is written under a temporary name that
does not end in ``.parquet`` (DuckDB's ``**/*.parquet`` glob matches dot-files too) and moved into
place with ``os.replace``, so a killed run leaves the previous good file and a reader never sees
half a file; a host file whose footer says it already holds the rows is left as it is
(``host_parts``). ``<home>/freshness.duckdb`` holds only views over those globs; no connection
to it is kept open while a cycle runs, so a user can query during a cycle.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from freshness_pipeline.warehouse import tables
from freshness_pipeline.warehouse.crashpoints import crash_point
from freshness_pipeline.warehouse.host_parts import (
    DIGEST_KEY,
    content_digests,
    row_groups,
    split_by,
    stored_digest,
)
from freshness_pipeline.warehouse.last_write import LAST_WRITE, Written
from freshness_pipeline.warehouse.layout import (
    PARTITION_FILE,
    SCHEMA_DIR,
    file_identity,
    host_folder,
    read_file,
    scan_files,
    unescape_host_key,
)
from freshness_pipeline.warehouse.locks import WRITER_LOCK, dagster_run_at_work
from freshness_pipeline.warehouse.metrics_sql import METRIC_VIEWS

HOME_ENV = "FRESHNESS_HOME"
# fetch_log is append-only history: nothing is pruned unless an operator asks
# (``cycle --retention-days``); url_state keeps its own observation window regardless.
DEFAULT_RETENTION_DAYS: float | None = None


def resolve_home(home: str | os.PathLike[str] | None = None) -> Path:
    """``--home``, else ``$FRESHNESS_HOME``, else ``./data``; always absolute.

    Absolute because DuckDB resolves relative view paths against the reader's working directory.
    """
    chosen = home if home else os.environ.get(HOME_ENV) or "data"
    return Path(chosen).expanduser().resolve()


def _known_columns(table: str, columns: Sequence[str]) -> None:
    unknown = sorted(set(columns) - set(tables.SCHEMAS[table]))
    if unknown:
        raise KeyError(f"{table} has no column(s) {unknown}")


class HomeBusy(RuntimeError):
    """Another cycle, seed load or Dagster run is writing this home."""


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%S%fZ")


#: threads writing one table's host files: each is an encode and a file write, which wait on
#: the file system (and the encoder lets go of the GIL), so a few overlap well even on two
#: cores. Below 2 x WRITERS files, one thread writes them, each fsynced on its own.
WRITERS = 8


def _syncfs_function() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs  # type: ignore[no-any-return]
    except (AttributeError, OSError):  # not Linux
        return None


_SYNCFS = _syncfs_function()


def sync_filesystem(path: Path) -> None:
    """Make every write on ``path``'s file system durable in one call (Linux ``syncfs``; else
    ``sync``). One fsync per file costs a journal commit each, and with much else dirty (a
    cycle's archive, its other tables) a commit flushes all of it: ten thousand fsyncs took
    20-40 ms apiece at a million URLs; one flush for the whole batch takes one."""
    if _SYNCFS is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if _SYNCFS(fd) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"syncfs failed: {os.strerror(errno)}", str(path))
    finally:
        os.close(fd)


class _Reaper:
    """Frees the files that atomic replaces made obsolete, off the writer's path.

    On ext4 (more so mounted with ``discard``) unlinking a file whose blocks are allocated
    costs a millisecond or more, and ``os.replace`` onto an existing file pays that unlink
    inside the call: a cycle replaces some ten files per host, so at thousands of hosts the
    replaces alone took minutes, one after another. Giving each old file a second name first
    makes the replace a pure rename (microseconds); the old names are removed here, over
    threads, while the cycle goes on. A kill leaves them under a temp name, which
    :meth:`Warehouse.sweep_temp_files` removes."""

    THREADS = 8

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._lock = threading.Lock()

    def submit(self, paths: Sequence[Path]) -> None:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.THREADS, thread_name_prefix="warehouse-free")
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.extend(self._pool.submit(_unlink_quietly, path) for path in paths)

    def wait(self) -> None:
        """Block until every submitted file is gone (before a listing that must not see them)."""
        with self._lock:
            pending, self._pending = self._pending, []
        for future in pending:
            future.result()


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


_REAPER = _Reaper()


def wait_for_freed_files() -> None:
    """Wait for the replaced files still being removed in the background (see ``_Reaper``)."""
    _REAPER.wait()


def _temp_files(root: Path) -> list[Path]:
    """``root.glob("*/host=*/*.tmp-*")`` by scandir: a warehouse of ten thousand hosts has a
    folder per host and table, and pathlib's glob builds a Path for every entry it passes."""
    found: list[Path] = []
    for table in os.scandir(root):
        if not table.is_dir():
            continue
        for folder in os.scandir(table.path):
            if not (folder.name.startswith("host=") and folder.is_dir()):
                continue
            found.extend(Path(e.path) for e in os.scandir(folder.path) if ".tmp-" in e.name)
    return found


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment


class Warehouse:
    """The Parquet warehouse under one home folder."""

    def __init__(self, home: str | os.PathLike[str] | None = None) -> None:
        self.home = resolve_home(home)
        self.root = self.home / "warehouse"
        self.duckdb_path = self.home / "freshness.duckdb"
        #: what the last holder of the writer lock was doing when it died without letting go
        #: (set by :meth:`exclusive`; None when it ended cleanly)
        self.interrupted: str | None = None

    # ---- one writer at a time --------------------------------------------------------------
    @contextlib.contextmanager
    def exclusive(self, what: str) -> Iterator[None]:
        """Hold the home's writer lock for the duration; refuse at once if someone else holds it.

        Two cycles on one home would plan from the same state and append the same fetches
        twice. An OS file lock (not a marker file) is released by the kernel when its holder
        dies, even by kill -9, so a crashed cycle never leaves the home locked. A Dagster run
        at work (one the schedule, the UI or `dagster asset materialize` started) refuses it
        likewise (locks.dagster_run_at_work).
        """
        self.home.mkdir(parents=True, exist_ok=True)
        path = self.home / WRITER_LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
                raise HomeBusy(
                    f"{self.home} is busy: {holder} holds it; wait for it to finish"
                ) from None
            if dagster_run_at_work(self.home):
                fcntl.flock(fd, fcntl.LOCK_UN)
                raise HomeBusy(
                    f"{self.home} is busy: a Dagster run (the schedule, the UI or `dagster asset "
                    "materialize`) is writing it; wait for it to finish"
                )
            # a holder that ends cleanly empties the file: what is still in it is the work of
            # one that died (kill -9, a power cut), for the caller to say so
            left = os.pread(fd, 200, 0).decode(errors="replace").strip()
            self.interrupted = left or None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{what} (pid {os.getpid()})".encode(), 0)
            try:
                yield
            finally:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def sweep_temp_files(self) -> int:
        """Remove temp files a killed writer left behind. Only safe under ``exclusive``: with the
        writer lock held, no temp file can belong to a live writer."""
        removed = 0
        _REAPER.wait()
        if self.root.exists():
            for leftover in [*_temp_files(self.root), *self.root.glob("*.tmp-*")]:
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()
                    removed += 1
        return removed

    # ---- paths -------------------------------------------------------------------------------
    def table_dir(self, table: str) -> Path:
        if table not in tables.SCHEMAS:
            raise KeyError(f"unknown table {table!r}")
        return self.root / table

    def partition_dir(self, table: str, host: str) -> Path:
        path = self.table_dir(table) / host_folder(host)
        if path.parent != self.table_dir(table):
            raise ValueError(f"host key {host!r} escapes its table folder")
        return path

    def partition_file(self, table: str, host: str) -> Path:
        return self.partition_dir(table, host) / PARTITION_FILE

    # ---- writes ------------------------------------------------------------------------------
    @staticmethod
    def _write_temp(df: pl.DataFrame, target: Path, *, fsync: bool, digest: str | None) -> Path:
        """``df`` written beside ``target`` under a name no reader globs, its content digest
        (host_parts) in the footer; removed on failure."""
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f"{target.name}.tmp-{uuid.uuid4().hex}"
        try:
            footer = None if digest is None else {DIGEST_KEY: digest}
            df.write_parquet(tmp, compression="zstd", statistics=True, metadata=footer)
            if fsync:
                fd = os.open(tmp, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            raise
        return tmp

    def _atomic_write(self, df: pl.DataFrame, target: Path) -> None:
        self._atomic_write_many([(df, target)])

    def _atomic_write_many(
        self,
        jobs: Sequence[tuple[pl.DataFrame, Path]],
        digests: Mapping[Path, str] | None = None,
    ) -> None:
        """Replace every target with its frame, each whole or not at all: temp files first
        (over WRITERS threads when there are many, made durable by one file-system flush
        instead of one fsync each), then the renames, then one more flush for the renames. A
        kill at any point leaves each target old or new, never half written, and only temp
        files to sweep."""
        if not jobs:
            return
        LAST_WRITE.forget(str(self.root), {target.parent.parent.name for _, target in jobs})
        many = len(jobs) >= 2 * WRITERS
        temps: list[Path | None] = [None] * len(jobs)
        replaced: list[Path] = []

        def write(i: int) -> None:
            df, target = jobs[i]
            digest = None if digests is None else digests.get(target)
            temps[i] = self._write_temp(df, target, fsync=not many, digest=digest)

        try:
            if many:
                with ThreadPoolExecutor(WRITERS, thread_name_prefix="warehouse-write") as pool:
                    futures = [pool.submit(write, i) for i in range(len(jobs))]
                for future in futures:
                    future.result()
                sync_filesystem(self.root)
            else:
                for i in range(len(jobs)):
                    write(i)
            for i, (_, target) in enumerate(jobs):
                table = target.parent.parent.name
                crash_point(f"write:{table}:temp_written")
                if many:
                    # the old file keeps a temp name until the reaper frees it (_Reaper)
                    old = target.parent / f"{target.name}.tmp-old-{uuid.uuid4().hex}"
                    try:
                        os.link(target, old)
                        replaced.append(old)
                    except FileNotFoundError:
                        pass
                os.replace(temps[i], target)  # type: ignore[arg-type]
                temps[i] = None
                crash_point(f"write:{table}:replaced")
            if many:
                sync_filesystem(self.root)
        finally:
            for tmp in temps:
                if tmp is not None:
                    with contextlib.suppress(FileNotFoundError):
                        tmp.unlink()
            _REAPER.submit(replaced)

    def write_partition(self, table: str, host: str, df: pl.DataFrame) -> Path:
        """Replace one host's file of a table; an empty frame writes a 0-row file."""
        target = self.partition_file(table, host)
        self._atomic_write(tables.conform(table, df), target)
        return target

    def write_partitions(
        self,
        table: str,
        hosts: Sequence[str],
        df: pl.DataFrame,
        *,
        replace_on: Sequence[str] = ("url",),
    ) -> int:
        """Replace the files of every host in ``hosts`` from one frame holding all of them.

        A host of the run with no rows still gets a 0-row file: the run's answer for that host
        is "nothing", not "what the previous run said". A history table (tables.HISTORY_TABLES)
        is appended to instead, one file per host and cycle (:meth:`append_cycle`); a host
        without rows then writes nothing; its rows replace the earlier rows of the file that
        match them on ``replace_on`` (a re-extraction's rows join a cycle's file beside the
        versions that cycle observed: keyed on url and outcome they replace only an earlier
        re-extraction).
        """
        df = tables.conform(table, df)
        groups = row_groups(df, "host") if df.height else {}
        unknown = set(groups) - set(hosts)
        if unknown:
            raise ValueError(f"{table}: rows for hosts outside the run: {sorted(unknown)[:5]}")
        if table in tables.HISTORY_TABLES:
            at = tables.HISTORY_TABLES[table]
            self._atomic_write_many(
                [
                    self._cycle_rows(table, host, moment, rows, replace_on)
                    for host, index in groups.items()
                    for moment, rows in split_by(df[index], at).items()
                ]
            )
            return len(groups)
        empty, digests = df.clear(), content_digests(df, hosts, groups)
        targets = {self.partition_file(table, host): host for host in hosts}
        # a file that already holds these rows is left as it is (host_parts); only the
        # others' rows are gathered
        stale = [(t, h) for t, h in targets.items() if stored_digest(t) != digests[h]]
        jobs = [(df[groups[h]] if h in groups else empty, t) for t, h in stale]
        self._atomic_write_many(jobs, {t: digests[h] for t, h in stale})
        files: dict[str, tuple[int, int, int]] = {}
        for target, host in targets.items():
            identity = file_identity(str(target))
            if identity is None:  # gone already (another process): nothing to vouch for
                return len(hosts)
            files[host] = identity
        LAST_WRITE.remember(Written(str(self.root), table, df, files))
        return len(hosts)

    def append_cycle(
        self, table: str, host: str, cycle_now: datetime, df: pl.DataFrame
    ) -> Path | None:
        """Add one cycle's rows of a history table (tables.HISTORY_TABLES: fetch_log,
        page_versions, changes) for one host: one file per cycle and host.

        The file is named after the cycle's ``now`` and keyed by URL within it: a resumed or
        re-run cycle replaces its earlier rows for the URLs it has again and keeps the others,
        so no row is counted twice and none is lost.
        """
        if table not in tables.HISTORY_TABLES:
            raise ValueError(f"{table} is not a history table")
        if df.is_empty():
            return None
        rows, target = self._cycle_rows(table, host, cycle_now, df)
        self._atomic_write(rows, target)
        return target

    def _cycle_rows(
        self,
        table: str,
        host: str,
        cycle_now: datetime,
        df: pl.DataFrame,
        replace_on: Sequence[str] = ("url",),
    ) -> tuple[pl.DataFrame, Path]:
        """A history file's rows after adding ``df``: a re-run's rows replace the earlier
        ones of the same URLs (the same ``replace_on`` key), and come after the rest."""
        target = self.cycle_file(table, host, cycle_now)
        rows = tables.conform(table, df)
        if target.exists():
            earlier = tables.conform(table, read_file(target))
            key = list(replace_on)
            rows = pl.concat([earlier.join(rows.select(key), on=key, how="anti"), rows])
        return rows, target

    def cycle_file(self, table: str, host: str, cycle_now: datetime) -> Path:
        """Where a history table keeps one host's rows of one cycle."""
        return self.partition_dir(table, host) / f"cycle-{_stamp(cycle_now)}.parquet"

    def append_fetch_log(self, host: str, cycle_now: datetime, df: pl.DataFrame) -> Path | None:
        """One cycle's requests for one host (:meth:`append_cycle` of fetch_log)."""
        return self.append_cycle("fetch_log", host, cycle_now, df)

    def prune_fetch_log(self, before: datetime) -> int:
        """Delete fetch_log files of cycles older than ``before``; returns how many. Rate
        estimates live in url_state's own observation window, so pruning history never changes
        them; it only bounds what is kept about past requests."""
        cutoff = f"cycle-{_stamp(before)}"
        removed = 0
        for path in self.table_dir("fetch_log").glob("host=*/cycle-*.parquet"):
            if path.name < cutoff:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    # ---- reads -------------------------------------------------------------------------------
    def _files(self, table: str, hosts: Iterable[str] | None) -> list[str]:
        """The Parquet files of ``table`` for ``hosts``, as path strings: a step at ten
        thousand hosts lists a table's files several times, and building three Paths per host
        for each listing cost more than the listing. One scandir of the table folder says which
        hosts have a folder at all; a history table's folder is listed for its cycle files, and
        another table's single file is looked up by name."""
        base = self.table_dir(table)
        if hosts is None:
            return sorted(
                str(p) for p in base.glob("host=*/*.parquet") if p.parent.name != SCHEMA_DIR
            )
        root = os.fspath(base)
        try:
            folders = {entry.name for entry in os.scandir(root)}
        except FileNotFoundError:
            return []
        history = table in tables.HISTORY_TABLES
        files: list[str] = []
        for host in hosts:
            name = host_folder(host)
            if name not in folders:
                continue
            folder = f"{root}/{name}"
            if not history:
                if os.path.isfile(f"{folder}/{PARTITION_FILE}"):
                    files.append(f"{folder}/{PARTITION_FILE}")
                continue
            try:
                names = sorted(e.name for e in os.scandir(folder) if e.name.endswith(".parquet"))
            except FileNotFoundError:
                continue
            files.extend(f"{folder}/{n}" for n in names)
        return files

    def read(
        self,
        table: str,
        hosts: Iterable[str] | None = None,
        columns: Sequence[str] | None = None,
    ) -> pl.DataFrame:
        """The rows of ``table`` for ``hosts`` (all hosts when None), in the table's schema, or
        only its ``columns`` (read off the files, not the whole table and then dropped). What
        this process wrote last, and is still on disk as written, is not read again
        (:class:`LastWrite`)."""
        if hosts is not None and table not in tables.HISTORY_TABLES:
            hosts = list(hosts)
            kept = LAST_WRITE.recall(str(self.root), table, hosts)
            if kept is not None:
                if columns is None:
                    return kept
                _known_columns(table, columns)
                return kept.select(columns)
        return self._read_files(table, self._files(table, hosts), columns)

    def _read_files(
        self, table: str, files: Sequence[str | Path], columns: Sequence[str] | None = None
    ) -> pl.DataFrame:
        """One multi-file scan in the table's schema: files from older releases may lack a
        column (inserted as null) or carry one since dropped (ignored)."""
        if columns is not None:
            _known_columns(table, columns)
        if not files:
            empty = tables.empty(table)
            return empty if columns is None else empty.select(columns)
        scan = scan_files(
            files,
            schema=tables.SCHEMAS[table],
            missing_columns="insert",
            extra_columns="ignore",
            # a struct column that gained fields since (robots.sitemap_reads) reads as null
            cast_options=pl.ScanCastOptions(
                missing_struct_fields="insert", extra_struct_fields="ignore"
            ),
            hive_partitioning=False,
        )
        return (scan if columns is None else scan.select(columns)).collect()

    def hosts_in(self, table: str) -> list[str]:
        """Every host with a file in ``table``, read off the folder names: a sensor or a bucket
        run over ten thousand hosts lists one folder instead of opening every file. Only keys
        cut to length (with a hash suffix) need their file's host column."""
        base = self.table_dir(table)
        if not base.is_dir():
            return []
        hosts: set[str] = set()
        cut: list[Path] = []
        for entry in os.scandir(base):
            if not entry.name.startswith("host=") or entry.name == SCHEMA_DIR:
                continue
            files = [f.path for f in os.scandir(entry.path) if f.name.endswith(".parquet")]
            if not files:
                continue
            key = entry.name[len("host=") :]
            if "~" in key:
                cut.extend(Path(f) for f in files)
            else:
                hosts.add(unescape_host_key(key))
        if cut:
            scan = scan_files(cut).select("host").unique().drop_nulls()
            hosts.update(scan.collect()["host"].to_list())
        return sorted(hosts)

    def files(
        self,
        table: str,
        hosts: Iterable[str] | None = None,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[Path]:
        """The Parquet files of ``table`` for ``hosts`` (all hosts when None), for readers that
        scan them with DuckDB themselves. A history table's files can be limited to the cycles
        at or after ``since`` and before ``until``, chosen by their cycle stamp, so that a
        window of a long history opens only the files of that window."""
        files = [Path(f) for f in self._files(table, hosts)]
        if since is None and until is None:
            return files
        if table not in tables.HISTORY_TABLES:
            raise ValueError(f"{table} is not a history table: it has no cycles to choose")
        # stamps are UTC (cycle times are): a bound given in another zone is converted first
        first = f"cycle-{_stamp(_utc(since))}" if since is not None else ""
        end = f"cycle-{_stamp(_utc(until))}" if until is not None else None
        return [f for f in files if f.name >= first and (end is None or f.name < end)]

    def read_fetch_log(self, hosts: Iterable[str], since: datetime) -> pl.DataFrame:
        """The request history of ``hosts`` from the cycles at or after ``since``, choosing files
        by their cycle stamp so that a long history is not read to use its last month."""
        return self._read_files("fetch_log", self.files("fetch_log", hosts, since=since))

    def has_partition(self, table: str, host: str) -> bool:
        return self.partition_file(table, host).exists()

    # ---- DuckDB views ------------------------------------------------------------------------
    def _view_sql(self, table: str) -> str:
        glob = (self.table_dir(table) / "**" / "*.parquet").as_posix().replace("'", "''")
        return (
            f'CREATE OR REPLACE VIEW "{table}" AS SELECT * FROM read_parquet('  # noqa: S608
            f"'{glob}', hive_partitioning = true, union_by_name = true)"
        )

    def _signature(self) -> str:
        described = {t: {c: str(d) for c, d in s.items()} for t, s in tables.SCHEMAS.items()}
        described["_root"] = {"path": str(self.root)}
        described["_metric_views"] = dict(METRIC_VIEWS)
        return json.dumps(described, sort_keys=True)

    # ---- cycles ------------------------------------------------------------------------------
    @property
    def _cycles_file(self) -> Path:
        return self.root / "_cycles.json"

    def newest_cycles(self) -> dict[str, datetime]:
        """The newest cycle time each host has been run at (a cheap lookup at any number of
        hosts: one small file, not a scan of every host's tables); empty before the first."""
        try:
            data = json.loads(self._cycles_file.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return {}
        return {host: datetime.fromisoformat(at) for host, at in data.items()}

    def record_cycle(self, hosts: Iterable[str], now: datetime) -> None:
        """Remember ``now`` as the newest cycle of ``hosts`` where it is newer; written whole
        (temp file and rename), so a kill leaves the previous record."""
        newest = self.newest_cycles()
        for host in hosts:
            if host not in newest or newest[host] < now:
                newest[host] = now
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self._cycles_file.with_name(f"_cycles.json.tmp-{uuid.uuid4().hex}")
        tmp.write_text(
            json.dumps({h: t.isoformat() for h, t in sorted(newest.items())}), encoding="utf-8"
        )
        os.replace(tmp, self._cycles_file)

    def remove_host(self, host: str) -> list[str]:
        """Delete every table's files of ``host`` (a host the user retires) and its cycle
        record; returns the tables it had files in. Only under ``exclusive``. The WARC
        archive keeps its records: an archive is not rewritten for a host that left."""
        removed: list[str] = []
        for table in tables.SCHEMAS:
            folder = self.partition_dir(table, host)
            if folder.is_dir():
                shutil.rmtree(folder)
                removed.append(table)
        newest = self.newest_cycles()
        if host in newest:
            del newest[host]
            tmp = self._cycles_file.with_name(f"_cycles.json.tmp-{uuid.uuid4().hex}")
            tmp.write_text(
                json.dumps({h: t.isoformat() for h, t in sorted(newest.items())}),
                encoding="utf-8",
            )
            os.replace(tmp, self._cycles_file)
        return removed

    def ensure_views(self, *, force: bool = False) -> str | None:
        """(Re)create the views when the schema changed; return a note instead of failing on a lock.

        A user's session holding the file must not fail a cycle: the views stay as they were
        (they read the same globs, so new data still shows) and the caller reports the note."""
        marker = self.root / "_views.json"
        signature = self._signature()
        current = (
            not force
            and self.duckdb_path.exists()
            and marker.exists()
            and marker.read_text() == signature
        )
        for table in tables.VIEW_TABLES:
            # the 0-row file gives a view every column: rewritten on an upgrade, or a home whose
            # files all lack a new column has a view without it (`report` failed on one)
            seed = self.table_dir(table) / SCHEMA_DIR / "data.parquet"
            if not seed.exists() or not current:
                self._atomic_write(tables.empty(table), seed)
        if current:
            return None
        try:
            con = duckdb.connect(str(self.duckdb_path))
        except duckdb.Error as exc:
            return f"views in {self.duckdb_path} not refreshed (file in use: {exc})"
        try:
            self.create_views(con)
        finally:
            con.close()
        marker.write_text(signature)
        return None

    def create_views(self, con: duckdb.DuckDBPyConnection) -> None:
        """Every table and metric view in ``con``: the views file's, or an in-memory database's
        when another process holds that file (the Parquet files are the data; views only name
        them)."""
        for table in tables.VIEW_TABLES:
            con.execute(self._view_sql(table))
        for name, sql in METRIC_VIEWS.items():
            con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {sql}')

    def query(
        self, sql: str, params: Sequence[object] | Mapping[str, object] | None = None
    ) -> pl.DataFrame:
        """Run SQL against the views in a short-lived read-only connection; values go in as
        parameters, never into the SQL text."""
        if not self.duckdb_path.exists():
            self.ensure_views()
        con = duckdb.connect(str(self.duckdb_path), read_only=True)
        try:
            return con.sql(sql, params=params or None).pl()
        finally:
            con.close()
