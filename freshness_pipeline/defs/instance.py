"""The Dagster instance of a home: the ``dagster.yaml`` files ``freshness`` writes (one machine, or
a distributed deployment's run queue), where the instance lives, and opening it.

One template holds the storage and artifact blocks every instance shares; the single-machine and
distributed files add their run limits to it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import dagster as dg

from freshness_pipeline.defs.instance_storage import KeptOpenSqliteStorage
from freshness_pipeline.warehouse.storage import HOME_ENV

INSTANCE_STORAGE_YAML = """\
storage:
  custom:
    module: {storage_module}
    class: {storage_class}
    config:
      base_dir: {storage}
local_artifact_storage:
  module: dagster._core.storage.root
  class: LocalArtifactStorage
  config:
    base_dir: {artifacts}
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
"""

_MARKER = "# Written by freshness-pipeline for this home folder; edit freely.\n"

DAGSTER_YAML = (
    _MARKER
    + INSTANCE_STORAGE_YAML
    + """\
concurrency:
  runs:
    max_concurrent_runs: 1
    tag_concurrency_limits:
      - key: "freshness/cycle"
        limit: 1
      - key: "dagster/partition"
        value: {{applyLimitPerUniqueValue: true}}
        limit: 1
retention:
  schedule:
    purge_after_days: 30
  sensor:
    purge_after_days:
      skipped: 1
      failure: 30
      success: 30
telemetry:
  enabled: false
"""
)


def dagster_home(home: Path) -> Path:
    """``$DAGSTER_HOME`` when set (the user runs `dagster dev` with it), else ``<home>/dagster``.

    The file names its storage folders by absolute path (Dagster wants them so), which stayed
    those of wherever the home was made: a moved home logged its runs at the old place (and
    every cycle failed where that could not be written), a copy into the original's instance.
    Such a file is pointed back here (:func:`_repointed`)."""
    env = os.environ.get("DAGSTER_HOME")
    folder = Path(env) if env else home / "dagster"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML.format(**_paths(folder)))
    else:
        text = config.read_text()
        moved = _one_run_at_a_time(_repointed(text, folder))
        if moved != text:
            tmp = config.with_name(f".{config.name}.tmp")
            tmp.write_text(moved)
            os.replace(tmp, config)
    return folder


def instance_home(env: Mapping[str, str] | None = None) -> Path | None:
    """The home whose instance ``$DAGSTER_HOME`` is: ``<home>/dagster`` holding the file this
    module writes, beside that home's warehouse; None for any other instance folder."""
    env = os.environ if env is None else env
    folder_text = env.get("DAGSTER_HOME")
    if not folder_text:
        return None
    folder = Path(folder_text).expanduser().resolve()
    try:
        written = (folder / "dagster.yaml").read_text()[: len(_MARKER)]
    except (OSError, UnicodeDecodeError):
        return None
    home = folder.parent
    if folder.name != "dagster" or written != _MARKER or not (home / "warehouse").is_dir():
        return None
    return home


def adopt_instance_home() -> Path | None:
    """For a code location loaded with ``$DAGSTER_HOME`` of a home and no ``$FRESHNESS_HOME``:
    take that home as this process's (and its run and sensor processes'). Loaded so, the
    location read ``./data`` beside wherever the daemon was started, and the notification
    sensor skipped every tick for want of the home's ``[notify]`` (found by a newcomer).
    Returns the home adopted, or None."""
    if os.environ.get(HOME_ENV):
        return None
    home = instance_home()
    if home is not None:
        os.environ[HOME_ENV] = str(home)
    return home


def shared_instance_note(home: Path) -> str | None:
    """What to tell when ``$DAGSTER_HOME`` is the instance of another home: exported once for
    `dagster dev` on that home and left set, it took this home's runs and host partitions too,
    and that home's UI then listed hosts it does not crawl, with nothing said (found by a
    newcomer). An instance kept apart on purpose (a folder that is no home's) is not named."""
    env = os.environ.get("DAGSTER_HOME")
    if not env:
        return None
    folder = Path(env).resolve()
    other = folder.parent
    if folder == (home / "dagster").resolve() or not (other / "warehouse").is_dir():
        return None
    return (
        f"$DAGSTER_HOME ({env}) is the Dagster instance of another home ({other}): this home's "
        f"runs and host partitions go there too; unset DAGSTER_HOME to keep them in "
        f"{home / 'dagster'}"
    )


#: the run queue of the file this module wrote before runs went one at a time
_FOUR_RUNS = (
    '    max_concurrent_runs: 4\n    tag_concurrency_limits:\n      - key: "freshness/cycle"\n'
)


def _one_run_at_a_time(text: str) -> str:
    """``text`` with the run queue this module once wrote (4 runs at once, one cycle job at a
    time) letting one run at a time: an asset-graph run ("Materialize all", an asset backfill)
    carries no cycle tag, ran beside a cycle over the same hosts, fetched every page twice
    and lost one run's rows (found by an exploratory run). A limit a user set stays."""
    return text.replace(_FOUR_RUNS, _FOUR_RUNS.replace(": 4", ": 1"), 1)


_BASE_DIR = re.compile(r"^(?P<lead>\s*base_dir:\s*)(?P<path>\S+?)\s*$", re.MULTILINE)
_QUOTES = "'\""


def _repointed(text: str, folder: Path) -> str:
    """``text`` with its ``storage`` and ``artifacts`` folders named as ``folder``'s own where
    both name those of one other folder: the file this module wrote for the instance folder
    the home had before it was moved or copied. A file whose folders a user pointed elsewhere
    (not that pair side by side) stays as it is."""
    folder = folder.resolve()
    named = {Path(m["path"].strip(_QUOTES)) for m in _BASE_DIR.finditer(text)}
    ours = {p.parent for p in named if p.is_absolute() and p.name in ("storage", "artifacts")}
    if len(named) != 2 or len(ours) != 1 or {p.name for p in named} != {"storage", "artifacts"}:
        return text
    (before,) = ours
    if before == folder:
        return text

    def here(match: re.Match[str]) -> str:
        return f"{match['lead']}{folder / Path(match['path'].strip(_QUOTES)).name}"

    return _BASE_DIR.sub(here, text)


def open_instance(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(dagster_home(home)))


# The instance of a deployment that launches group runs through the daemon (the schedule, the
# UI): one run per bucket group at a time, however many groups run side by side. The
# single-machine file's `freshness/cycle` limit of 1 would queue a cycle's groups one after the
# other, and the group job does not carry that tag. Across machines, `storage` becomes postgres
# (docs/distributed.md); the limits stay.
DISTRIBUTED_DAGSTER_YAML = (
    INSTANCE_STORAGE_YAML
    + """\
concurrency:
  runs:
    max_concurrent_runs: {max_runs}
    tag_concurrency_limits:
      - key: "freshness/host_bucket"
        value: {{applyLimitPerUniqueValue: true}}
        limit: 1
telemetry:
  enabled: false
"""
)


def distributed_dagster_yaml(folder: Path, n_groups: int) -> str:
    """The instance configuration above for an instance folder, room for every group's run."""
    return DISTRIBUTED_DAGSTER_YAML.format(**_paths(folder), max_runs=max(1, n_groups))


def _paths(folder: Path) -> dict[str, object]:
    return {
        "storage": folder / "storage",
        "artifacts": folder / "artifacts",
        "storage_module": KeptOpenSqliteStorage.__module__,
        "storage_class": KeptOpenSqliteStorage.__name__,
    }
