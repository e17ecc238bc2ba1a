"""The run's resources: freshness.toml is read once per run, however many steps use it, and
read again by the next run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from freshness_pipeline.app.runner import load_seeds, open_instance, run_cycle
from freshness_pipeline.config import load_config
from freshness_pipeline.defs import resources

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)


def test_each_run_reads_freshness_toml_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "freshness.toml").write_text('[planning]\nobjective = "freshness"\n')
    load_seeds(home, b"url\nhttps://a.example/1\nhttps://b.example/2\n", added_at=T0)
    reads: list[Path] = []

    def counted(path: Path):  # the resource's read, counted
        reads.append(path)
        return load_config(path)

    monkeypatch.setattr(resources, "load_config", counted)
    instance = open_instance(home)
    for k in range(2):
        run_cycle(home, T0 + k * timedelta(hours=6), dry_run=True, instance=instance)
        # several steps use the settings; the file is read once a run
        assert len(reads) == k + 1, reads


def test_outside_a_run_the_resource_reads_the_file_when_asked(tmp_path: Path) -> None:
    (tmp_path / "freshness.toml").write_text('[planning]\nobjective = "capture"\n')
    resource = resources.WarehouseResource(home=str(tmp_path))
    assert resource.pipeline_config().objective == "capture"
