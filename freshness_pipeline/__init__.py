"""freshness-pipeline: keep a crawled copy of many web pages fresh for the least fetching.

The package is in layers whose imports point down only (docs/architecture.md, "Package
layout"): ``app`` (the ``freshness`` command and what it runs) over ``defs`` (the Dagster
assets, checks, job, schedule and sensors) over ``web`` (the network), ``warehouse`` (the home's
files) and ``science`` (pure functions); ``config`` is read by every layer. The other modules at
this level are the entry points that deployments name by module path: ``definitions`` and
``distributed_definitions`` (``dagster dev -m``), ``celery_app`` (``celery -A``) and
``distributed`` (``python -m``).
"""
