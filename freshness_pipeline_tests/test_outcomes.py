"""web/client/outcomes.py: the fingerprinter a cycle uses by default."""

from __future__ import annotations

from freshness_pipeline.science.fingerprint import content_fingerprint
from freshness_pipeline.web.client.fetches import FetchRequest
from freshness_pipeline.web.client.outcomes import default_fingerprinter

PAGE = b"<html><head><title>Lamp</title></head><body><main><p>Warm light.</p></main></body></html>"


def test_the_default_fingerprint_is_the_content_fingerprint_of_the_body() -> None:
    fp = default_fingerprinter()
    record = fp(PAGE, "text/html", FetchRequest(url="http://example.test/lamp"))
    assert record.fingerprint == content_fingerprint(PAGE, content_type="text/html")
    assert record.title == "Lamp"
