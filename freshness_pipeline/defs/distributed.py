"""The distributed code location's Dagster wiring: host-bucket groups as concurrent runs, steps
on Celery workers.

One cycle is one run per group of host buckets (contiguous slices of the bucket keys, carried by
the ``dagster/asset_partition_range_start/_end`` tags), all launched at once. Their steps go to
``dagster_celery.celery_executor``, so any worker on the broker may run any asset of any group.
Groups own disjoint hosts, so concurrent runs never write the same host's files (except for
redirect hand-overs, see docs/distributed.md), and two groups never plan from the same url_state.

Nothing in the base package imports this module, and it imports ``dagster_celery`` only where a
job is built, so ``pip install freshness-pipeline`` without the ``distributed`` extra never
needs Celery. ``freshness_pipeline.distributed_definitions`` is the code location built here,
``freshness_pipeline.celery_app`` what the workers start, and ``app.distributed`` one cycle from
a script or cron.

The broker and result backend come from ``FRESHNESS_CELERY_BROKER`` and
``FRESHNESS_CELERY_BACKEND`` (default: the broker), read by every process that submits or runs
steps, so one environment configures the run processes and the workers alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg

from freshness_pipeline.config import load_config
from freshness_pipeline.defs.assets.common import GROUP
from freshness_pipeline.defs.assets.retention import NAME as RETENTION
from freshness_pipeline.defs.graph import build_resources, cycle_graph
from freshness_pipeline.defs.partitions import bucket_keys, range_tags
from freshness_pipeline.defs.schedules import CRON_ENV, DEFAULT_CRON, cycle_run_config
from freshness_pipeline.warehouse.storage import Warehouse

BROKER_ENV = "FRESHNESS_CELERY_BROKER"
BACKEND_ENV = "FRESHNESS_CELERY_BACKEND"
GROUPS_ENV = "FRESHNESS_BUCKET_GROUPS"
DEFAULT_BROKER = "redis://127.0.0.1:6379/0"
DEFAULT_GROUPS = 2

JOB_NAME = "freshness_cycle_celery"
SCHEDULE_NAME = "freshness_cycle_groups_schedule"
# Every group run of one cycle carries the same value: how a cycle's runs are found again.
CYCLE_ID_TAG = "freshness/cycle_id"
# Not freshness/cycle: the single-machine dagster.yaml allows one run with that tag at a time,
# which would queue a cycle's group runs one after the other. Group runs are limited per group
# instead (freshness/host_bucket, one run per unique value; see docs/distributed.md).
GROUP_RUN_TAG = "freshness/group_run"

# Settings the executor passes to the Celery app it submits through. A worker app must agree on
# queues and priorities, which make_app fixes for both sides.
CELERY_CONFIG_SOURCE: dict[str, object] = {"broker_connection_retry_on_startup": True}


def broker_urls(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(broker, backend) for the worker app, from the same variables as the executor."""
    env = os.environ if env is None else env
    broker = env.get(BROKER_ENV) or DEFAULT_BROKER
    return broker, env.get(BACKEND_ENV) or broker


def bucket_groups(n_buckets: int, n_groups: int) -> list[tuple[str, str]]:
    """``n_groups`` contiguous (first, last) slices of the bucket keys, sizes differing by at
    most one. Contiguous because a run selects its partitions as one key range."""
    if n_buckets < 1:
        raise ValueError("bucket groups need host_buckets >= 1 in freshness.toml")
    if not 1 <= n_groups <= n_buckets:
        raise ValueError(f"groups must be 1..{n_buckets} (the bucket count), not {n_groups}")
    keys = bucket_keys(n_buckets)
    size, extra = divmod(n_buckets, n_groups)
    groups: list[tuple[str, str]] = []
    start = 0
    for i in range(n_groups):
        end = start + size + (1 if i < extra else 0)
        groups.append((keys[start], keys[end - 1]))
        start = end
    return groups


def group_label(first: str, last: str) -> str:
    return first if first == last else f"{first}...{last}"


def group_run_tags(first: str, last: str, cycle_id: str) -> dict[str, str]:
    """A group run's tags: its bucket range, its group (the per-group run limit keys on
    ``freshness/host_bucket``) and its cycle."""
    return {
        **range_tags(first, last, bucket=group_label(first, last)),
        CYCLE_ID_TAG: cycle_id,
        GROUP_RUN_TAG: "true",
    }


def celery_executor_def() -> dg.ExecutorDefinition:
    """The stock celery executor with broker and backend read from the environment when a run
    starts, so the definitions carry no address."""
    from dagster_celery import celery_executor  # the `distributed` extra

    def source(name: str) -> object:
        return {"env": name} if os.environ.get(name) else None

    broker = source(BROKER_ENV) or DEFAULT_BROKER
    return celery_executor.configured(
        {
            "broker": broker,
            "backend": source(BACKEND_ENV) or broker,
            "config_source": CELERY_CONFIG_SOURCE,
        },
        name="celery_from_env",
    )


def build_group_schedule(host_buckets: int, n_groups: int) -> dg.ScheduleDefinition:
    """Like the single-machine schedule, but each tick asks for one run per bucket group, with
    the tick as every run's ``now``; the daemon launches them side by side within the run
    queue's limits."""
    groups = bucket_groups(host_buckets, n_groups)

    @dg.schedule(
        name=SCHEDULE_NAME,
        job_name=JOB_NAME,
        cron_schedule=os.environ.get(CRON_ENV, DEFAULT_CRON),
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )
    def freshness_cycle_groups_schedule(context: dg.ScheduleEvaluationContext):
        tick = context.scheduled_execution_time.isoformat()
        return [
            dg.RunRequest(
                run_key=f"cycle-{tick}-{group_label(first, last)}",
                run_config=cycle_run_config(tick),
                tags=group_run_tags(first, last, cycle_id=tick),
            )
            for first, last in groups
        ]

    return freshness_cycle_groups_schedule


def configured_host_buckets(home: str, host_buckets: int | None) -> int:
    """The bucket count a distributed cycle splits into groups: given, or the home's setting
    (which it must have: one partition per host would not split into group runs)."""
    if host_buckets is not None:
        return host_buckets
    n = load_config(Warehouse(home or None).home).host_buckets
    if not n:
        raise ValueError(
            "the distributed cycle runs host buckets: set [partitioning] host_buckets in "
            "freshness.toml (a per-host partition per run would not split into groups)"
        )
    return n


def build_distributed_definitions(
    home: str = "", host_buckets: int | None = None, n_groups: int | None = None
) -> dg.Definitions:
    """The cycle's assets and checks over host buckets, with the celery job and the group
    schedule. ``home`` empty: ``$FRESHNESS_HOME`` in every process, which is how a deployment
    points its run processes and workers at one warehouse."""
    n_buckets = configured_host_buckets(home, host_buckets)
    groups = n_groups or int(os.environ.get(GROUPS_ENV, DEFAULT_GROUPS))
    assets, checks = cycle_graph(n_buckets)
    # Not the retention step: it prunes the whole home, and a cycle's group runs go side by
    # side, each still writing its own hosts' files while another would rewrite them.
    job = dg.define_asset_job(
        JOB_NAME,
        selection=dg.AssetSelection.groups(GROUP) - dg.AssetSelection.assets(RETENTION),
        description="One crawl cycle for a group of host buckets, steps on Celery workers.",
        executor_def=celery_executor_def(),
    )
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        jobs=[job],
        schedules=[build_group_schedule(n_buckets, min(groups, n_buckets))],
        resources=build_resources(home),
    )
