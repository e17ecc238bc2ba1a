"""The application face: the ``freshness`` command (``cli``) and what it runs: in-process
cycles and seed loads (``runner``), the demo, the report, the crawled copy's diff and export,
re-extraction, and the distributed cycle.

Imports point down: ``app`` builds on ``defs``, ``warehouse``, ``web``, ``science``, ``synthweb``
and ``config``. Nothing in the package imports ``app`` but the entry points at its top level.
"""
