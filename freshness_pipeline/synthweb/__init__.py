"""The synthetic web: a seeded world of sites and pages with known change processes, served over
loopback HTTP, plus the ground truth that scores a crawler's freshness.

Used only by the demo, tests and benchmarks; the pipeline itself never imports it, and the
crawler only ever sees it through HTTP.
"""

from .server import RequestLog, RequestRecord, SimClock, SyntheticWeb
from .truth import Truth
from .world import (
    BEHAVIOURS,
    CHO2000_BANDS,
    DEFAULT_START,
    Page,
    SiteSpec,
    World,
    build_world,
    default_sites,
)

__all__ = [
    "BEHAVIOURS",
    "CHO2000_BANDS",
    "DEFAULT_START",
    "Page",
    "RequestLog",
    "RequestRecord",
    "SimClock",
    "SiteSpec",
    "SyntheticWeb",
    "Truth",
    "World",
    "build_world",
    "default_sites",
]
