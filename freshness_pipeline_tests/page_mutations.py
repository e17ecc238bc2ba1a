"""Serving a real page many times the way live sites do, to score change detection.

Each fetch of a page gets fresh volatile noise (:data:`VOLATILE_KINDS`): a rotating promotional
block with visible text at the top of the body and another inline in the article (marked by a
class or id, a ``rel=sponsored`` link, or only by a visible "Sponsored"/"Advertisement"/
"Anzeige"/"Promoted" label), a consent banner, an "Updated ..." timestamp and a relative time
in the byline, view and comment counters, a plain-text server stamp after the article (a
visitor counter, the time the page took and the node that served it, an epoch stamp), a CSRF token in a hidden input and a meta tag and a
visible request id, cache-busting query strings on every src and href, shuffled attribute
order and changed whitespace. Between some fetches the content is edited
(:data:`EDIT_KINDS`): a sentence changed, a paragraph added or removed, a price or count in
the text changed, the headline changed.

"The content" is found without the project's extractor: text pieces of the page that appear
in the article text newspaper4k expects from it (or, for pages without one, long paragraphs
outside nav, aside, header and footer). :func:`without_semantics` turns a page into one with
no semantic markup at all (landmark elements become ``<div>``, ARIA roles and microdata go).

Standard library and lxml only, so a throwaway venv with another extractor can replay the
same fetches from the same seeds.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import lxml.html
from lxml import etree

VOLATILE_KINDS = (
    "top_promo",
    "inline_promo",
    "consent_banner",
    "timestamp",
    "relative_time",
    "counters",
    "server_stamp",
    "tokens",
    "cache_busters",
    "attribute_order",
    "whitespace",
)
EDIT_KINDS = ("sentence", "paragraph_added", "paragraph_removed", "number", "headline")

_BRANDS = ["ShopCo", "Acme Travel", "Globex Bank", "Initech Cloud", "Umbrella Health", "Hooli"]
_OFFERS = [
    "Save {n}% on your first order",
    "Get {n} free nights when you book today",
    "Rates from {n}.99 a month, limited time",
    "{n} readers switched this week - see why",
    "Win one of {n} prizes in our summer draw",
    "The {n} gadgets everyone is buying",
]
_WORDS = [
    "river", "mountain", "lantern", "harbor", "orchard", "meadow", "violin", "canyon", "council",
    "budget", "market", "report", "station", "village", "museum", "library", "winter", "summer",
    "bridge", "engine", "harvest", "signal",
]  # fmt: skip
_SEMANTIC_TAGS = ("main", "article", "nav", "aside", "header", "footer", "section", "time")
_SEMANTIC_ATTRS = ("role", "itemprop", "itemscope", "itemtype", "aria-hidden", "aria-label")
_CHROME_TAGS = frozenset(("nav", "aside", "header", "footer"))
_CHROME_ROLES = frozenset(("navigation", "banner", "contentinfo", "complementary"))
_SKIP_TAGS = frozenset(("script", "style", "noscript", "template", "title", "head"))
_BLOCK_TAGS = frozenset(("p", "div", "li", "td", "blockquote", "section", "article", "dd"))
_NUMBER = re.compile(r"[$€£]\s?\d[\d,.]*\d|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?%|\b\d{3,}\b")
_YEAR = re.compile(r"(?:19|20)\d\d")


def _fold(text: str) -> str:
    return " ".join(text.split())


@dataclass
class _Piece:
    """One run of text in the tree: an element's ``text``, or the ``tail`` after it."""

    element: etree._Element
    attr: str  # "text" or "tail"

    def get(self) -> str:
        return getattr(self.element, self.attr) or ""

    def set(self, value: str) -> None:
        setattr(self.element, self.attr, value)

    def block(self) -> etree._Element:
        """The block element this text belongs to."""
        node = self.element if self.attr == "text" else self.element.getparent()
        while node is not None and node.tag not in _BLOCK_TAGS:
            parent = node.getparent()
            if parent is None or parent.tag == "body":
                break
            node = parent
        return node if node is not None else self.element


def _pieces(root: etree._Element) -> Iterator[_Piece]:
    for element in root.iter():
        if not isinstance(element.tag, str) or element.tag in _SKIP_TAGS:
            continue
        if any(a.tag in _SKIP_TAGS for a in element.iterancestors()):
            continue
        yield _Piece(element, "text")
        parent = element.getparent()
        if parent is not None and parent.tag not in _SKIP_TAGS:
            yield _Piece(element, "tail")


def _in_chrome(element: etree._Element) -> bool:
    """Inside what the page's author marked as site chrome: a landmark element or role."""
    for node in (element, *element.iterancestors()):
        if node.tag in _CHROME_TAGS or node.get("role") in _CHROME_ROLES:
            return True
    return False


def content_pieces(root: etree._Element, article_text: str | None) -> list[_Piece]:
    """The text pieces that are the article: found in its expected text, or long paragraphs."""
    expected = _fold(article_text) if article_text else None
    found: list[_Piece] = []
    for piece in _pieces(root):
        text = _fold(piece.get())
        cjk = text and not any(c == " " for c in text[:40])
        if len(text) < (20 if cjk else 30):
            continue
        if expected is not None:
            if text in expected and len(text) >= (20 if cjk else 60):
                found.append(piece)
        elif piece.attr == "text" and not _in_chrome(piece.element):
            # a paragraph, or on a front page without one the teasers' headlines
            tag = piece.element.tag
            if tag == "p" or (tag in ("a", "h2", "h3") and len(text) >= 30):
                found.append(piece)
    return found


def without_semantics(html: bytes) -> bytes:
    """The page with no semantic markup: landmarks become <div>, roles and microdata go."""
    root = lxml.html.document_fromstring(html)
    for element in root.iter(*_SEMANTIC_TAGS):
        element.tag = "div"
    for element in root.iter():
        if isinstance(element.tag, str):
            for attr in _SEMANTIC_ATTRS:
                element.attrib.pop(attr, None)
    return lxml.html.tostring(root, encoding="utf-8", doctype="<!DOCTYPE html>")


# ------------------------------------------------------------------------------ volatile noise


def _promo(rng: random.Random) -> str:
    return f"{rng.choice(_BRANDS)}: {rng.choice(_OFFERS).format(n=rng.randint(2, 99))}"


def _promo_block(rng: random.Random, style: int, *, inline: bool) -> etree._Element:
    text, url = _promo(rng), f"https://ads.example/c/{rng.getrandbits(32):x}?cb={rng.random()}"
    templates = [
        f'<div class="ad">Sponsored: {text}</div>',
        f'<div class="ad-slot top-banner"><a href="{url}">{text}</a></div>',
        f'<div id="div-gpt-ad-{rng.randint(10**5, 10**6)}-0" class="adContainer">'
        f"<span>Advertisement</span><p>{text}</p></div>",
        f'<div class="promo_box"><p>{text}</p></div>',
        f'<div><small>Advertisement</small><a href="{url}">{text}</a></div>',
        f"<div><span>Anzeige</span> {text}</div>",
        f"<p>Promoted: {text}</p>",
        f'<div class="sponsored-post"><h3>{text}</h3><p>{_promo(rng)}</p></div>',
        f'<section class="native-ad"><h4>Sponsored by {rng.choice(_BRANDS)}</h4>'
        f"<p>{text}</p></section>",
        f'<ins class="adsbygoogle" data-ad-client="ca-pub-{rng.randint(10**9, 10**10)}">'
        f"{text}</ins>",
        f'<div class="BannerAd"><strong>{text}</strong></div>',
        f'<p><a href="{url}" rel="sponsored">{text}</a></p>',
        f'<div><a href="{url}" rel="nofollow sponsored">{text}</a></div>',
        f"<div><p><b>Sponsored</b></p><p>{text}</p></div>",
    ]
    if inline:
        templates += [f'<p>Read more: <a rel="sponsored" href="{url}">{text}</a></p>']
    return lxml.html.fragment_fromstring(templates[style % len(templates)])


def _timestamp(rng: random.Random, style: int) -> str:
    day, month, year = rng.randint(1, 28), rng.randint(1, 12), rng.randint(2020, 2027)
    hour, minute, second = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
    names = ["January", "February", "March", "April", "May", "June", "July", "August",
             "September", "October", "November", "December"]  # fmt: skip
    month_name, weekday = names[month - 1], rng.choice(["Mon", "Tue", "Wed", "Thu", "Fri"])
    formats = [
        f"{year}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z",
        f"{weekday}, {day:02d} {month_name[:3]} {year} {hour:02d}:{minute:02d}:{second:02d} GMT",
        f"{month_name} {day}, {year} at {hour % 12 + 1}:{minute:02d} {rng.choice(['am', 'pm'])}",
        f"{day:02d}.{month:02d}.{year}, {hour:02d}:{minute:02d} Uhr",
        f"{month}/{day}/{year} {hour % 12 + 1}:{minute:02d} PM ET",
        f"{day} {month_name} {year}",
        f"{hour:02d}:{minute:02d}",
    ]
    return formats[style % len(formats)]


def _relative(rng: random.Random) -> str:
    """A page's age as sites print it: the unit moves with the age, so any can follow any."""
    n = rng.randint(2, 59)
    return rng.choice(
        [f"{n} minutes ago", f"{n % 23 + 1} hours ago", "an hour ago", f"{n}m ago",
         f"{n % 6 + 1} days ago", "just now", f"{n} mins ago"]
    )  # fmt: skip


def _counter(rng: random.Random, style: int) -> str:
    n = rng.randint(100, 2_000_000)
    templates = [
        f'<span class="view-count">{n:,} views</span>', f"<span>{n} comments</span>",
        f'<span class="views">Views: {n}</span>', f"<span>{n / 1000:.1f}K likes</span>",
        f'<span class="share-count">{n % 5000}</span>',
    ]  # fmt: skip
    return templates[style % len(templates)]


def _server_stamp(rng: random.Random, style: int) -> str:
    """What old and hand-made sites print in plain text, no class to tell it from content: a
    visitor counter, how long the page took and which machine served it, an epoch stamp."""
    n, k = rng.randint(1_000, 2_000_000), rng.randint(1, 40)
    templates = [
        f"You are visitor number {n}",
        f"Page generated in {rng.random():.4f} seconds. Served by node web{k}",
        f"{n % 500 + 1} users online",
        f"Rendered on app-{k:02d}.example.net in {n % 900 + 10} ms",
        f"Cache stamp {1_700_000_000 + n}.{rng.randint(0, 999):03d}",
    ]
    return templates[style % len(templates)]


def _token(rng: random.Random, n: int = 24) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    return "".join(rng.choice(alphabet) for _ in range(n))


def _insert_first(parent: etree._Element, child: etree._Element) -> None:
    child.tail = (child.tail or "") + (parent.text or "")
    parent.text = None
    parent.insert(0, child)


def _add_volatile(
    root: etree._Element, body: etree._Element, content: list[_Piece], kinds: set[str],
    rng: random.Random, style: random.Random,
) -> None:  # fmt: skip
    """Noise of ``kinds``: values from ``rng`` (new each fetch), markup from ``style`` (the
    same for every fetch of a page, as a site's templates are)."""
    head = root.find("head")
    first_block = content[0].block() if content else None
    if "top_promo" in kinds:
        _insert_first(body, _promo_block(rng, style.randrange(99), inline=False))
    if "inline_promo" in kinds and content:
        block = content[style.randrange(len(content))].block()
        block.addnext(_promo_block(rng, style.randrange(99), inline=True))
    if "consent_banner" in kinds:
        body.append(
            lxml.html.fragment_fromstring(
                (
                    [
                        f'<div class="cookie-banner">We use cookies. Consent id {_token(rng, 12)}'
                        f" ({rng.randint(1, 999)} partners)</div>",
                        f'<div id="onetrust-consent-sdk"><p>Your privacy choices, '
                        f"session {rng.getrandbits(40):x}</p></div>",
                    ]
                )[style.randrange(2)]
            )
        )
    if "timestamp" in kinds or "relative_time" in kinds:
        parts = []
        if "timestamp" in kinds:
            parts.append(f"Updated {_timestamp(rng, style.randrange(99))}")
        if "relative_time" in kinds:
            parts.append(f"Posted {_relative(rng)}")
        byline = lxml.html.fragment_fromstring(f'<p class="byline">{" · ".join(parts)}</p>')
        if first_block is None or first_block is body:
            _insert_first(body, byline)
        else:
            first_block.addprevious(byline)
    if "counters" in kinds:
        target = content[-1].block() if content else body
        target.addnext(
            lxml.html.fragment_fromstring(f"<div>{_counter(rng, style.randrange(99))}</div>")
        )
        chrome = next(iter(root.iter("nav", "header", "aside", "footer")), None)
        if chrome is not None:
            chrome.append(lxml.html.fragment_fromstring(_counter(rng, style.randrange(99))))
    if "server_stamp" in kinds:
        target = content[-1].block() if content else body
        target.addnext(
            lxml.html.fragment_fromstring(f"<p>{_server_stamp(rng, style.randrange(99))}</p>")
        )
    if "tokens" in kinds:
        token = _token(rng)
        form = lxml.html.fragment_fromstring(
            f'<form method="post" action="/subscribe"><input type="hidden" name="csrf" '
            f'value="{token}"><input name="email"></form>'
        )
        body.append(form)
        if head is not None:
            head.append(etree.Element("meta", name="csrf-token", content=token))
        rid = [f"{rng.getrandbits(64):016x}", _token(rng, 20)][style.randrange(2)]
        body.append(lxml.html.fragment_fromstring(f'<p class="request">Request {rid}</p>'))


def _shake(root: etree._Element, kinds: set[str], rng: random.Random) -> None:
    """Cache busters, attribute order and whitespace: changes of the bytes, not the page."""
    stamp = str(rng.getrandbits(40))
    for element in root.iter():
        if not isinstance(element.tag, str):
            continue
        if "cache_busters" in kinds:
            for attr in ("src", "href"):
                value = element.get(attr)
                if value and not value.startswith(("#", "javascript:", "mailto:")):
                    element.set(attr, f"{value}{'&' if '?' in value else '?'}_={stamp}")
        if "attribute_order" in kinds and len(element.attrib) > 1:
            items = list(element.attrib.items())
            rng.shuffle(items)
            element.attrib.clear()
            for key, value in items:
                element.set(key, value)
        if "whitespace" in kinds and rng.random() < 0.3:
            if element.text and element.tag not in ("script", "style", "pre", "textarea"):
                element.text = rng.choice(["\n  ", " ", "\t"]) + element.text
            element.tail = (element.tail or "") + rng.choice(["\n", "  ", "\n\n    "])


# -------------------------------------------------------------------------------- content edits


def _edit(root: etree._Element, content: list[_Piece], kind: str, rng: random.Random) -> None:
    """Change the content by one edit of ``kind`` (or, where the page cannot take that kind,
    by a changed sentence), so that every edit is a real change."""
    live = [p for p in content if _fold(p.get())]
    if kind == "headline":
        heads = [h for h in root.iter("h1") if len(_fold(h.text_content())) >= 8]
        target = max(heads, key=lambda h: len(h.text_content()), default=None)
        pieces = [p for p in _pieces(target) if _fold(p.get())] if target is not None else []
        title = root.find(".//title")
        if not pieces and title is not None and _fold(title.text or ""):
            pieces = [_Piece(title, "text")]
        if pieces:
            piece = max(pieces, key=lambda p: len(p.get()))
            piece.set(_change_words(piece.get(), rng))
            return
        kind = "sentence"
    if not live:
        body = root.find("body")
        assert body is not None
        new = etree.SubElement(body, "p")
        new.text = _sentence(rng)
        content.append(_Piece(new, "text"))
        return
    if kind == "paragraph_removed":
        piece = rng.choice(live)
        block = piece.block()
        parent = block.getparent()
        if len(live) > 2 and block.tag == "p" and parent is not None:
            parent.remove(block)
            content[:] = [p for p in content if p.block() is not block]
            return
        kind = "sentence"
    if kind == "number":
        with_numbers = [p for p in live if _content_numbers(p.get())]
        if with_numbers:
            piece = rng.choice(with_numbers)
            text = piece.get()
            match = rng.choice(_content_numbers(text))
            number = match.group(0)
            digits = [i for i, c in enumerate(number) if c.isdigit()]
            at = digits[-1] if rng.random() < 0.5 else rng.choice(digits)
            changed = number[:at] + str((int(number[at]) + rng.randint(1, 9)) % 10)
            piece.set(text[: match.start()] + changed + number[at + 1 :] + text[match.end() :])
            return
        kind = "sentence"
    if kind == "paragraph_added":
        new = etree.Element("p")
        new.text = _sentence(rng)
        rng.choice(live).block().addnext(new)
        return
    piece = rng.choice(live)
    piece.set(_change_words(piece.get(), rng))


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(12, 30))).capitalize() + "."


def _content_numbers(text: str) -> list[re.Match[str]]:
    """Prices, counts and quantities: not a year, nor part of a date or time."""
    out = []
    for match in _NUMBER.finditer(text):
        around = text[max(0, match.start() - 1) : match.end() + 1]
        if _YEAR.fullmatch(match.group(0)) or ":" in around or "/" in around:
            continue
        out.append(match)
    return out


def _change_words(text: str, rng: random.Random) -> str:
    words = text.split(" ")
    candidates = [i for i, w in enumerate(words) if len(w) >= 3 and w.isalpha()]
    if candidates:
        i = rng.choice(candidates)
        words[i] = rng.choice([w for w in _WORDS if w != words[i].lower()])
        return " ".join(words)
    at = rng.randint(0, len(text))
    return f"{text[:at]}{rng.choice(_WORDS)}{text[at:]}"


# ------------------------------------------------------------------------------------ fetches


@dataclass(frozen=True)
class Fetch:
    """One response body, and whether the content changed since the previous one."""

    body: bytes
    edit: str | None  # the edit made since the previous fetch, None when unchanged


def fetches(
    html: bytes,
    article_text: str | None,
    *,
    seed: int,
    count: int,
    edits_every: int = 3,
    volatile: tuple[str, ...] = VOLATILE_KINDS,
    edit_kinds: tuple[str, ...] = EDIT_KINDS,
) -> Iterator[Fetch]:
    """``count`` fetches of one page: the first is the baseline (``edit`` None), then every
    ``edits_every``-th carries one content edit, cycling through ``edit_kinds``; each has
    fresh noise of the ``volatile`` kinds."""
    rng = random.Random(seed)
    base = lxml.html.document_fromstring(html)
    body = base.find("body")
    if body is None:
        body = etree.SubElement(base, "body")
    content = content_pieces(base, article_text)
    # a price and a count in the text, so every page has numbers that are content
    if content:
        piece = content[len(content) // 2]
        piece.set(piece.get().rstrip() + " (Price: $1,249.00; 3,500 units in stock.)")
    kinds = set(volatile)
    for n in range(count):
        edit = None
        if n and n % edits_every == 0 and edit_kinds:
            edit = edit_kinds[(n // edits_every - 1) % len(edit_kinds)]
            _edit(base, content, edit, rng)
        page = copy.deepcopy(base)
        page_body = page.find("body")
        assert page_body is not None
        # the same pieces in the copy, found by their elements' place in document order
        place = {id(e): i for i, e in enumerate(base.iter())}
        copied = list(page.iter())
        page_content = [
            _Piece(copied[place[id(p.element)]], p.attr) for p in content if id(p.element) in place
        ]
        _add_volatile(page, page_body, page_content, kinds, rng, random.Random(seed))
        _shake(page, kinds, rng)
        yield Fetch(lxml.html.tostring(page, encoding="utf-8", doctype="<!DOCTYPE html>"), edit)


@dataclass
class Score:
    unchanged: int = 0
    false_changes: int = 0
    edited: int = 0
    missed_changes: int = 0

    @property
    def false_change_rate(self) -> float:
        return self.false_changes / self.unchanged if self.unchanged else 0.0

    @property
    def missed_change_rate(self) -> float:
        return self.missed_changes / self.edited if self.edited else 0.0

    def add(self, other: Score) -> None:
        self.unchanged += other.unchanged
        self.false_changes += other.false_changes
        self.edited += other.edited
        self.missed_changes += other.missed_changes


def score(fingerprints: list[str], stream: list[Fetch]) -> Score:
    """Each fetch after the first against the one before it."""
    result = Score()
    for before, after, fetch in zip(fingerprints, fingerprints[1:], stream[1:], strict=False):
        if fetch.edit is None:
            result.unchanged += 1
            result.false_changes += before != after
        else:
            result.edited += 1
            result.missed_changes += before == after
    return result


def score_page(
    fingerprint: Callable[[bytes], str], html: bytes, article_text: str | None, **kwargs: object
) -> Score:
    stream = list(fetches(html, article_text, **kwargs))  # type: ignore[arg-type]
    return score([fingerprint(f.body) for f in stream], stream)
