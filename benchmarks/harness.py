"""How the benchmarks measure a process, and run a phase in a child so its figures are its own.

A phase run in the benchmark's own interpreter would share its peak RSS with everything that
interpreter did before, so the benchmarks run each phase in a fresh one: the script itself again
with a hidden flag (``run_child``), which answers with one JSON line (``send_result``) and may
report progress on the way (``send_progress``). When the child is one of the product's commands
instead, ``run_measured`` takes its CPU from wait4, which also counts every process it reaped,
and samples its memory from /proc while it runs.

CPU seconds are user + system time, which other jobs on a shared machine move much less than
wall time. Only the standard library, so that a child in another venv (Scrapy's) imports it too.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

BENCHMARKS = Path(__file__).resolve().parent

# ---- this process and others, from getrusage and /proc ----------------------------------------


def own_cpu_seconds() -> float:
    """User + system CPU of this process, all its threads (aiohttp's resolver, sqlite, polars'
    pool) included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def reaped_children_cpu_seconds() -> float:
    """User + system CPU of every child this process has waited for: read before and after a
    command (wrk) that ``subprocess.run`` waits for, the difference is the command's."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU so far of a process this one did not start as a measured child (the
    benchmark's nginx), from /proc; NaN once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(field_name: str, pid: int | str = "self") -> int | None:
    """A kB field of /proc/<pid>/status (VmRSS, VmHWM); None when the process is gone or, as a
    zombie, has no memory left to report."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def own_rss_mb() -> float:
    """This process's resident set now (VmRSS)."""
    kb = status_kb("VmRSS")
    return float("nan") if kb is None else kb / 1024


def own_peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM), what an OOM killer weighs: since it started,
    or since the last ``reset_own_peak_rss``."""
    kb = status_kb("VmHWM")
    return float("nan") if kb is None else kb / 1024


def reset_own_peak_rss() -> None:
    """VmHWM back to the current RSS, so that the next phase's peak is its own and not that of
    what ran before it in this process (Linux >= 4.0; elsewhere the peak stays cumulative)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def tree_rss_kb(root: int) -> int:
    """The summed VmRSS of ``root`` and its descendants (children lists from /proc): what a
    command that starts workers holds at once, which no one process's peak tells."""
    total, stack, seen = 0, [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += status_kb("VmRSS", pid) or 0
        with contextlib.suppress(OSError, ValueError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                stack.extend(int(c) for c in (task / "children").read_text().split())
    return total


class TimeInside:
    """Wall and CPU seconds spent inside one function, summed over its calls: ``owner.name`` is
    replaced by a wrapper until ``restore``. What a step's total hides, the network part of the
    fetch step for one, is told apart this way without touching the product's code."""

    def __init__(self, owner: object, name: str) -> None:
        self.owner, self.name = owner, name
        self.original = getattr(owner, name)
        self.seconds = self.cpu_seconds = 0.0

        def timed(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), own_cpu_seconds()
            try:
                return self.original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - wall
                self.cpu_seconds += own_cpu_seconds() - cpu

        setattr(owner, name, timed)

    def reset(self) -> None:
        self.seconds = self.cpu_seconds = 0.0

    def restore(self) -> None:
        setattr(self.owner, self.name, self.original)


# ---- the machine, for the line under a report --------------------------------------------------


def cpu_model() -> str:
    """The CPU's model name, for the machine line under a report: figures from different
    machines are not comparable."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def memory_gib() -> float:
    """Total RAM (MemTotal), for the same line: whether a peak RSS was near what the machine
    has."""
    kb = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kb = int(line.split()[1])
    return float("nan") if kb is None else kb / 1024**2


# ---- a command, measured from outside -----------------------------------------------------------


@dataclass
class MeasuredRun:
    """What ``run_measured`` saw of one command."""

    returncode: int
    wall_s: float
    #: user + system of the command and of every process it reaped (wait4's rusage)
    cpu_s: float
    #: wait4's ru_maxrss: the largest peak among those processes; Linux starts a forked child's
    #: at its parent's RSS, so for a small command it can be the benchmark's own
    max_rss_kb: int
    stdout: str = ""
    stderr: str = ""
    #: (epoch seconds, the probe's kB) while the command ran
    samples: list[tuple[float, int]] = field(default_factory=list)

    @property
    def peak_sample_kb(self) -> int:
        return max((kb for _, kb in self.samples), default=0)


def run_measured(
    argv: Sequence[str],
    *,
    probe: Callable[[int], int | None],
    every_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
) -> MeasuredRun:
    """Run ``argv`` to its end with ``probe(pid)`` (kB, None to skip) sampled every ``every_s``
    and its pipes (``subprocess.PIPE``) read on the way. Only wait4 reaps the command: a wait or
    poll from subprocess would reap it first and take its resource usage with it."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=stdout, stderr=stderr)
    samples: list[tuple[float, int]] = []
    texts: dict[str, str] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every_s):
            kb = probe(process.pid)
            if kb is not None:
                samples.append((time.time(), kb))

    def read(name: str, pipe: IO[bytes]) -> None:
        texts[name] = pipe.read().decode(errors="replace")

    threads = [threading.Thread(target=sample, daemon=True)]
    for name, pipe in (("stdout", process.stdout), ("stderr", process.stderr)):
        if pipe is not None:
            threads.append(threading.Thread(target=read, args=(name, pipe), daemon=True))
    for thread in threads:
        thread.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        done.set()
    wall = time.perf_counter() - started
    for thread in threads:
        thread.join()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    return MeasuredRun(
        returncode=process.returncode,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_rss_kb=usage.ru_maxrss,
        stdout=texts.get("stdout", ""),
        stderr=texts.get("stderr", ""),
        samples=samples,
    )


def publish(text: str, out: str | Path | None) -> None:
    """A benchmark's report: printed after a blank line, and written to ``out`` when given."""
    print()
    print(text)
    if out:
        Path(out).write_text(text + "\n")


# ---- a phase in a child: the script itself again ------------------------------------------------

RESULT = "RESULT "
PROGRESS = "PROGRESS "


def send_result(result: Mapping[str, Any]) -> None:
    """The child's answer, on a line of its own that ``run_child`` finds among whatever else
    the child's libraries print."""
    print(RESULT + json.dumps(result), flush=True)


def send_progress(text: str) -> None:
    """A line the parent prints as it comes, so a long child is seen to move."""
    print(PROGRESS + text, flush=True)


def result_in(lines: Iterable[str]) -> dict[str, Any] | None:
    """The last result line's JSON among a child's output lines, or None."""
    found = None
    for line in lines:
        if line.startswith(RESULT):
            found = json.loads(line[len(RESULT) :])
    return found


def run_child(
    script: str,
    args: Sequence[str],
    *,
    what: str,
    env: Mapping[str, str] | None = None,
    stderr_log: Path | None = None,
) -> dict[str, Any]:
    """Run ``script`` (the benchmark itself, with its hidden child flag) in a fresh interpreter
    and return its result, printing its progress lines as they come. Its stderr goes to
    ``stderr_log`` (Dagster's warnings can be many), or to a temporary file; a child that fails
    or sends no result stops the benchmark with that stderr's tail, named ``what``."""
    cmd = [sys.executable, script, *args]
    result = None
    with (
        open(stderr_log, "w+", errors="replace")
        if stderr_log
        else tempfile.TemporaryFile("w+", errors="replace")
    ) as log:
        process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith(PROGRESS):
                    print("  " + line[len(PROGRESS) :].rstrip(), flush=True)
                elif line.startswith(RESULT):
                    result = json.loads(line[len(RESULT) :])
            process.wait()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        if process.returncode != 0 or result is None:
            log.seek(0)
            sys.stderr.write(log.read()[-4000:])
            raise SystemExit(f"{what} failed (exit {process.returncode})")
    return result


def idle_peak_rss_mb(modules: Sequence[str]) -> float:
    """Peak RSS of a fresh interpreter that only imports ``modules``: the floor under every
    child's figure, which the reports give beside them. NaN (and the child's stderr) if it
    fails, so that a long run still reports the rest."""
    code = f"import {', '.join(modules)}\nimport harness\nprint(harness.own_peak_rss_mb())"
    # run beside this file, whose folder `-c` puts first on sys.path
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=BENCHMARKS
    )
    try:
        return float(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        sys.stderr.write(done.stderr[-2000:])
        return float("nan")
