"""web/client/fetches.py: the host queue a URL's fetch goes to."""

from __future__ import annotations

from freshness_pipeline.web.client.fetches import host_key


def test_a_url_the_normalizer_rejects_still_gets_a_host_queue() -> None:
    assert host_key("http://Example.TEST:80/a") == "example.test"
    assert host_key("http://exa mple.test/") == "exa mple.test"
