"""Elements nested deeper than a browser nests them, flattened before the HTML parser sees them.

The HTML parser's work grows with the square of the nesting depth: every start tag searches the
stack of open elements for the elements it may close. A page of 150,000 nested ``<div>`` (1.6 MB,
well inside the body cap) held a cycle for a minute, and 500,000 for eleven: one hostile server
costing far more than one fetch (found by an outside audit). Browsers stop nesting at 512
(Chromium's parser puts deeper elements beside the 512th), so no page that renders relies on
deeper nesting; here a start tag that would open an element deeper than :data:`MAX_DEPTH` is left
out with its end tag, and its text stays where it was.

Most pages never reach the model: a page with fewer tags than :data:`MAX_DEPTH` cannot nest that
deep, and a larger one is first bounded by one vectorized pass (each name's start tags less its
end tags, void elements and those whose end tag is optional left out). Only a page whose bound
passes the limit is walked tag by tag, with a stack that closes elements as the parser does for
the common cases (end tags matched within scope, ``<p>`` closed by blocks, list items and table
cells closed by their siblings). What the model does not follow (the adoption agency's
reconstructed formatting elements, end tags ignored across a table) can still make a page
deeper than the limit; it bounds the pages that nest by plain repetition.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["MAX_DEPTH", "flatten_deep_nesting", "nesting_bound"]

#: How deep an element may open: Chromium's parser limit.
MAX_DEPTH = 512

_VOID = b"area base br col embed hr img input link meta source track wbr param keygen frame "
_OPTIONAL_END = b"p li dt dd option optgroup tr td th thead tbody tfoot rb rt rp rtc html head body"
#: Elements that cannot make a page deeper by repetition: no content, or closed by a sibling.
_FLAT = frozenset((_VOID + _OPTIONAL_END).split())
#: Below this many bytes a page's tags are counted before anything else: most have too few
#: to nest past the limit. A larger page is searched for its tags once, not twice.
_COUNTED_FIRST = 64 * 1024
_NAME_BYTES = 8
_OFFSETS = np.arange(_NAME_BYTES, dtype=np.uint8)


def _codes(names: list[bytes]) -> np.ndarray:
    padded = b"".join(n[: _NAME_BYTES - 1].ljust(_NAME_BYTES, b"\0") for n in names)
    return np.sort(np.frombuffer(padded, dtype=np.uint64))


_FLAT_CODES = _codes(sorted(_FLAT))
_RAW = frozenset(b"script style textarea title xmp iframe noembed noframes".split())
_RAW_CODES = _codes(sorted(_RAW))
_A, _Z, _ZERO, _NINE = ord("a"), ord("z"), ord("0"), ord("9")


def nesting_bound(document: bytes) -> int:
    """An upper bound of how deep the page nests, unless end tags the parser ignores lower it:
    the most start tags open at once, counted per element name as start tags less end tags, at
    no point below zero, over the elements that can nest (void elements and those whose end tag
    is optional left out); tags in comments count too, which only raises it."""
    if len(document) < _COUNTED_FIRST and (tags := document.count(b"<")) <= MAX_DEPTH:
        return tags
    raw = np.frombuffer(document, dtype=np.uint8)
    opens = np.flatnonzero(raw[:-1] == ord("<"))
    if opens.size <= MAX_DEPTH:
        return int(opens.size)
    closing = raw[opens + 1] == ord("/")
    start = opens + 1 + closing
    # a name cut by the document's end reads its last byte again: harmless for a bound
    window = raw[np.minimum(start[:, None] + _OFFSETS, raw.size - 1)] | 0x20
    alnum = ((window >= _A) & (window <= _Z)) | ((window >= _ZERO) & (window <= _NINE))
    alnum[:, -1] = False  # a longer name is read as its first seven characters
    name = window * (alnum.argmin(axis=1)[:, None] > _OFFSETS)
    codes = np.ascontiguousarray(name).view(np.uint64).ravel()
    at = np.minimum(np.searchsorted(_FLAT_CODES, codes), _FLAT_CODES.size - 1)
    nests = alnum[:, 0] & (window[:, 0] >= _A) & (_FLAT_CODES[at] != codes)
    # a script's (or style's, title's...) text is no markup: the tags after a raw-text
    # element's start tag and before the next raw-text end tag are left out
    at = np.minimum(np.searchsorted(_RAW_CODES, codes), _RAW_CODES.size - 1)
    raw_tag = _RAW_CODES[at] == codes
    events = np.where(raw_tag, np.arange(codes.size), -1)
    last = np.maximum.accumulate(np.concatenate(([-1], events[:-1])))
    nests &= ~raw_tag & ((last < 0) | closing[np.maximum(last, 0)])
    codes, closing = codes[nests], closing[nests]
    if not codes.size:
        return 0
    step = 1 - 2 * closing.astype(np.int64)
    # per name, so that stray end tags of one element do not hide another's depth
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    first = np.ones(codes.size, dtype=bool)
    first[1:] = sorted_codes[1:] != sorted_codes[:-1]
    group = np.cumsum(first) - 1
    totals = np.cumsum(step[order])
    running = totals - (totals - step[order])[first][group]  # each name's count so far
    # Lindley's recursion per name: the count less its lowest point so far (zero at most);
    # an offset per name keeps one name's low points from reaching the next's
    offset = group * (np.int64(1) << 40)
    low = np.minimum.accumulate(np.minimum(running, 0) - offset) + offset
    open_now = running - low
    previous = np.concatenate(([0], open_now[:-1]))
    change = np.empty_like(open_now)
    change[order] = open_now - np.where(first, 0, previous)
    return int(np.cumsum(change).max(initial=0))


_TOKEN = re.compile(
    rb"<!--.*?(?:-->|\Z)"
    rb"|<(?P<raw>" + b"|".join(sorted(_RAW)) + rb")(?=[\s/>])"
    rb"(?:\"[^\"]*\"|'[^']*'|[^'\">])*>"
    rb"|<(?P<end>/?)(?P<name>[A-Za-z][^\s/>]*)(?:\"[^\"]*\"|'[^']*'|[^'\">])*>?",
    re.I | re.S,
)
_CLOSES_P = frozenset(
    b"address article aside blockquote center details dialog dir div dl fieldset figcaption "
    b"figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr main menu nav ol p pre section "
    b"summary table ul li dd dt".split()
)
_CELLS = frozenset((b"tr", b"td", b"th"))
_SECTIONS = frozenset((b"tbody", b"thead", b"tfoot")) | _CELLS
_SIBLINGS_CLOSE = {
    b"li": frozenset((b"li",)),
    b"dt": frozenset((b"dt", b"dd")),
    b"dd": frozenset((b"dt", b"dd")),
    b"option": frozenset((b"option",)),
    b"optgroup": frozenset((b"optgroup", b"option")),
    b"tr": _CELLS,
    b"td": frozenset((b"td", b"th")),
    b"th": frozenset((b"td", b"th")),
    b"tbody": _SECTIONS,
    b"thead": _SECTIONS,
    b"tfoot": _SECTIONS,
    b"body": frozenset((b"head",)),
}
_SCOPE = frozenset(b"table td th caption template html object marquee applet".split())
_VOID_NAMES = frozenset(_VOID.split())
_NOT_CLOSED = frozenset((b"html", b"body"))
#: How far down the stack an end tag looks for its element: far enough for any page's markup,
#: and a bound on the walk's work whatever the page holds.
_END_TAG_REACH = 64


def flatten_deep_nesting(document: str | bytes) -> str | bytes:
    """``document`` with every start tag that would open an element deeper than
    :data:`MAX_DEPTH`, and its end tag, left out (their text kept); the document itself when it
    nests no deeper, which is every page a browser renders as written."""
    data = document if isinstance(document, bytes) else document.encode("utf-8", "surrogatepass")
    if nesting_bound(data) <= MAX_DEPTH:
        return document
    cut = _deep_tags(data)
    if not cut:
        return document
    kept, at = [], 0
    for begin, end in cut:
        kept.append(data[at:begin])
        at = end
    kept.append(data[at:])
    flat = b"".join(kept)
    return flat if isinstance(document, bytes) else flat.decode("utf-8", "surrogatepass")


def _deep_tags(data: bytes) -> list[tuple[int, int]]:
    """The spans of the start and end tags of elements deeper than the limit, in order."""
    names: list[bytes] = []
    deep: list[bool] = []  # whether each open element was left out
    shallow = 0  # open elements kept
    cut: list[tuple[int, int]] = []
    lowered = data.lower()
    at = 0
    while (match := _TOKEN.search(data, at)) is not None:
        at = match.end()
        if match.group("raw") is not None:
            # its text is no markup: the next tag is its end tag
            at = lowered.find(b"</" + match.group("raw").lower(), at)
            if at < 0:
                break  # the rest of the page is the element's text
            continue
        name = match.group("name")
        if name is None:
            continue
        name = name.lower()
        if match.group("end"):
            if name in _NOT_CLOSED:
                continue
            for i in range(len(names) - 1, max(-1, len(names) - 1 - _END_TAG_REACH), -1):
                if names[i] == name:
                    if deep[i]:
                        cut.append(match.span())
                    shallow -= sum(1 for d in deep[i:] if not d)
                    del names[i:], deep[i:]
                    break
                if names[i] in _SCOPE:
                    break
            continue
        if name in _VOID_NAMES:
            continue
        if names and names[-1] == b"p" and name in _CLOSES_P:
            shallow -= not deep.pop()
            names.pop()
        siblings = _SIBLINGS_CLOSE.get(name)
        while siblings and names and names[-1] in siblings:
            shallow -= not deep.pop()
            names.pop()
        too_deep = shallow >= MAX_DEPTH
        if too_deep:
            cut.append(match.span())
        else:
            shallow += 1
        names.append(name)
        deep.append(too_deep)
    return cut
