"""`freshness demo` ends with the report the README promises: the same tables that
`freshness report` prints for the demo's home afterwards."""

from __future__ import annotations

from freshness_pipeline_tests.support import run_freshness


def test_demo_prints_the_same_report_as_freshness_report(tmp_path):
    home = tmp_path / "demo"
    demo = run_freshness("demo", "--cycles", "2", "--home", str(home), home=home, timeout=180)
    assert demo.returncode == 0, demo.stderr
    assert "round robin" in demo.stdout  # the demo's own yardstick summary stays
    report = run_freshness("report", home=home)
    assert report.returncode == 0, report.stderr
    tables = report.stdout.split("SQL: open")[0]
    assert "By host" in tables and "By URL class" in tables
    assert tables in demo.stdout
