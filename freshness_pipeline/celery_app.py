"""The Celery app the step workers run:

    celery -A freshness_pipeline.celery_app worker -c 1 -n w1@%h

Its queues, routes and priorities come from ``dagster_celery.make_app``, as on the submitting
side, and its broker from ``FRESHNESS_CELERY_BROKER`` (and ``FRESHNESS_CELERY_BACKEND``), as for
the executor. A task names its job by a pointer the worker imports and rebuilds, so the worker
needs the project installed, not a code location server. Needs the ``distributed`` extra.
"""

from dagster_celery.executor import CeleryExecutor
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from freshness_pipeline.defs.distributed import CELERY_CONFIG_SOURCE, broker_urls

_broker, _backend = broker_urls()
app = make_app(
    CeleryExecutor.for_cli(
        broker=_broker,
        backend=_backend,
        # A step can run for minutes: a worker that prefetched a second step would sit on it
        # while another worker idles (Redis brokers only, celery >= 5.6).
        config_source={**CELERY_CONFIG_SOURCE, "worker_disable_prefetch": True},
    ).app_args()
)

execute_plan = create_task(app)
