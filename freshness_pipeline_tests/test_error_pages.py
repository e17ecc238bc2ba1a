"""Error pages served with 200: the titles that name themselves, and the pages that must stay
pages (titles about errors, long pages, real articles)."""

from __future__ import annotations

import pytest

from freshness_pipeline.science.fingerprint.error_pages import (
    MAX_ERROR_PAGE_CHARS,
    error_page_kind,
)
from freshness_pipeline.science.fingerprint.records import content_record
from freshness_pipeline_tests import real_pages

ERROR_TITLES = {
    # what servers, proxies and CDNs put in the title of a 200 they should not have sent
    "503 Service Temporarily Unavailable": "unavailable",
    "Service Unavailable": "unavailable",
    "502 Bad Gateway": "unavailable",
    "504 Gateway Time-out": "unavailable",
    "Internal Server Error": "unavailable",
    "Error 503 Service Unavailable": "unavailable",
    "HTTP 500": "unavailable",
    "Site Maintenance": "unavailable",
    "Under Maintenance": "unavailable",
    "We\u2019ll be back soon!": "unavailable",
    "Database Error": "unavailable",
    "Error establishing a database connection": "unavailable",
    "Oops! Something went wrong.": "unavailable",
    "Error": "unavailable",
    "Just a moment...": "throttled",
    "Attention Required! | Cloudflare": "throttled",
    "Please Wait... | Cloudflare": "throttled",
    "429 Too Many Requests": "throttled",
    "429": "throttled",
    "Access to this page has been denied.": "throttled",
    "404 Not Found": "not_found",
    "Not Found": "not_found",
    "Page not found \u2013 Example Shop": "not_found",
    "Example Shop | Page Not Found": "not_found",
    "Error 404 - Page Not Found": "not_found",
    "Error: Page not found": "not_found",
    "404": "not_found",
    "410 Gone": "not_found",
    "403 Forbidden": "denied",
    "Access Denied": "denied",
    "401 Unauthorized": "denied",
}

PAGE_TITLES = (
    "Error handling in Python",
    "Not Found: a novel review",
    "The Gateway Arch",
    "Forbidden (2024)",
    "Maintenance tips for your car",
    "Home | Example Shop",
    "Breaking news: service unavailable in Texas after storm",
    "Oops I did it again",
    "Too many requests for the API? Here's why",
    "Status",
    "Widget 404 in stock",
)


@pytest.mark.parametrize(("title", "kind"), sorted(ERROR_TITLES.items()))
def test_error_titles_with_little_text_are_error_pages(title: str, kind: str) -> None:
    assert error_page_kind(title, f"{title}\nPlease try again later.") == kind


@pytest.mark.parametrize("title", PAGE_TITLES)
def test_titles_about_errors_are_pages(title: str) -> None:
    assert error_page_kind(title, title) is None


def test_a_long_page_is_a_page_whatever_its_title() -> None:
    # "Error - JavaScript | MDN": a reference page named after what it documents
    title = "Error - JavaScript | MDN"
    assert error_page_kind(title, title) == "unavailable"
    assert error_page_kind(title, title + "\n" + "x" * MAX_ERROR_PAGE_CHARS) is None
    assert error_page_kind(None, "Service Unavailable") is None


def test_what_the_fetcher_extracts_from_an_error_page_is_judged_one() -> None:
    body = (
        b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway"
        b"</h1></center><hr><center>nginx</center></body></html>"
    )
    record = content_record(body, content_type="text/html")
    assert error_page_kind(record.title, record.text) == "unavailable"


def test_no_real_article_is_an_error_page() -> None:
    reason = real_pages.missing_reason()
    if reason is not None:
        pytest.skip(reason)
    pages = real_pages.load()
    judged = {}
    for page in pages:
        record = content_record(page.html, content_type="text/html")
        judged[page.name] = error_page_kind(record.title, record.text)
    assert len(pages) >= 25
    assert {name: kind for name, kind in judged.items() if kind is not None} == {}


@pytest.mark.parametrize(
    ("title", "text"),
    [
        (
            "Gone | Sarah Lane",
            "A track from the album Rivers, released 2019: four minutes of "
            "slow piano and voice, recorded in one take in a church in Bergen.",
        ),
        (
            "Oops | Board Games Hub",
            "A card game for two to six players: every mistake costs a "
            "card, and the last player holding cards wins the round.",
        ),
        (
            "Forbidden | FilmBase",
            "Forbidden (2024) is a thriller directed by Anna Berg about a "
            "family that finds a sealed room in their new house.",
        ),
    ],
)
def test_a_one_word_title_with_a_pages_text_is_a_page(title: str, text: str) -> None:
    """A track, a game and a film of those names, each with a short description: classed
    gone or error, they were never versioned (found by an exploratory run)."""
    assert error_page_kind(title, f"{title}\n{text}") is None
    # the same title over an error page's words is still one
    assert error_page_kind(title, f"{title}\nSomething went wrong, please try again.") is not None
