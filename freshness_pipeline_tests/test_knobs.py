"""science.knobs: a knob out of range is refused with its name; the settings built on it say so."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from freshness_pipeline.science.knobs import require
from freshness_pipeline.science.validators import TrustRules
from freshness_pipeline.web.client import FetchSettings
from freshness_pipeline.web.throttle import ThrottlePolicy


def test_the_first_knob_out_of_range_is_named() -> None:
    knobs = SimpleNamespace(a=1.0, b=-2.0, c=-3.0)
    require(knobs, ("a",), lambda v: v > 0, "be positive")
    with pytest.raises(ValueError, match=r"^b must be positive$"):
        require(knobs, ("a", "b", "c"), lambda v: v > 0, "be positive")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: FetchSettings(read_timeout=0), "read_timeout must be positive"),
        (lambda: FetchSettings(host_concurrency=0), "host_concurrency must be at least 1"),
        (lambda: ThrottlePolicy(breaker_retry_s=-1), "breaker_retry_s must not be negative"),
        (lambda: TrustRules(max_useless_share=1.5), r"max_useless_share must be within \[0, 1\]"),
    ],
)
def test_settings_name_the_bad_knob(make: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()  # type: ignore[operator]
