"""Volatile tokens as pages the project had not seen write them, and a shop's add-to-cart form.

A run over 95 real pages from other packages' test data (Chinese news, shops, forums, blogs
in a dozen languages), each served again with fresh noise, found false changes on 45 of them:
counters and stamps in wordings the normalizer did not know, a consent banner named only
"gdpr", and dates and counters written across a line break, with &nbsp; or two spaces; and
every edit missed on a product page whose details sit in its add-to-cart form. Each case
below was a false (or missed) change before FINGERPRINT_VERSION 10."""

from __future__ import annotations

import pytest

from freshness_pipeline.science.fingerprint import content_fingerprint

ARTICLE = (
    "<html><body><main><h1>Budget approved</h1><p>The council approved the new budget on "
    "Monday after a long debate about school funding.</p>{}</main></body></html>"
)


def _fingerprint(extra: str, page: str = ARTICLE) -> str:
    return content_fingerprint(page.format(extra).encode(), content_type="text/html")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("<p>Shares: 1841</p>", "<p>Shares: 6204</p>"),
        ("<p>Read 1,234 times</p>", "<p>Read 5,678 times</p>"),
        ("<p>Comments (12)</p>", "<p>Comments (19)</p>"),
        ("<p>52 people are reading this now</p>", "<p>61 people are reading this now</p>"),
        ("<p>评论(12)</p>", "<p>评论(31)</p>"),
        ("<p>浏览次数：1234</p>", "<p>浏览次数：1301</p>"),
        ("<p>Request ID: 7f3a9c12-3d80</p>", "<p>Request ID: 1b2c3d4e-9a1f</p>"),
        ("<p>Time: 0.1234s | 23 Queries</p>", "<p>Time: 0.0871s | 31 Queries</p>"),
        ("", '<div class="gdpr-notice"><p>We use cookies to improve your experience.</p></div>'),
        ("<p>Posted June 30, 2015</p>", "<p>Posted June\n30, 2015</p>"),
        ("<p>© 2016 Example Media</p>", "<p>©\n2016 Example Media</p>"),
        ("<p>Views: 85154</p>", "<p>Views:\n85154</p>"),
        ("<p>Updated June&nbsp;30, 2015</p>", "<p>Updated July&nbsp;2, 2015</p>"),
        ("<p>Updated June  30, 2015 10:14</p>", "<p>Updated July  2, 2015 11:20</p>"),
        ("<p>Views:&nbsp;1234</p>", "<p>Views:&nbsp;1301</p>"),
        ("<p>Updated Tuesday, October\n19, 2024</p>", "<p>Updated Sunday, September\n14, 2025</p>"),
        ("<p>Page generated in\n0.2627 seconds.</p>", "<p>Page generated\nin 0.3067 seconds.</p>"),
        ("<p>Comments\n(10)</p>", "<p>Comments (14)</p>"),
        ("<p>Updated just\nnow</p>", "<p>Updated</p>"),
    ],
)
def test_noise_in_these_wordings_is_no_change(before: str, after: str) -> None:
    assert _fingerprint(before) == _fingerprint(after)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("<p>I read 3 books a week.</p>", "<p>I read 4 books a week.</p>"),
        ("<p>She read it 3 times.</p>", "<p>She read it 4 times.</p>"),
        ("<p>The request id format changed.</p>", "<p>The request id format stayed.</p>"),
        ("<p>Line one\n3 apples</p>", "<p>Line one\n4 apples</p>"),
        ("<p>Price: 12.99 EUR</p>", "<p>Price: 13.49 EUR</p>"),
    ],
)
def test_what_looks_like_them_but_is_content_still_changes(before: str, after: str) -> None:
    assert _fingerprint(before) != _fingerprint(after)


SHOP = (
    "<html><body><div id='menu'><a href='/'>Home</a> <a href='/c'>Mobility aids</a></div>"
    "<div class='content'><h1>Folding walking stick</h1>"
    "<p>{}</p>"
    + "".join(f"<p>Category number {i} of mobility aids and accessories</p>" for i in range(12))
    + "</div></body></html>"
)
CART = (
    "<form name='cart_quantity' action='product_info.php?products_id=7&action=add_product'>"
    "<p>Adjustable aluminium walking stick, folds into four. Price: {}</p>"
    "<input type='submit' value='Add to cart'></form>"
)


def test_a_product_in_its_add_to_cart_form_is_content() -> None:
    """osCommerce wraps a product's description and price in its add-to-cart form, which held
    under half the page's text and went with the site's search and newsletter forms."""
    cheap = _fingerprint(CART.format("£24.99"), SHOP)
    dear = _fingerprint(CART.format("£29.99"), SHOP)
    assert cheap != dear
    newsletter = "<form action='/subscribe'><p>Sign up for our newsletter: {}</p></form>"
    assert _fingerprint(newsletter.format("week 12"), SHOP) == _fingerprint(
        newsletter.format("week 13"), SHOP
    )


CAREERS = (
    "<html><head><title>Careers</title></head><body><div class='wrapper'><header>"
    "<div id='logo'>Lexipol</div><ul class='menu'><li>Home</li><li>About</li></ul>"
    "<section id='section-main'><h2>Join our team</h2><p>Lexipol is an Equal Opportunity "
    "Employer and welcomes applicants of every background.{}</p><p>We offer competitive "
    "salaries, full benefits and a flexible workplace for every employee.</p></section>"
    "</header><div class='footer'>© Lexipol</div></div></body></html>"
)


def test_a_header_that_holds_the_page_is_content() -> None:
    """A careers page wrapped its whole content in its <header>: dropped as the site's header,
    the page extracted to its footer, and every edit was missed."""
    assert _fingerprint("", CAREERS) != _fingerprint(" Apply by Friday.", CAREERS)
