"""`freshness hosts` lists the seeded hosts; `--retire` takes one out of the crawl: its files in
every table, its Dagster partition, its cycle record; the other hosts untouched."""

from __future__ import annotations

from datetime import UTC, datetime

from typer.testing import CliRunner

from freshness_pipeline.app.cli import app
from freshness_pipeline.app.runner import load_seeds, open_instance, run_cycle
from freshness_pipeline.defs.partitions import registered_hosts
from freshness_pipeline.warehouse.storage import Warehouse

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
HOSTS = ["a.example", "b.example", "c.example"]


def test_hosts_are_listed_and_one_is_retired_with_its_tables(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    lines = [f"https://{h}/p/{k}" for h in HOSTS for k in range(3)]
    load_seeds(tmp_path, ("url\n" + "\n".join(lines) + "\n").encode(), added_at=T0)
    run_cycle(tmp_path, T0, dry_run=True)
    wh = Warehouse(tmp_path)
    wh.record_cycle(HOSTS, T0)
    runner = CliRunner()
    home = ["--home", str(tmp_path)]

    listed = runner.invoke(app, ["hosts", *home], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    for host in HOSTS:
        assert host in listed.output
    assert "3 hosts" in listed.output

    # not on a terminal, retiring asks for --yes and removes nothing
    asked = runner.invoke(app, ["hosts", *home, "--retire", "b.example"])
    assert asked.exit_code == 2 and "--yes" in asked.output
    assert "b.example" in wh.hosts_in("seeds")
    unknown = runner.invoke(app, ["hosts", *home, "--retire", "zz.example", "--yes"])
    assert unknown.exit_code == 2 and "zz.example" in unknown.output

    done = runner.invoke(app, ["hosts", *home, "--retire", "B.example", "--yes"])
    assert done.exit_code == 0, done.output
    assert "retired b.example" in done.output
    for table in ("seeds", "url_inventory", "url_candidates", "revisit_plan"):
        assert wh.hosts_in(table) == ["a.example", "c.example"], table
    assert registered_hosts(open_instance(tmp_path)) == ["a.example", "c.example"]
    assert set(wh.newest_cycles()) == {"a.example", "c.example"}
    after = runner.invoke(app, ["hosts", *home], env={"COLUMNS": "200"})
    assert "2 hosts" in after.output and "b.example" not in after.output
    # the crawl goes on without it
    assert sorted(run_cycle(tmp_path, T0, dry_run=True).hosts) == ["a.example", "c.example"]


def test_a_bad_config_is_an_error_and_a_portless_name_is_told_its_key(tmp_path, monkeypatch):
    """`freshness hosts` on a home with a bad freshness.toml ended in a traceback (exit 1)
    where `cycle` says what is wrong and exits 2; `--retire` of a host named without its port
    said only "unknown host" (found by a newcomer following the README)."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    load_seeds(tmp_path, b"url\nhttp://b.example:8080/p\n", added_at=T0)
    runner = CliRunner()
    home = ["--home", str(tmp_path)]
    portless = runner.invoke(app, ["hosts", *home, "--retire", "b.example", "--yes"])
    assert portless.exit_code == 2, portless.output
    assert "did you mean b.example:8080?" in portless.output
    (tmp_path / "freshness.toml").write_text("[planing]\nbudget = 3\n")
    for args in ([], ["--retire", "b.example:8080", "--yes"]):
        bad = runner.invoke(app, ["hosts", *home, *args])
        assert bad.exit_code == 2, bad.output
        assert "unknown section(s) ['planing']" in bad.output
        assert "Traceback" not in bad.output
    assert Warehouse(tmp_path).hosts_in("seeds") == ["b.example:8080"]  # nothing retired
