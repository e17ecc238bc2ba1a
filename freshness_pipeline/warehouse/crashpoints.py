"""Named points where a test can kill the process with SIGKILL, to prove crash safety.

``FRESHNESS_CRASH_AT=<point>[#<n>][@<seconds>]`` kills the process at the n-th time (default
first) the named point is reached, or, with ``@seconds``, that long after it (from a timer
thread, so the kill lands in the middle of whatever runs then, e.g. the fetches). Unset, a
point costs one environment lookup. The points are listed in POINTS (and the retention
step's in PRUNE_POINTS) so tests can sweep them.
"""

from __future__ import annotations

import os
import signal
import threading

ENV = "FRESHNESS_CRASH_AT"
_TABLES = (
    "robots",
    "url_inventory",
    "url_candidates",
    "revisit_plan",
    "fetch_results",
    "url_state",
)
_ASSETS = (
    "url_inventory",
    "url_candidates",
    "revisit_plan",
    "fetch_results",
    "url_state",
    "retention",
)
POINTS = (
    *(f"asset:{a}:start" for a in _ASSETS),
    *(f"write:{t}:{stage}" for t in _TABLES for stage in ("temp_written", "replaced")),
    "write:fetch_log:replaced",
    # the WARC archive: a record written into a file not yet complete, a file renamed
    # complete but not yet indexed
    "archive:record_written",
    "archive:renamed",
)
#: Inside the retention step (retention.prune_history), reached only when the home's
#: [retention] settings expire something, so not in POINTS (whose sweep runs on a home that
#: keeps everything). In the order they are reached: the originals kept revisits need copied
#: into a kept file (nothing deleted yet); after each page_versions or changes file a prune
#: rewrote or removed (``#n`` for the n-th, e.g. between two files of one host); every table
#: moved off the expired files, none deleted; after each expired WARC file deleted with its
#: index (``#1``: some gone, the others not yet).
PRUNE_POINTS = (
    "prune:archive_prepared",
    "prune:history_rewritten",
    "prune:tables_moved",
    "prune:warc_removed",
)
#: Inside `freshness undo` (warehouse/undo.py): after the n-th file put back, after the n-th
#: file written since removed. A restore killed there is finished by running it again.
UNDO_POINTS = ("undo:file_restored", "undo:file_removed")
_hits: dict[str, int] = {}
_lock = threading.Lock()


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def crash_point(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, delay = spec.partition("@")
    point, _, nth = point.partition("#")
    if point != name:
        return
    with _lock:
        _hits[name] = _hits.get(name, 0) + 1
        if _hits[name] != int(nth or 1):
            return
    if delay:
        timer = threading.Timer(float(delay), _kill)
        timer.daemon = True
        timer.start()
    else:
        _kill()
