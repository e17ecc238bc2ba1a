"""Shared fixtures, and the `integration` marker put on the tests that need real servers,
real Dagster runs or other processes.

A test is an integration test when its own code, a fixture it uses, or a helper of the test
package it reaches (followed through the functions and classes defined in
``freshness_pipeline_tests``) names one of ``INTEGRATION_NAMES`` or ``INTEGRATION_MODULES``: a
synthetic-web, aiohttp or asyncio server on loopback, nginx, pywb, a Dagster run (a cycle,
``materialize``, a job executed), a subprocess (the ``freshness`` command, crash runs), or the
corpus of real pages. Tests marked ``slow`` are integration tests
too. Everything else is a quick unit test: ``pytest -m "not integration"`` runs those alone.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from freshness_pipeline_tests.nginx_server import SKIP_REASON, NginxServer, find_nginx, run_nginx

#: Names (globals or attributes) whose use makes a test an integration test.
INTEGRATION_NAMES = frozenset(
    {
        # loopback HTTP servers: the synthetic web, the truth web, aiohttp apps, nginx, pywb
        "SyntheticWeb",
        "WebServer",
        "TCPSite",
        "start_server",
        "run_nginx",
        "wayback",
        # real Dagster runs
        "run_cycle",
        "run_distributed_cycle",
        "materialize",
        "execute_in_process",
        "execute_job",
        # other processes: the `freshness` command, crash runs, servers in a process of their own
        "subprocess",
        "Popen",
        "run_freshness",
    }
)

_PACKAGE = __name__.rpartition(".")[0]

#: Helper modules whose use makes a test an integration test: nginx and pywb, and the corpus of
#: real pages (every page through the whole fingerprinter, tens of seconds).
INTEGRATION_MODULES = frozenset(
    f"{_PACKAGE}.{name}" for name in ("nginx_server", "pywb_server", "real_pages")
)


def _reaches_integration(obj: object, seen: set[int]) -> bool:
    """True if the code of ``obj`` (a function or a class of the test package) names an
    integration name, itself or through the test package's functions and classes it names."""
    if id(obj) in seen:
        return False
    seen.add(id(obj))
    if isinstance(obj, type):
        return any(
            _reaches_integration(member, seen)
            for member in vars(obj).values()
            if isinstance(member, (types.FunctionType, staticmethod, classmethod, property))
        )
    if isinstance(obj, (staticmethod, classmethod)):
        return _reaches_integration(obj.__func__, seen)
    if isinstance(obj, property):
        return any(_reaches_integration(f, seen) for f in (obj.fget, obj.fset) if f is not None)
    func = getattr(obj, "__wrapped__", obj)
    if not isinstance(func, types.FunctionType):
        return False
    names: set[str] = set()
    codes = [func.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    if names & INTEGRATION_NAMES:
        return True
    # A name is looked up in the function's module, and in the modules of the test package it
    # imports inside its body (`from freshness_pipeline_tests.test_client import serve`).
    namespaces = [func.__globals__] + [
        vars(sys.modules[name])
        for name in names
        if name.startswith(_PACKAGE + ".") and name in sys.modules
    ]
    for name in names:
        for namespace in namespaces:
            target = namespace.get(name)
            if isinstance(target, types.ModuleType) and target.__name__ in INTEGRATION_MODULES:
                return True
            if _is_ours(target) and _reaches_integration(target, seen):
                return True
    return False


def _is_ours(obj: object) -> bool:
    """A function or class defined in the test package (not in the package under test)."""
    module = getattr(obj, "__module__", None) or ""
    return isinstance(obj, (type, types.FunctionType)) and (
        module == _PACKAGE or module.startswith(_PACKAGE + ".")
    )


def is_integration(item: pytest.Item) -> bool:
    if item.get_closest_marker("integration") or item.get_closest_marker("slow"):
        return True
    seen: set[int] = set()
    function: Callable[..., object] | None = getattr(item, "function", None)
    if function is not None and _reaches_integration(function, seen):
        return True
    fixtureinfo = getattr(item, "_fixtureinfo", None)
    if fixtureinfo is None:
        return False
    for name in fixtureinfo.names_closure:
        for fixturedef in fixtureinfo.name2fixturedefs.get(name, ()):
            if _reaches_integration(fixturedef.func, seen):
                return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_integration(item):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def loopback_crawl(monkeypatch: pytest.MonkeyPatch) -> None:
    """A crawl in process against servers on loopback: the allow-list opened to 127.0.0.0/8, and
    no DAGSTER_HOME of the machine's in the way (each home has its own instance)."""
    monkeypatch.setenv("FRESHNESS_ALLOW_NETWORKS", "127.0.0.0/8")
    monkeypatch.delenv("DAGSTER_HOME", raising=False)


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[NginxServer]:
    """A real nginx on 127.0.0.1:<free port> serving ``nginx.root``; skips without nginx."""
    binary = find_nginx()
    if binary is None:
        pytest.skip(SKIP_REASON)
    with run_nginx(tmp_path / "nginx", binary=binary) as server:
        yield server
