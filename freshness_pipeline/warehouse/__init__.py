"""The code that owns the home's files: the Parquet tables and their schemas, the DuckDB views
and the metric SQL, the seeds table's rows, retention, the WARC archive (``archive/``) and the
crash points that test their writes.

Imports point down: ``warehouse`` imports only ``science`` and ``config``; never ``web``,
``defs`` or ``app``.
"""
