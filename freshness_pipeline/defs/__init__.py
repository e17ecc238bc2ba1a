"""The Dagster face: the cycle's assets (``assets/``), their checks, the job and the graph that
builds them for any partitioning, the schedule and the sensors, partitions, resources, the IO
manager and the instance's upkeep, with what only they use (metadata plots, change
notifications, the reading of a cycle's time). ``freshness_pipeline.definitions`` assembles them.

Imports point down: ``defs`` builds on ``warehouse``, ``web``, ``science`` and ``config``, and
never imports ``app``.
"""
