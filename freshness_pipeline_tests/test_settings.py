"""web/client/settings.py: a fetch setting that cannot work is refused when it is made, with its
name, before a cycle starts with it."""

from __future__ import annotations

from datetime import datetime

import pytest

from freshness_pipeline.web.client.settings import USER_AGENT_PREFIX, FetchSettings


def test_the_defaults_are_valid_and_name_the_project() -> None:
    settings = FetchSettings()
    assert settings.user_agent.startswith(USER_AGENT_PREFIX)
    assert settings.global_concurrency >= settings.host_concurrency >= 1


@pytest.mark.parametrize(
    ("knob", "value", "named"),
    [
        ("user_agent", "curl/8", "user_agent must start with"),
        ("connect_timeout", 0.0, "connect_timeout must be positive"),
        ("read_timeout", -1.0, "read_timeout must be positive"),
        ("global_concurrency", 0, "global_concurrency must be at least 1"),
        ("host_concurrency", 0, "host_concurrency must be at least 1"),
        ("max_body_bytes", 0, "max_body_bytes must be at least 1"),
        ("cycle_time_limit_s", -5.0, "cycle_time_limit_s must not be negative"),
        ("fetch_window_s", 0.0, "fetch_window_s must be positive"),
        ("max_retry_after_s", -1.0, "max_retry_after_s must not be negative"),
        ("cycle_now", datetime(2026, 3, 2, 12), "cycle_now must be timezone-aware"),
    ],
)
def test_a_setting_that_cannot_work_is_refused_by_name(
    knob: str, value: object, named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        FetchSettings(**{knob: value})
