"""freshness_pipeline/celery_app.py, the app the step workers run
(``celery -A freshness_pipeline.celery_app worker``): its broker and result backend come from
``FRESHNESS_CELERY_BROKER`` and ``FRESHNESS_CELERY_BACKEND`` as the executor's do, it registers
the task the executor submits, on the queue and priorities the executor submits to, and a
worker never prefetches a second step. Loaded afresh per test, as a worker process loads it; no
broker is contacted."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from dagster_celery.config import TASK_EXECUTE_PLAN_NAME

from freshness_pipeline.defs.distributed import BACKEND_ENV, BROKER_ENV, DEFAULT_BROKER

MODULE = "freshness_pipeline.celery_app"
BROKER = "redis://127.0.0.1:1/3"  # nothing listens there; never contacted
BACKEND = "redis://127.0.0.1:1/4"

#: execute_plan is a shared task: an app made after the first one in the same process (the
#: module loaded again, which a worker never does) is told its name is taken already
pytestmark = pytest.mark.filterwarnings("ignore::celery.exceptions.DuplicateTaskNameWarning")


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(BROKER_ENV, raising=False)
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    sys.modules.pop(MODULE, None)
    yield
    sys.modules.pop(MODULE, None)


def load() -> ModuleType:
    import freshness_pipeline.celery_app as worker

    return worker


@pytest.mark.parametrize(
    ("env", "broker", "backend"),
    [
        ({}, DEFAULT_BROKER, DEFAULT_BROKER),
        ({BROKER_ENV: BROKER}, BROKER, BROKER),  # the backend defaults to the broker
        ({BROKER_ENV: BROKER, BACKEND_ENV: BACKEND}, BROKER, BACKEND),
    ],
)
def test_broker_and_backend_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, fresh: None, env: dict, broker: str, backend: str
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    app = load().app
    assert app.conf.broker_url == broker
    assert app.conf.result_backend == backend


def test_the_worker_runs_the_executors_task_on_its_queue_one_step_at_a_time(
    monkeypatch: pytest.MonkeyPatch, fresh: None
) -> None:
    monkeypatch.setenv(BROKER_ENV, BROKER)
    worker = load()
    app = worker.app
    assert worker.execute_plan.name == TASK_EXECUTE_PLAN_NAME
    assert app.tasks[TASK_EXECUTE_PLAN_NAME].app is app  # registered with this app
    # where the executor sends it: the dagster queue, with priorities
    route = app.conf.task_routes[TASK_EXECUTE_PLAN_NAME]
    assert route["queue"] == "dagster"
    (queue,) = app.conf.task_queues
    assert queue.name == "dagster" and queue.queue_arguments == {"x-max-priority": 10}
    assert app.conf.task_queue_max_priority == 10
    # a step runs for minutes: no worker sits on a second one while another idles
    assert app.conf.worker_disable_prefetch is True
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.broker_connection_retry_on_startup is True


def test_the_documented_command_loads_the_app(tmp_path: Path) -> None:
    """`celery -A freshness_pipeline.celery_app report` reads the app as a worker would, and
    shows its settings without connecting to the broker."""
    celery = Path(sys.executable).with_name("celery")
    command = [str(celery)] if celery.exists() else [sys.executable, "-m", "celery"]
    env = {**os.environ, BROKER_ENV: BROKER, BACKEND_ENV: BACKEND}
    done = subprocess.run(
        [*command, "-A", "freshness_pipeline.celery_app", "report"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"results:{BACKEND}" in done.stdout
    assert "worker_disable_prefetch: True" in done.stdout
    assert "'execute_plan': {'queue': 'dagster'" in done.stdout
