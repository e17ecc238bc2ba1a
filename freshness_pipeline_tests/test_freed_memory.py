"""After the fetch stage, the process hands the C heap's freed pages back (glibc malloc_trim),
so the steps after it do not start with the fetch's garbage counted against the process; off
glibc that is a no-op, not an error."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

from freshness_pipeline.stages import fetch

# Threads (the fetch stage's extraction runs in asyncio.to_thread) each get a glibc arena; the
# objects are over pymalloc's 512 bytes, so they come from malloc, and every 50th is kept so the
# arenas stay fragmented, as a fetch leaves them.
FRAGMENTED_HEAP = """
import os, sys, threading
from freshness_pipeline.stages.fetch import release_freed_memory

def rss_mb():
    with open("/proc/self/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024

kept = []
def work():
    xs = [os.urandom(600) + b"x" * (i % 2000) for i in range(60_000)]
    kept.append(xs[::50])
    del xs
threads = [threading.Thread(target=work) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
before = rss_mb()
release_freed_memory()
print(before, rss_mb())
"""


@pytest.mark.skipif(fetch._MALLOC_TRIM is None, reason="not glibc")
def test_the_heap_freed_by_many_threads_goes_back_to_the_system():
    done = subprocess.run(
        [sys.executable, "-c", FRAGMENTED_HEAP], capture_output=True, text=True, check=True
    )
    before, after = map(float, done.stdout.split())
    assert before - after > 100, (before, after)  # some 350 MB freed, kept mapped until then


def test_without_malloc_trim_it_is_a_no_op(monkeypatch):
    class NoTrim:  # a C library without the function (musl, macOS)
        pass

    monkeypatch.setattr(ctypes, "CDLL", lambda name: NoTrim())
    assert fetch._malloc_trim() is None

    def no_library(name):
        raise OSError("no C library")

    monkeypatch.setattr(ctypes, "CDLL", no_library)
    assert fetch._malloc_trim() is None
    monkeypatch.setattr(fetch, "_MALLOC_TRIM", None)
    fetch.release_freed_memory()
