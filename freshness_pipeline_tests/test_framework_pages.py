"""Change detection on pages as frameworks and shops render them, as an exploratory run served
them: React's streamed Suspense content, declarative shadow roots, build hashes in class names,
BEM blocks, short pages with JSON-LD, "Loading..." shells, personalised rails and a shop's
urgency widgets."""

from __future__ import annotations

import json

import pytest

from freshness_pipeline.science.fingerprint import content_fingerprint, extract_content

ARTICLE = "<p>" + "The city council voted seven to two for the new bike lanes. " * 3 + "</p>"


def fp(html: str) -> str:
    return content_fingerprint(html.encode(), content_type="text/html; charset=utf-8")


def _streamed(price: str, *, inline: bool) -> str:
    block = f'<div class="product-price"><p>{price}</p><p>In stock</p></div>'
    if inline:
        boundary, tail = f"<!--$-->{block}<!--/$-->", ""
    else:
        boundary = '<!--$?--><template id="B:0"></template><div class="sk">Loading</div><!--/$-->'
        tail = f'<div hidden id="S:0">{block}</div><script>$RC("B:0","S:0")</script>'
    return (
        "<html><head><title>Sweater</title></head><body><main><h1>Classic Crew Sweater</h1>"
        f"{boundary}<p>Knitted in Portugal from long-staple cotton.</p></main>{tail}</body></html>"
    )


def test_reacts_streamed_content_counts_where_the_page_shows_it() -> None:
    streamed = _streamed("$49.00", inline=False)
    assert "$49.00" in extract_content(streamed)
    assert fp(streamed) != fp(_streamed("$39.00", inline=False))  # the price edit is seen
    # data before or after the shell flushed: the same page
    assert fp(streamed) == fp(_streamed("$49.00", inline=True))


def _shadow(text: str) -> str:
    return (
        "<html><head><title>News</title></head><body><news-article>"
        '<template shadowrootmode="open"><article><h1>Bike lanes</h1>'
        f'<x-body><template shadowroot="open"><p>{text}</p></template></x-body>'
        "</article></template></news-article></body></html>"
    )


def test_a_declarative_shadow_root_is_the_pages_content() -> None:
    page = _shadow("The council voted seven to two.")
    assert "The council voted seven to two." in extract_content(page)
    assert fp(page) != fp(_shadow("The council voted six to three."))


@pytest.mark.parametrize(
    ("before", "after"),
    [("svelte-1n46o8q", "svelte-9ad7x2p"), ("ArticleBody_p__x7k2m", "ArticleBody_p__q9ad4")],
)
def test_a_build_hash_in_a_class_name_is_not_a_word(before: str, after: str) -> None:
    def page(cls: str) -> str:
        paragraphs = "".join(
            f'<p class="{cls}">Paragraph {k}: the council met again about the bike lanes.</p>'
            for k in range(4)
        )
        return f"<html><body><article>{paragraphs}</article></body></html>"

    assert fp(page(before)) == fp(page(after))
    assert "bike lanes" in extract_content(page(after))


def test_an_element_of_a_banner_block_is_named_for_itself() -> None:
    def page(standfirst: str) -> str:
        return (
            '<html><body><article><div class="article-banner"><h1>Bike lanes</h1>'
            f'<p class="article-banner__standfirst">{standfirst}</p></div>{ARTICLE}'
            '</article><div class="ad-slot"><div class="ad-slot__inner">Buy socks</div></div>'
            "</body></html>"
        )

    assert "A vote of seven to two" in extract_content(page("A vote of seven to two"))
    assert "Buy socks" not in extract_content(page("x"))
    assert fp(page("A vote of seven to two")) != fp(page("A vote of six to three"))


def _short(status: str) -> str:
    ld = {"@type": "Organization", "description": "Tickets for every show in the county.",
          "slogan": "Your night out starts here"}  # fmt: skip
    return (
        f'<html><head><title>Show</title><script type="application/ld+json">{json.dumps(ld)}'
        f"</script></head><body><main><p>{status}</p></main></body></html>"
    )


def test_a_short_pages_own_words_count_beside_its_json_ld() -> None:
    assert fp(_short("On sale")) != fp(_short("Sold out"))
    assert "Sold out" in extract_content(_short("Sold out"))


def test_a_shell_showing_a_loading_line_is_read_from_its_data() -> None:
    def shell(text: str) -> str:
        data = {"props": {"pageProps": {"article": {"body": text}}}, "buildId": "b1"}
        return (
            '<html><head><title>News</title></head><body><div id="__next">Loading your '
            'personalised news…</div><script id="__NEXT_DATA__" type="application/json">'
            f"{json.dumps(data)}</script></body></html>"
        )

    assert fp(shell("The river rose by a metre overnight.")) != fp(
        shell("The river rose by two metres overnight.")
    )


@pytest.mark.parametrize(
    "heading",
    [
        "Trending in your area",
        "Picked for you",
        "Top stories",
        "Customers Who Bought This Item Also Bought",
        "Recently viewed",
        "Because you read about bike lanes",
    ],
)
def test_a_personalised_rail_is_not_the_content(heading: str) -> None:
    def page(items: list[int]) -> str:
        links = "".join(f"<li><a href=/s/{k}>Story number {k}</a></li>" for k in items)
        return f"<html><body><main>{ARTICLE}<h2>{heading}</h2><ul>{links}</ul></main></body></html>"

    assert fp(page([1, 2, 3])) == fp(page([7, 8, 9]))


def test_a_shops_urgency_widgets_are_not_the_content() -> None:
    def page(sold: int, hours: int, minutes: int) -> str:
        return (
            f"<html><body><main><h1>Sweater</h1><p>$49.00</p>{ARTICLE}"
            f"<p>{sold} sold in last 24 hours</p><p>Order within {hours} hrs {minutes} mins to "
            "get it by Friday</p></main></body></html>"
        )

    assert fp(page(12, 2, 13)) == fp(page(15, 1, 55))


def test_counts_on_buttons_and_over_comments_are_not_the_content() -> None:
    """Substack's like, comment and restack buttons, a live blog's "N new updates" and
    WordPress's "N thoughts on ..." over its comments moved on every fetch."""

    def page(likes: int, updates: int, thoughts: int) -> str:
        return (
            f"<html><body><main>{ARTICLE}<button>{likes}</button><button>{likes // 10}K</button>"
            f"<button>Sold out</button><p>{updates} new updates</p>"
            f"<h3>{thoughts} thoughts on “Bike lanes”</h3></main></body></html>"
        )

    assert fp(page(120, 3, 12)) == fp(page(131, 5, 14))
    assert "Sold out" in extract_content(page(120, 3, 12))  # a button's words are content


def test_a_consent_manager_without_landmarks_is_not_the_content() -> None:
    def page(banner: bool) -> str:
        cmp = '<div id="didomi-host"><p>We and our 812 partners value your privacy</p></div>'
        return f"<html><body><div class='wrap'>{ARTICLE}{cmp if banner else ''}</div></body></html>"

    assert fp(page(True)) == fp(page(False))


@pytest.mark.parametrize(
    "root",
    [
        '<div id="qc-cmp2-container"><div class="qc-cmp2-summary-info">',
        '<div id="sp_message_container_123456"><div class="message">',
        '<div id="truste-consent-track"><div class="truste_box_overlay">',
        '<div class="osano-cm-window osano-cm-dialog"><div>',
        '<div id="iubenda-cs-banner"><div>',
        '<div id="termly-code-snippet-support"><div>',
    ],
)
def test_a_consent_manager_named_only_by_its_script_is_not_the_content(root: str) -> None:
    """Quantcast's banner, shown on some requests only, was a false change each time: its
    root names no consent word. Trusted sellers and Adobe's cmp- components stay content."""

    def page(banner: bool) -> str:
        cmp = f"{root}<p>We and our 812 partners value your privacy</p></div></div>"
        return f"<html><body><div class='wrap'>{ARTICLE}{cmp if banner else ''}</div></body></html>"

    assert fp(page(True)) == fp(page(False))
    kept = (
        "<html><body><main><h1>Lamps</h1><div class='cmp-text'><p>Brass desk lamp, 40 cm.</p>"
        "</div><div class='trusted-sellers'><p>Sold by Acme Lighting.</p></div></main></body></html>"
    )
    text = extract_content(kept)
    assert "Brass desk lamp" in text and "Sold by Acme Lighting" in text


def test_counts_in_blocks_drawn_as_buttons_are_not_the_content() -> None:
    """Substack draws its like, comment and restack buttons as a div and links whose class says
    button, the count in a label inside: the counts moved on every fetch."""

    def page(likes: int, comments: int) -> str:
        return (
            f"<html><body><main><h1>Bike lanes</h1>{ARTICLE}<div class='post-ufi'>"
            "<div class='like-button-container post-ufi-button'><svg></svg>"
            f"<div class='label'>{likes}</div></div><a class='post-ufi-button comment'><svg></svg>"
            f"<div class='label'>{comments}</div></a><div class='post-ufi-button'>Share</div>"
            "<a class='btn btn-primary'>Sold out</a></div></main></body></html>"
        )

    assert fp(page(42, 12)) == fp(page(47, 14))
    assert "Sold out" in extract_content(page(42, 12))  # a button's words are content


def test_a_rail_under_an_aria_heading_is_not_the_content() -> None:
    """Magento titles its cross-sell block with ``<strong role="heading">``, not an h2."""

    def page(items: list[str]) -> str:
        products = "".join(f"<li><a>{name}</a><span>$44.00</span></li>" for name in items)
        return (
            f"<html><body><main><h1>Classic Crew Sweater</h1><p>$49.00</p>{ARTICLE}"
            '<div class="block crosssell"><div class="block-title"><strong role="heading" '
            'aria-level="2">Customers Who Bought This Item Also Bought</strong></div>'
            f'<div class="block-content"><ol>{products}</ol></div></div></main></body></html>'
        )

    assert fp(page(["Merino Socks", "Linen Shirt"])) == fp(page(["Denim Cap", "Travel Mug"]))


def test_a_short_brief_in_main_is_the_content_beside_a_long_rail() -> None:
    """A two-sentence brief in ``<main>`` holds little of a page whose 30-headline "Latest
    news" block sits outside it: the whole body was read instead, the block's rotation a change
    on every fetch, and the brief's one edit one change among many."""

    def page(brief: str, start: int) -> str:
        rail = "".join(
            f"<li><a href=/n/{k}>Headline number {k} of the day</a></li>"
            for k in range(start, start + 30)
        )
        return (
            f"<html><body><main><article><h1>Storm warning</h1><p>{brief}</p></article></main>"
            f"<div class='latest'><h3>Latest</h3><ul>{rail}</ul></div></body></html>"
        )

    brief = (
        "Forecasters expect heavy rain tonight. Residents near the river are asked to move cars."
    )
    assert fp(page(brief, 0)) == fp(page(brief, 40))
    assert fp(page(brief, 0)) != fp(page(brief.replace("tonight", "on Sunday"), 40))


def test_the_landmarks_of_pages_from_before_html5_are_chrome() -> None:
    """A Drupal 7 page has no <header>, <aside> or roles, only div#header, div#sidebar-first
    and div#footer: its weather widget and "Recent content" list were content, a change on
    every fetch (found by an exploratory run). Ids name the page's blocks; a class named
    "header" inside the content stays."""

    def page(weather: str, recent: list[int], byline: str = "By Jane Porter") -> str:
        items = "".join(f"<li><a href=/n/{k}>Story {k}</a></li>" for k in recent)
        return (
            "<html><body><div id='page'><div id='header'><a href=/>Springfield Gazette</a>"
            f"<div class='weather'>Springfield {weather}, light rain</div></div>"
            f"<div id='sidebar-first'><h2>Recent content</h2><ul>{items}</ul></div>"
            f"<div class='content'><div class='header'>{byline}</div>{ARTICLE}</div>"
            "<div id='footer'>Powered by Drupal</div></div></body></html>"
        )

    assert fp(page("5°C", [1, 2, 3])) == fp(page("12°C", [4, 5, 6]))
    assert "By Jane Porter" in extract_content(page("5°C", [1]))
    assert fp(page("5°C", [1])) != fp(page("5°C", [1], byline="By John Smith"))
