"""Running the `freshness` console script as a user would: a real process, its own home."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any


def freshness_command() -> list[str]:
    """The `freshness` console script of this interpreter's environment (or its module)."""
    script = Path(sys.executable).with_name("freshness")
    return (
        [str(script)] if script.exists() else [sys.executable, "-m", "freshness_pipeline.app.cli"]
    )


def freshness_env(home: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a test runs `freshness` in: FRESHNESS_HOME=home, loopback allowed, no
    inherited DAGSTER_HOME (the command keeps its Dagster instance under the home); ``env``
    last."""
    full_env = {
        **os.environ,
        "FRESHNESS_HOME": str(home),
        "FRESHNESS_ALLOW_NETWORKS": "127.0.0.0/8",
    }
    full_env.pop("DAGSTER_HOME", None)
    full_env.update(env or {})
    return full_env


def run_freshness(
    *args: str, home: Path, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run `freshness ARGS` in :func:`freshness_env`."""
    return subprocess.run(
        [*freshness_command(), *args],
        env=freshness_env(home, env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_into_closed_pipe(
    *args: str, stderr_too: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `freshness ARGS` with a stdout whose reader has gone (``| head`` once it has its
    line; here before the first byte), stderr captured, or with ``stderr_too`` into the same
    pipe (``2>&1 | head``)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "freshness_pipeline.app.cli", *args],
            stdout=write_end,
            stderr=write_end if stderr_too else subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
            env=env,
        )
    finally:
        os.close(write_end)


def run_cycles(
    home: Path, start: datetime, n: int, *, first: int = 0, every: timedelta = timedelta(hours=6)
) -> None:
    """Cycles ``first`` .. ``first + n - 1`` of an in-process crawl of ``home``, cycle k at
    ``start + k * every`` (the Dagster run `freshness cycle` makes, without the process)."""
    from freshness_pipeline.app.runner import run_cycle

    for k in range(first, first + n):
        run_cycle(home, start + k * every)


def seed_and_cycle(
    home: Path,
    seeds_csv: str,
    start: datetime,
    cycles: int,
    *,
    budget: int,
    every: timedelta = timedelta(hours=6),
    before: Callable[[int], None] | None = None,
) -> None:
    """`freshness seed` of ``seeds_csv`` (a CSV's text) into ``home``, then ``cycles`` cycles
    at ``start``, ``start + every``, ...: a user's crawl. ``before(k)`` runs ahead of cycle k
    (a test's server moves its pages on there). A command that fails fails the test."""
    seeds = home.parent / f"{home.name}-seeds.csv"
    seeds.write_text(seeds_csv)
    done = run_freshness("seed", str(seeds), home=home)
    assert done.returncode == 0, done.stderr
    for k in range(cycles):
        if before is not None:
            before(k)
        now = (start + k * every).strftime("%Y-%m-%dT%H:%M:%SZ")
        done = run_freshness("cycle", "--now", now, "--budget", str(budget), home=home)
        assert done.returncode == 0, done.stderr


def readme_sql_blocks() -> list[str]:
    """The README's ```sql examples, in order: part of the contract users copy from."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    return re.findall(r"```sql\n(.*?)```", readme, flags=re.S)


def readme_history_of(url: str) -> str:
    """The README's history of a page, asked about ``url``: the README matches a demo page by
    a LIKE pattern (the demo's ports change every run), which a test puts its own URL in."""
    history = next(b for b in readme_sql_blocks() if "FROM page_versions" in b and "LIKE" in b)
    pattern = re.search(r"url LIKE ('[^']+')", history)
    assert pattern is not None, history
    return history.replace(pattern.group(1), "'" + url.replace("'", "''") + "'")


class LoopThread:
    """An asyncio loop on a daemon thread, for test servers that must answer while the test's
    own (synchronous) code fetches from them. Closing cancels whatever the servers still run."""

    def __init__(self) -> None:
        import asyncio
        import threading

        self._asyncio = asyncio
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self._asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine, timeout: float = 10.0):
        """Run a coroutine on the loop and return its result."""
        return self._asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        asyncio = self._asyncio

        async def cancel_the_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@contextlib.contextmanager
def serve_on_loopback(handle: Callable[..., Awaitable[Any]]) -> Iterator[str]:
    """An aiohttp site on 127.0.0.1 (a free port) whose every GET goes to ``handle``, served
    from a loop thread while the test runs; yields its base URL."""
    from aiohttp import web

    async def start() -> web.AppRunner:
        app = web.Application()
        app.router.add_get("/{tail:.*}", handle)
        runner = web.AppRunner(app, shutdown_timeout=0.5)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner

    loop = LoopThread()
    runner = loop.run(start())
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        loop.run(runner.cleanup())
        loop.close()
