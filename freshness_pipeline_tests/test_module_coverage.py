"""Every module of the package has a test that imports it (``import freshness_pipeline.x.y`` or
``from freshness_pipeline.x.y import ...``, or ``from freshness_pipeline.x import y``), read
from the test files with ``ast``. A package counts as imported when one of its modules is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import freshness_pipeline

PACKAGE_DIR = Path(freshness_pipeline.__file__).parent
TESTS_DIR = Path(__file__).parent

#: Modules that have no importing test yet: each is owed one. The list may only shrink (a
#: module here that gains a test fails this test until it is taken off).
NOT_YET: frozenset[str] = frozenset()


def package_modules() -> set[str]:
    modules = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = [PACKAGE_DIR.name, *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules.add(".".join(parts))
    return modules


def imported_names(path: Path) -> set[str]:
    """Every dotted name a file imports, and for ``from a import b`` also ``a.b``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def modules_with_tests(modules: set[str]) -> set[str]:
    tested: set[str] = set()
    for path in TESTS_DIR.glob("test_*.py"):
        for name in imported_names(path) & modules:
            parts = name.split(".")
            # importing a module runs its packages' __init__ too
            tested.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return tested


def test_the_reader_sees_each_form_of_import(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text(
        "import freshness_pipeline.web.robots\n"
        "from freshness_pipeline.science import changes\n"
        "from freshness_pipeline.config import load_config\n"
        "def f():\n    from freshness_pipeline.web.politeness import HostLedger\n"
    )
    assert {
        "freshness_pipeline.web.robots",
        "freshness_pipeline.science.changes",
        "freshness_pipeline.config",
        "freshness_pipeline.web.politeness",
    } <= imported_names(source)


def test_every_package_module_has_a_test_that_imports_it() -> None:
    modules = package_modules()
    assert "freshness_pipeline.web.robots" in modules and len(modules) > 50
    tested = modules_with_tests(modules)
    missing = sorted(modules - tested - NOT_YET)
    assert not missing, f"modules no test imports (add a test named after each): {missing}"
    done = sorted(NOT_YET & tested)
    assert not done, f"these have a test now: take them off NOT_YET: {done}"
    gone = sorted(NOT_YET - modules)
    assert not gone, f"these modules no longer exist: take them off NOT_YET: {gone}"
