"""Shared fixtures of the test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from freshness_pipeline_tests.nginx_server import SKIP_REASON, NginxServer, find_nginx, run_nginx


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[NginxServer]:
    """A real nginx on 127.0.0.1:<free port> serving ``nginx.root``; skips without nginx."""
    binary = find_nginx()
    if binary is None:
        pytest.skip(SKIP_REASON)
    with run_nginx(tmp_path / "nginx", binary=binary) as server:
        yield server
