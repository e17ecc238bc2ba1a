"""Dagster's sqlite storage with the event log's connections kept open.

Dagster's sqlite event log opens a new SQLAlchemy engine and sqlite connection for every event
it stores (one for the run's own database, one more for the index when the event is an asset
event) and closes it afterwards. On a WAL database, a connection's first write and its close
each pay a sync of the files, and a cycle stores several hundred events (a planned and a
materialization event per asset and host bucket, the steps' events, the checks'), so the run
spends most of its bookkeeping time opening and closing files rather than writing rows.

``KeptOpenSqliteStorage`` is the same storage (the same files and tables, readable by any
Dagster process configured with ``storage: sqlite``) whose event log keeps one engine per
database for the index and the few most recent runs, with ``synchronous=NORMAL``: in WAL mode a
commit then no longer waits for the disk, and the database stays consistent after a crash of
the process (a power cut may lose the last events, never corrupt the file). The instance files
``freshness`` writes name it; an instance that names ``storage: sqlite`` works as before.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage, _event_logs_directory
from dagster._serdes import ConfigurableClassData
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import QueuePool

__all__ = ["KEPT_OPEN_RUN_SHARDS", "KeptOpenSqliteEventLogStorage", "KeptOpenSqliteStorage"]

#: run databases whose engines stay open besides the index's: a run writes to its own and the
#: index; a webserver reads a few recent ones
KEPT_OPEN_RUN_SHARDS = 2

_LIVE: weakref.WeakSet[KeptOpenSqliteEventLogStorage] = weakref.WeakSet()


def _forget_engines_in_child() -> None:
    # A forked child must not use (or close) the parent's sqlite connections.
    for storage in list(_LIVE):
        storage.close_engines(close=False)


os.register_at_fork(after_in_child=_forget_engines_in_child)


#: pages after which a database's WAL is copied back into it, and the size its WAL file is cut
#: to after that: a connection kept open keeps its WAL file, which would otherwise stay at its
#: largest (sqlite's default checkpoint is at 1,000 pages, about 4 MB, per database)
WAL_PAGES = 256
WAL_BYTES = 1 << 20


def _pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
        cursor.execute(f"PRAGMA journal_size_limit={WAL_BYTES}")
    finally:
        cursor.close()


class KeptOpenSqliteEventLogStorage(SqliteEventLogStorage):
    """The sqlite event log with one open engine per database (see the module docstring)."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        # before Dagster's own setup, which already connects when it creates the index
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._engines_lock = threading.Lock()
        super().__init__(base_dir, inst_data=inst_data)
        _LIVE.add(self)

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData | None, config_value: dict[str, str]
    ) -> KeptOpenSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        with self._engines_lock:
            engine = self._engines.get(shard)
            if engine is not None:
                self._engines.move_to_end(shard)
                return engine
            engine = create_engine(
                self.conn_string_for_shard(shard),
                poolclass=QueuePool,
                pool_size=1,
                max_overflow=4,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
            )
            event.listen(engine, "connect", _pragmas)
            self._engines[shard] = engine
            runs = [s for s in self._engines if s != "index"]
            for old in runs[: max(0, len(runs) - KEPT_OPEN_RUN_SHARDS)]:
                self._engines.pop(old).dispose()
            return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def close_engines(self, *, close: bool = True) -> None:
        """Drop every engine, closing its connections (``close=False`` in a forked child: they
        belong to the parent, which goes on using them)."""
        with self._engines_lock:
            for engine in self._engines.values():
                engine.dispose(close=close)
            self._engines.clear()

    def wipe(self) -> None:
        self.close_engines()  # the files are deleted: no engine may point at them
        super().wipe()

    def upgrade(self) -> None:
        self.close_engines()
        super().upgrade()

    def dispose(self) -> None:
        self.close_engines()
        super().dispose()


class KeptOpenSqliteStorage(DagsterSqliteStorage):
    """``storage: sqlite`` with the event log of KeptOpenSqliteEventLogStorage; the same files."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        super().__init__(base_dir, inst_data=inst_data)
        self._event_log_storage.dispose()
        self._event_log_storage = KeptOpenSqliteEventLogStorage(_event_logs_directory(base_dir))

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls, inst_data: ConfigurableClassData | None, config_value: dict[str, str]
    ) -> KeptOpenSqliteStorage:
        return cls.from_local(inst_data=inst_data, **config_value)
