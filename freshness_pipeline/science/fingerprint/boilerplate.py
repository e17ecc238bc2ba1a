"""What the extraction drops: markup that is never visible text, site chrome, hidden elements,
consent banners, and promotional blocks found by their class or id words, ``rel=sponsored``
links and visible labels.

Everything to drop is first marked with an attribute, then the outermost marked elements are
removed at once: removing nested matches one by one would touch elements that an ancestor's
removal has already freed. Lexbor tests every selector of a query on every element, so the
queries are few and broad and Python sorts out the matches.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError

from freshness_pipeline.science.fingerprint.dom import css, css_first, drop_nodes, node_text
from freshness_pipeline.science.fingerprint.whitespace import fold_spaces

__all__ = ["NOISE_TAGS", "remove_boilerplate", "selected"]

# Selector strings have no spaces that CSS does not need: lexbor parses a query's string on
# every call, character by character.
_DROP = "data-freshness-fingerprint-drop"
_KEEP = "data-freshness-fingerprint-keep"
_OUTERMOST_DROPS = f"[{_DROP}]:not([{_DROP}] *)"

# Markup that is never visible text, or whose text is machine-made: <time> holds a date by
# definition, a <textarea> is what a visitor types, a <dialog> is a pop-up over the page.
# Buttons and selects stay: a shop says "Sold out" on its cart button and "L - sold out" in
# its size list, and often nowhere else (found by an exploratory run); their other words
# ("Share", "Load more", country lists) do not move.
NOISE_TAGS = [
    "script", "style", "noscript", "template", "svg", "iframe", "frame", "object", "embed",
    "canvas", "video", "audio", "textarea", "dialog", "marquee", "time",
]  # fmt: skip
_NOISE = ",".join(NOISE_TAGS)

# Site chrome by landmark. A <header>/<footer> inside an article or main holds its headline
# and byline, so only page-level ones go; ARIA roles are read in Python from one [role].
# Headers, footers and forms are found by tag and their ancestors read in Python: as
# ":not(main *)..." selectors, every element of the page would be tested against them.
_CHROME = "nav,aside,[role],h1"
_PAGE_LEVEL_BLOCKERS = frozenset(("main", "article", "header", "footer"))
# The landmarks of pages from before HTML5's, named by id: a Drupal 7 or classic WordPress page
# has no <header>, <aside> or roles, only div#header, div#sidebar-first, div#footer, and kept
# its weather widget and "Recent content" list as content (found by an exploratory run). An id
# names one block of the page; classes name styles and are left alone.
_LEGACY_CHROME = (
    '[id="header" i],[id="footer" i],[id="navigation" i],[id="nav" i],[id="menu" i],'
    '[id^="sidebar" i]'
)
# The same landmarks named by id words ("page-footer", "site-header", "footerWrapper": phpBB,
# vBulletin and Magento themes), dropped unless they hold the headline or a content root: a
# footer's "Page generated in 234 ms on app-14" and a header's weather widget were a change on
# every fetch of a page built that way (found by a run over real pages the project had not seen).
_LEGACY_CHROME_WORDS = frozenset(("footer", "header"))
_LEGACY_CHROME_STEMS = '[id*="footer" i],[id*="header" i]'
# The page itself: no rule drops these, whatever they are marked as (a chrome role on <html> or
# <body> is a template's mistake; taken at its word it would drop the whole page, and lexbor
# refuses to remove the root).
_PAGE_ROOTS = frozenset(("html", "body"))
_CHROME_ROLES = frozenset(
    ["navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog",
     "timer", "marquee"]
)  # fmt: skip
_CONTENT_ROOTS = 'main,[role="main" i],article,[itemprop~="articleBody" i]'
_GUARDED_CONTENT = f"{_CONTENT_ROOTS},h1"

# Class and id words (whole words, or parts split at "-", "_", digits and camelCase humps) that
# name a promotional, consent or counter block. The query only pre-selects elements whose class
# or id contains a stem; the word test decides, so "header", "shadow", "download" and
# "loading" are not ads. The same query brings the hidden elements and the links with a rel.
_AD_WORDS = frozenset(
    ["ad", "ads", "advert", "adverts", "advertisement", "advertisements", "advertising",
     "advertorial", "adsense", "adsbygoogle", "adslot", "adunit", "adbox", "adcontainer",
     "adwrapper", "adzone", "dfp", "sponsor", "sponsors", "sponsored", "sponsorship", "promo",
     "promos", "promoted", "promotional", "banner", "banners", "outbrain", "taboola"]
)  # fmt: skip
_CONSENT_WORDS = frozenset(
    ["cookie", "cookies", "cookiebanner", "cookiebar", "cookienotice", "cookieconsent",
     "cookielaw", "cookiebot", "consent", "gdpr", "onetrust", "didomi", "usercentrics"]
)  # fmt: skip
_COUNTER_WORDS = frozenset(
    ["count", "counter", "counts", "views", "viewcount", "pageviews", "likes", "sharecount"]
)  # fmt: skip
# A block named for its price or stock is content even when it is also a "promo" or a "count"
# (`stock-count`: "Only 3 left" is what a shop's watcher is there for).
_CONTENT_WORDS = frozenset(
    ["price", "prices", "pricing", "stock", "inventory", "qty", "quantity", "availability",
     "available", "remaining", "seats", "tickets", "units"]
)  # fmt: skip
# Consent managers whose roots carry no consent word, by the names their scripts give them:
# Quantcast Choice (qc-cmp2-container), Sourcepoint (sp_message_container_123), TrustArc
# (truste-consent-track, truste_box_overlay, trustarc-banner), Osano (osano-cm-window), iubenda
# (iubenda-cs-banner), Termly (termly-code-snippet-support). Quantcast's, shown on some requests
# only, was a false change each time (found by an exploratory run); "cmp" alone would also name
# Adobe's content components (cmp-text), and "truste" trusted sellers.
_CMP_ID_ROOTS = ("qc-cmp", "sp_message_", "truste-", "trustarc", "iubenda-cs", "termly-")
_CMP_CLASS_ROOTS = ("osano-cm", "truste_")  # each selector costs every page a little
_CMP_ROOT = re.compile(
    r"(?:^|\s)(?i:" + "|".join(re.escape(root) for root in _CMP_ID_ROOTS + _CMP_CLASS_ROOTS) + ")"
)
_CANDIDATES = ",".join(
    [
        *(
            f'[{attr}*="{stem}" i]'
            for stem in ("ad", "sponsor", "banner", "cookie", "consent", "gdpr")
            for attr in ("class", "id")
        ),
        '[class*="promo" i]',
        '[class*="count" i]',
        '[class*="views" i]',
        '[class*="likes" i]',
        '[class*="outbrain" i]',
        '[id*="didomi" i]',
        '[id*="usercentrics" i]',
        '[id*="taboola" i]',
        *(f'[id^="{root}" i]' for root in _CMP_ID_ROOTS),
        *(f'[class*="{root}" i]' for root in _CMP_CLASS_ROOTS),
        "[hidden]",
        "[aria-hidden]",
        "[style]",
        "a[rel]",
    ]
)
_INVISIBLE_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_WORD_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_AD, _CONSENT, _COUNTER = "ad", "consent", "counter"
_COUNTER_MAX_CHARS = 48  # a counter is a number and a word; a longer block is not one
# rel=sponsored links go with the containers that hold nothing but them (or a lead-in such as
# "Read more:" besides), this many levels up.
_CONTAINER_CLIMB = 4
_LEAD_IN_MAX_CHARS = 24

# Visible labels of a promotional block: the label, then nothing or a separator ("Sponsored:
# ...", "Advertisement", "Anzeige", "Реклама"); a sentence that merely starts with such a word
# stays ("Anzeige gegen Unbekannt wurde erstattet" is a criminal complaint, not an ad). Each
# stem costs a search of every page's text, so only the common labels have one. Lexbor's
# case-insensitive text search folds ASCII letters only: a stem in another script is searched
# as written, capitalised and in capitals.
_LABEL_STEMS = ("sponsor", "advert", "promoted", "anzeige", "publicit")
#: the labels of other languages, looked for on pages whose text is not all ASCII (a page in
#: German, Italian, Spanish, Polish or Russian has letters past it): each stem is a search of
#: the page's text, and most pages would pay for words they never hold
_OTHER_LABEL_STEMS = (
    "werbung",  # (gesponsert: found by "sponsor")
    "publicid",  # publicidad, publicidade
    "pubblicit",  # pubblicità
    "patrocinad",
    "reklam",  # reklama, reklame
    "реклама",
    "إعلان",
    "広告",
    "广告",
    "推广",
    "광고",
)
#: labels in capitals only: "PR" marks sponsored items on Japanese pages, and in lower case
#: it is part of every other word
_CASED_LABEL_STEMS = ("PR",)
_CASED_LABEL_PRESENT = re.compile(r"(?<![A-Za-z])PR(?![A-Za-z])")
_LABEL = re.compile(
    # words that start no sentence of content, or written in capitals: a label whatever follows
    r"\W*(?:advertisements?|広告|广告|광고|(?-i:ANZEIGE|WERBUNG|РЕКЛАМА|PUBLICIDAD|PUBBLICITÀ))"
    r"(?:\W|$)"
    # words that may: a label when alone or before a separator
    r"|\W*(?:sponsored(?:\s+(?:by|content|post|story|stories|links?|listings?))?|sponsor"
    r"|advertising|advertorial|advertentie|promoted(?:\s+(?:by|content|stories))?"
    r"|publicit[ée]|sponsoris[ée]e?|anzeige|werbung|gesponsert|publicidad|publicidade"
    r"|pubblicità|patrocinado|sponsorizzato|reklama|reklame|реклама|إعلان|推广|(?-i:PR))"
    r"\s*(?:$|[:|·•\-–—(\[/]|by\s)",
    re.I,
)
# Headings of a recirculation list (links to other pages, picked anew on every request), in
# the languages of most of the web: the heading and the element after it go. "See also" and
# "Further reading" lists are written by hand and stay.
_RECIRCULATION_HEADING = re.compile(
    r"\W*(?:related(?:\s+(?:articles?|stories|posts|content|links|news|coverage|products))?"
    r"|you\s+(?:may|might)\s+also\s+(?:like|enjoy)|recommended(?:\s+(?:for\s+you|stories|reading))?"
    r"|more\s+(?:stories|articles|news|to\s+read)|read\s+next|trending(?:\s+now)?"
    r"|most\s+(?:read|popular|viewed|shared)|popular\s+(?:now|stories|articles|in\s+.{1,40})"
    r"|trending\s+(?:in\s+.{1,40}|today|stories)|(?:picked|recommended|selected|chosen)\s+for\s+you"
    r"|top\s+stories|because\s+you\s+(?:read|viewed|watched|liked)\b.{0,80}|editor'?s\s+picks?"
    r"|customers\s+(?:who\s+(?:bought|viewed)|also\s+(?:bought|viewed))\b.{0,80}"
    r"|recently\s+viewed(?:\s+(?:products|items))?|you\s+may\s+also\s+be\s+interested\s+in"
    r"|recent\s+(?:content|posts|comments)|who'?s\s+online"
    # de
    r"|lesen\s+sie\s+auch|auch\s+interessant|das\s+könnte\s+sie\s+(?:auch\s+)?interessieren"
    r"|(?:ähnliche|verwandte|weitere|beliebte)\s+(?:artikel|beiträge|nachrichten)"
    r"|meistgelesen(?:e|en)?(?:\s+artikel)?|am\s+meisten\s+gelesen|empfehlungen(?:\s+für\s+sie)?"
    # fr
    r"|(?:à|a)\s+lire\s+(?:aussi|également)|lire\s+aussi|sur\s+le\s+même\s+sujet"
    r"|articles\s+(?:similaires|liés|recommandés)|les\s+plus\s+(?:lus|populaires|partagés)"
    r"|vous\s+aimerez\s+(?:peut-être\s+)?aussi|recommandés?\s+pour\s+vous"
    # es, pt, it
    r"|(?:también\s+)?te\s+(?:puede|podría)\s+interesar|quizás?\s+te\s+interese"
    r"|(?:noticias|artículos|notícias|artigos|articoli|notizie)\s+(?:relacionad[oa]s|correlat[ie])"
    r"|(?:lo\s+)?más\s+(?:leíd[oa]s|visto)|mais\s+lid[oa]s|(?:i\s+)?più\s+(?:lett[ie]|popolari)"
    r"|leia\s+também|você\s+também\s+pode\s+gostar|leggi\s+anche|(?:ti\s+)?potrebbe\s+interessarti"
    # nl, pl, tr
    r"|lees\s+ook|meest\s+gelezen|gerelateerde\s+artikelen|czytaj\s+(?:także|też|również)"
    r"|najczęściej\s+czytane|podobne\s+artykuły|ilgili\s+haberler|en\s+çok\s+okunanlar"
    # ru
    r"|читайте\s+(?:также|ещё|еще)|(?:похожие|популярные)\s+(?:статьи|новости|материалы)"
    r"|самое\s+(?:читаемое|популярное)|материалы\s+по\s+теме|(?:новости|ещё|еще)\s+по\s+теме"
    r"|вам\s+может\s+быть\s+интересно"
    # zh, ja, ko, ar
    r"|相关(?:文章|阅读|新闻|推荐)|热门(?:文章|新闻|推荐)?|推荐阅读|猜你喜欢|大家都在看|阅读排行"
    r"|関連(?:記事|ニュース)|おすすめ記事|あわせて読みたい|人気(?:記事|ランキング)"
    r"|よく読まれている記事|アクセスランキング|こちらもおすすめ"
    r"|관련\s*기사|많이\s*본\s*(?:뉴스|기사)|인기\s*기사|추천\s*기사"
    r"|(?:مقالات|أخبار)\s+ذات\s+صلة|الأكثر\s+قراءة|اقرأ\s+أيض(?:ا|اً))\W*",
    re.I,
)
_RECIRCULATION_MAX_CHARS = 1500
# A labelled block is the smallest ancestor of the label with other text, within this size;
# a bare label in the content labels the element after it, if that is this short.
_LABELLED_BLOCK_MAX_CHARS = 600
_LABELLED_SIBLING_MAX_CHARS = 200


# A stem at the start of a word part: without one, a class or id names nothing of ours and
# the full word split is skipped.
_WORD_START_STEM = re.compile(
    r"(?<![A-Za-z])(?i:ad|sponsor|banner|cookie|consent|promo|count|views|likes|outbrain"
    r"|taboola|dfp|gdpr|onetrust|didomi|usercentrics|viewcount|pageviews|sharecount)"
    r"|(?<=[a-z])(?:A[Dd]|Sponsor|Banner|Promo|Count|Views|Likes)"
)


# A digit then a letter (not a size: 300x250): a build's hash, not words ("svelte-9ad7x2p",
# CSS modules' "ArticleBody_paragraph__q9ad4"), whose "ad" once in a few hundred deploys
# dropped every paragraph of a page (found by an exploratory run).
_HASH_LIKE = re.compile(r"\d(?!x\d)[A-Za-z]")
_SEGMENT_SEP = re.compile(r"[-_]+")


def _named_words(names: str) -> str:
    """The parts of class and id names that are words: build hashes left out, and of a BEM
    element (``article-banner__standfirst``) its own name, not its block's (the block's element
    carries the block's class itself)."""
    kept = []
    for token in names.split():
        head, sep, tail = token.rpartition("__")
        if sep:
            token = head if _HASH_LIKE.search(tail) else tail
        kept += [seg for seg in _SEGMENT_SEP.split(token) if not _HASH_LIKE.search(seg)]
    return " ".join(kept)


@functools.lru_cache(maxsize=8192)
def _block_kind(class_: str | None, id_: str | None) -> str | None:
    """What a class and id name: an ad, a consent banner, a counter, or nothing."""
    names = f"{class_ or ''} {id_ or ''}"
    if _CMP_ROOT.search(names):
        return _CONSENT
    if not _WORD_START_STEM.search(names):
        return None
    names = _named_words(names)
    words = {w.lower() for w in _WORD_PART.findall(names)}
    if words & _CONTENT_WORDS:
        return None
    if words & _AD_WORDS:
        return _AD
    if words & _CONSENT_WORDS:
        return _CONSENT
    if words & _COUNTER_WORDS:
        return _COUNTER
    return None


def _hidden(attrs: dict[str, str | None]) -> bool:
    if "hidden" in attrs or (attrs.get("aria-hidden") or "").strip().lower() == "true":
        return True
    style = attrs.get("style")
    return bool(style and _INVISIBLE_STYLE.search(style))


class _Marker:
    """Marks elements to drop, refusing any that holds the page's content: a content root or
    headline, or half the body's text. Both are measured once, and only if needed."""

    def __init__(self, tree: LexborHTMLParser) -> None:
        self.tree = tree
        self._body_text: str | None = None
        self._holders: set[int] | None = None

    @property
    def body_text(self) -> str:
        if self._body_text is None:
            self._body_text = node_text(self.tree.body or self.tree.root)
        return self._body_text

    def _content_holders(self) -> set[int]:
        """The content roots, the headlines, and every ancestor of one."""
        if self._holders is None:
            self._holders = set()
            for node in css(self.tree, _GUARDED_CONTENT):
                at: LexborNode | None = node
                while at is not None and at.mem_id not in self._holders:
                    self._holders.add(at.mem_id)
                    at = at.parent
        return self._holders

    def holds_content(self, node: LexborNode) -> bool:
        if self.holds_a_content_root(node):
            return True
        return len(node_text(node)) * 2 > len(self.body_text)

    def wraps_half(self, node: LexborNode) -> bool:
        """Half the body's text or more: a form or a page-level header or footer that size is
        the page, not its chrome (ASP.NET WebForms put the whole body in a form; a careers
        page wrapped its content in its header, and every edit of it was missed)."""
        return len(node_text(node)) * 2 >= len(self.body_text)

    def holds_a_content_root(self, node: LexborNode) -> bool:
        """The page itself, a content root or headline, or an ancestor of one (not the size
        test: for a block its own words name, such as a "Related articles" list)."""
        return node.tag in _PAGE_ROOTS or node.mem_id in self._content_holders()

    @staticmethod
    def mark(node: LexborNode) -> None:
        if node.tag not in _PAGE_ROOTS:
            node.attrs[_DROP] = ""

    def mark_guarded(self, node: LexborNode) -> None:
        if not self.holds_content(node):
            node.attrs[_DROP] = ""


def _mark_ads(tree: LexborHTMLParser, marker: _Marker) -> None:
    """Hidden elements, blocks whose class or id names an ad, a consent banner or a counter,
    and rel=sponsored links with the containers that hold nothing but them."""
    for node in css(tree, _CANDIDATES):
        attrs = node.attributes
        if node.tag == "a" and "sponsored" in (attrs.get("rel") or "").lower():
            block, length = node, len(node_text(node))
            for _ in range(_CONTAINER_CLIMB):
                parent = block.parent
                if (
                    parent is None
                    or len(node_text(parent)) > length + _LEAD_IN_MAX_CHARS
                    or marker.holds_content(parent)
                ):
                    break
                block = parent
            marker.mark(block)
            continue
        kind = _block_kind(attrs.get("class"), attrs.get("id"))
        if kind == _COUNTER:
            if len(node_text(node)) <= _COUNTER_MAX_CHARS:
                marker.mark(node)
        elif kind is not None or _hidden(attrs):
            marker.mark_guarded(node)


def _first_own_text(node: LexborNode) -> str:
    """The first non-blank text directly in ``node``: where a label would stand."""
    child = node.first_child
    while child is not None:
        if child.is_text_node:
            text = (child.text_content or "").strip()
            if text:
                return text
        child = child.next
    return ""


_BARE_COUNT = re.compile(r"[\d.,\s]*[kKmM]?")
#: what a page draws as a button: the element, the ARIA role, and blocks whose class says so
#: (Substack's ``post-ufi-button`` links, ``like-btn``), whatever their tag
_COUNTING_BUTTONS = 'button,[role="button" i],[class*="button" i],[class*="btn" i]'


def _mark_counting_buttons(tree: LexborHTMLParser, marker: _Marker) -> None:
    """A button whose text is a bare number (Substack's likes, comments and restacks, a
    thumbs-up count) counts something; a button's words stay content ("Sold out")."""
    for node in css(tree, _COUNTING_BUTTONS):
        text = node_text(node)
        if text and _BARE_COUNT.fullmatch(text):
            marker.mark(node)


def _mark_labelled_blocks(tree: LexborHTMLParser, marker: _Marker) -> None:
    """A block whose visible label says it is an ad: from the label up to the smallest
    ancestor that has other text, unless that is too big to be an ad; a bare label standing
    in the content takes the short element after it along. Lexbor's text search is slow, so
    it runs only for the label words the page's visible text contains."""
    visible = marker.body_text.casefold()
    stems = _LABEL_STEMS if visible.isascii() else _LABEL_STEMS + _OTHER_LABEL_STEMS
    queries = [
        f':lexbor-contains("{spelling}" i)'
        for stem in stems
        if stem in visible
        for spelling in ((stem,) if stem.isascii() else {stem, stem.capitalize(), stem.upper()})
    ]
    # the regex scans at a tenth of the speed of a search for the two letters
    if "PR" in marker.body_text and _CASED_LABEL_PRESENT.search(marker.body_text):
        queries += [f':lexbor-contains("{stem}")' for stem in _CASED_LABEL_STEMS]
    if not queries:
        return
    for node in css(tree, ",".join(sorted(queries))):
        if not _LABEL.match(_first_own_text(node)):
            continue
        block, in_content = node, False
        while not _LABEL.sub("", node_text(block), count=1).strip():  # the label alone, so far
            parent = block.parent
            if parent is None or marker.holds_content(parent):
                in_content = True
                break
            if len(node_text(parent)) > _LABELLED_BLOCK_MAX_CHARS:
                break
            block = parent
        if marker.holds_content(block):
            continue
        marker.mark(block)
        if in_content and block is node:
            after = _next_element(block, past_marked=False)
            if (
                after is not None
                and len(node_text(after)) <= _LABELLED_SIBLING_MAX_CHARS
                and not marker.holds_content(after)
            ):
                marker.mark(after)


def _next_element(node: LexborNode, *, past_marked: bool = True) -> LexborNode | None:
    """The element after ``node``; with ``past_marked``, past any already marked to go (an ad
    slipped in between a heading and its list must not decide whether the list goes)."""
    after = node.next
    while after is not None and (
        not after.is_element_node or (past_marked and _DROP in after.attrs)
    ):
        after = after.next
    return after


def _mark_recirculation(tree: LexborHTMLParser, marker: _Marker) -> None:
    """A "Related articles" heading and the list after it, inside the content as well: four of
    twenty stories picked per request made an unchanged article a change on every fetch (found
    by an exploratory run)."""
    for heading in css(tree, 'h2,h3,h4,h5,h6,[role="heading" i]'):
        label = fold_spaces(node_text(heading))
        if not _RECIRCULATION_HEADING.fullmatch(label):
            continue
        # the heading's wrapper (<div class=hd><h2>Most read</h2></div><ul>...) stands for it
        for _ in range(_CONTAINER_CLIMB):
            parent = heading.parent
            if parent is None or _next_element(heading) is not None:
                break
            if fold_spaces(node_text(parent)) != label:
                break
            heading = parent
        if marker.holds_a_content_root(heading):
            continue
        after = _next_element(heading)
        marker.mark(heading)
        if (
            after is not None
            and len(node_text(after)) <= _RECIRCULATION_MAX_CHARS
            and not marker.holds_a_content_root(after)
        ):
            marker.mark(after)


def _inside_drop(node: LexborNode | None) -> bool:
    while node is not None and node.is_element_node:
        if _DROP in node.attrs:
            return True
        node = node.parent
    return False


def _mark_chrome(tree: LexborHTMLParser, marker: _Marker) -> list[str]:
    """Landmarks of site chrome, and forms (unless one wraps most of the page: ASP.NET
    WebForms pages put the whole body in one form, and deleting it would fingerprint an empty
    page). Returns the visible headlines, read before a page header holding one goes."""
    nodes = css(tree, _CHROME)
    headlines = [node_text(n) for n in nodes if n.tag == "h1" and not _inside_drop(n)]
    forms = [n for n in tree.tags("form") if not _within(n, _is_form)]
    landmarks = (*tree.tags("header"), *tree.tags("footer"))
    page_sized = {n.mem_id for n in landmarks if marker.wraps_half(n)}
    for node in nodes:
        tag = node.tag
        if tag == "form":  # a form with a role is judged as a form, wherever it is
            forms.append(node)
        elif node.mem_id in page_sized:
            continue
        elif tag in ("nav", "aside", "header", "footer") or (
            tag != "h1" and (node.attrs.get("role") or "").strip().lower() in _CHROME_ROLES
        ):
            marker.mark(node)
    for node in (*landmarks, *css(tree, _LEGACY_CHROME)):
        if (
            node.tag not in _PAGE_ROOTS
            and not _within(node, _holds_page_level)
            and node.mem_id not in page_sized
        ):
            marker.mark(node)
    for node in forms:
        if not (marker.wraps_half(node) or _buys(node)):
            marker.mark(node)
    for node in css(tree, _LEGACY_CHROME_STEMS):
        words = {w.lower() for w in _WORD_PART.findall(_named_words(node.attrs.get("id") or ""))}
        if words & _LEGACY_CHROME_WORDS and not _within(node, _holds_page_level):
            marker.mark_guarded(node)
    return [h for h in headlines if h]


#: what the attributes of a shop's add-to-cart form say (osCommerce's cart_quantity with its
#: action=add_product, Magento's product_addtocart_form, Shopify's /cart/add, WooCommerce's
#: form.cart): the product it sells, its options and often its price are inside it
_BUYING = re.compile(r"cart|basket|add_?product|buy|checkout", re.I)


def _buys(form: LexborNode) -> bool:
    """An add-to-cart form is the product, not the site's chrome: dropped like a search or
    newsletter form, a shop's price and description inside it went with it, and every edit
    of them was missed (found by a run over real pages the project had not seen)."""
    attrs = form.attrs
    return any(
        _BUYING.search(value)
        for value in (attrs.get(name) for name in ("action", "name", "id", "class"))
        if value
    )


def _within(node: LexborNode, test: Callable[[LexborNode], bool]) -> bool:
    """Whether an ancestor of ``node`` passes ``test``."""
    at = node.parent
    while at is not None and at.is_element_node:
        if test(at):
            return True
        at = at.parent
    return False


def _is_form(node: LexborNode) -> bool:
    return node.tag == "form"


def _holds_page_level(node: LexborNode) -> bool:
    """An element whose headers and footers are its own, not the page's (a role is read as
    ``[role=main i]`` reads it: the whole value, case aside)."""
    return node.tag in _PAGE_LEVEL_BLOCKERS or (node.attrs.get("role") or "").lower() == "main"


def remove_boilerplate(tree: LexborHTMLParser, *, protect: bool = False) -> list[str]:
    """Drop everything but the content; returns the visible headlines (``<h1>``)."""
    if tree.root is None:
        return []
    marker = _Marker(tree)
    _mark_ads(tree, marker)
    _mark_labelled_blocks(tree, marker)
    _mark_counting_buttons(tree, marker)
    _mark_recirculation(tree, marker)
    headlines = _mark_chrome(tree, marker)
    if protect:
        # Configured selectors win: nothing that is or holds a selected element goes.
        for node in css(tree, f"[{_DROP}]"):
            if css_first(node, f"[{_KEEP}]") is not None:
                del node.attrs[_DROP]
    drop_nodes(css(tree, _OUTERMOST_DROPS))
    return headlines


def selected(tree: LexborHTMLParser, selectors: Sequence[str]) -> list[LexborNode]:
    """The configured selectors' matches, in selector order, everything else the rules drop
    removed around them."""
    matches: list[LexborNode] = []
    for selector in selectors:
        try:
            matches.extend(css(tree, selector))
        except SelectolaxError as exc:
            raise ValueError(f"invalid CSS selector {selector!r}: {exc}") from None
    for node in matches:
        node.attrs[_KEEP] = ""
    for node in css(tree, _NOISE):
        node.attrs[_DROP] = ""
    remove_boilerplate(tree, protect=True)
    return matches
