"""The code location of the distributed deployment:
``dagster dev -m freshness_pipeline.distributed_definitions``.

Every process of the deployment (webserver, daemon, run processes, Celery workers) loads it with
the same ``FRESHNESS_HOME`` (whose ``freshness.toml`` must set ``host_buckets``),
``FRESHNESS_CELERY_BROKER`` and ``FRESHNESS_BUCKET_GROUPS``. Needs the ``distributed`` extra.
"""

from freshness_pipeline.defs.distributed import build_distributed_definitions

defs = build_distributed_definitions()
