"""The stages are the cycle's steps without Dagster: a benchmark, another orchestrator or a test
calls them with frames and settings. Importing them must not pull in Dagster or the layers
above (defs, app), or that promise is broken without anyone noticing."""

import subprocess
import sys

STAGES = ["inventory", "candidates", "plan", "fetch", "state", "versions", "running_totals"]


def test_stages_import_neither_dagster_nor_the_layers_above() -> None:
    code = (
        "import sys\n"
        + "".join(f"import freshness_pipeline.stages.{name}\n" for name in STAGES)
        + "loaded = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.')"
        " or m.startswith('freshness_pipeline.defs') or m.startswith('freshness_pipeline.app'))\n"
        "print(loaded)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout[-2000:]


def test_each_asset_calls_its_stage() -> None:
    """The asset modules hold no step logic of their own: each names its stage function."""
    from pathlib import Path

    import freshness_pipeline.defs.assets as assets

    folder = Path(assets.__file__).parent
    for module, function in [
        ("inventory", "cycle_inventory"),
        ("candidates", "cycle_candidates"),
        ("plan", "cycle_plan"),
        ("fetch", "run_fetch_stage"),
        ("state", "update_state"),
    ]:
        text = (folder / f"{module}.py").read_text()
        assert f"from freshness_pipeline.stages.{module} import" in text, module
        assert f"{function}(" in text, (module, function)
