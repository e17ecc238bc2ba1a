"""`freshness demo` ends with the report the README promises: the same tables that
`freshness report` prints for the demo's home afterwards."""

from __future__ import annotations

import re

import duckdb

from freshness_pipeline_tests.support import readme_sql_blocks, run_freshness


def test_demo_prints_the_same_report_as_freshness_report(tmp_path):
    home = tmp_path / "demo"
    # three cycles: the second fetches only first copies (the demo's seeds still wait, and
    # pages seen once are not checked again before them), so the third holds the first change
    demo = run_freshness("demo", "--cycles", "3", "--home", str(home), home=home, timeout=180)
    assert demo.returncode == 0, demo.stderr
    assert "round robin" in demo.stdout  # the demo's own yardstick summary stays
    report = run_freshness("report", home=home)
    assert report.returncode == 0, report.stderr
    tables = report.stdout.split("SQL: open")[0]
    assert "By host" in tables and "By URL class" in tables
    assert tables in demo.stdout
    # and then the crawled copy: one page's newest change as `freshness diff` shows it (the
    # diff the command prints for that URL), and the archive's WARC files
    marker = "as `freshness diff` shows it:\n"
    assert marker in demo.stdout, demo.stdout[-2000:]
    url = demo.stdout.split(marker)[0].rsplit("The newest change of ", 1)[1].strip().rstrip(",")
    diff = run_freshness("diff", url, home=home)
    assert diff.returncode == 0, diff.stderr
    shown = demo.stdout.split(marker)[1].splitlines()
    assert shown[0] == diff.stdout.splitlines()[0] and shown[0].startswith("--- ")
    assert any(line.startswith("+") and not line.startswith("+++") for line in shown)
    archive = home / "archive"
    assert f"WARC files in {archive}" in demo.stdout and list(archive.glob("*.warc.gz"))
    # the way to SQL that works after `pip install` comes first; the DuckDB CLI is optional
    python, cli = demo.stdout.index("  Python:"), demo.stdout.index("duckdb -readonly")
    assert python < cli and "if installed" in demo.stdout[cli - 200 : cli]
    _readme_queries_answer_on_the_demo(home)


def _readme_queries_answer_on_the_demo(home):
    """A newcomer's first SQL is the README's, on the demo's home: the one-URL history asked
    for a URL the demo has no page of (0 rows), and the queries measuring from the newest
    cycle found it by reading all of fetch_log, one file per host and cycle, where the metric
    views read fetch_totals."""
    blocks = readme_sql_blocks()
    assert not [b for b in blocks if re.search(r"max\(fetched_at\)\s+FROM\s+fetch_log", b)]
    con = duckdb.connect(str(home / "freshness.duckdb"), read_only=True)
    try:
        rows = {block: con.sql(block).fetchall() for block in blocks}
    finally:
        con.close()
    history = next(b for b in blocks if "FROM page_versions" in b and "observed_at" in b)
    assert rows[history], history
    recent = next(b for b in blocks if "INTERVAL 1 DAY" in b)
    assert rows[recent], recent
