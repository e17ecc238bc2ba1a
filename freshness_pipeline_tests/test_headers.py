"""web/client/headers.py: a content's age by the server's own clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from freshness_pipeline.web.client.headers import content_age_days

DATE = "Mon, 02 Mar 2026 12:00:00 GMT"


def test_the_age_is_measured_on_the_servers_clock_and_never_when_implausible() -> None:
    assert content_age_days("Sat, 28 Feb 2026 12:00:00 GMT", DATE) == pytest.approx(2.0)
    # without a Date, against the cycle's now; without either, no age
    now = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
    assert content_age_days("Mon, 02 Mar 2026 12:00:00 GMT", None, now=now) == pytest.approx(1.0)
    assert content_age_days("Mon, 02 Mar 2026 12:00:00 GMT", None) is None
    assert content_age_days(DATE, DATE) is None  # stamped "now": a dynamic page
    assert content_age_days("Tue, 03 Mar 2026 12:00:00 GMT", DATE) is None  # in the future
    assert content_age_days("last week", DATE) is None
