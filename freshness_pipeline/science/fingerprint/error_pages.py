"""Error pages served with 200 ("soft errors"): a maintenance notice, a bot challenge, a
"page not found" or a proxy's "service unavailable" that a server or CDN sends with status 200.

Taken at their word they are a new version of the page and, one fetch later, a change back:
two false changes, a version of nothing in the copy and a tombstone-like blank downstream. A
crawler cannot see every soft error, but the common ones name themselves in the title, and
their text is short. Both must hold: a page is judged an error page only when one part of its
title (split at the usual " | ", " - " separators between a page's and a site's name) is, word
for word, one of the phrases below, alone or with an HTTP status code, and the whole text is
under :data:`MAX_ERROR_PAGE_CHARS`. "Error - JavaScript | MDN" or "Error handling in Python"
are long pages or longer titles, so reference pages about errors stay pages. A title part of
one word ("Gone", "Oops", "Forbidden", "Error") is also the name of a song, a game or a film:
it counts only when the text says little else (under :data:`ONE_WORD_TITLE_CHARS` besides the
title) or says more of an error (a longer phrase, "try again", a status code); "Gone | Sarah
Lane" on a track's page, with its description, was a soft 404, never versioned.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["MAX_ERROR_PAGE_CHARS", "ONE_WORD_TITLE_CHARS", "ErrorPageKind", "error_page_kind"]

#: an error page says little: a page with more text than this (title included) is content
MAX_ERROR_PAGE_CHARS = 1500

#: what the error page says: the server is failing ("unavailable"), it refuses this client for
#: now ("throttled": rate limits and bot challenges), the page is not there ("not_found", a
#: "soft 404") or not ours to read ("denied")
ErrorPageKind = Literal["unavailable", "throttled", "not_found", "denied"]

_PHRASES: dict[ErrorPageKind, tuple[str, ...]] = {
    "unavailable": (
        r"(?:service|site|server|page) (?:is )?(?:temporarily )?unavailable",
        r"temporarily unavailable",
        r"internal server error",
        r"server error",
        r"bad gateway",
        r"gateway time ?out",
        r"(?:site|scheduled|planned) maintenance",
        r"(?:site )?(?:is )?(?:under|down for) maintenance",
        r"maintenance mode",
        r"we'?ll be (?:right )?back(?: soon)?",
        r"(?:an? )?(?:unexpected )?error(?: (?:has )?occurred)?",
        r"error page",
        r"(?:oops )?something went wrong",
        r"oops",
        r"database error",
        r"error establishing a database connection",
    ),
    "throttled": (
        r"too many requests",
        r"rate limit(?:ed| exceeded)?",
        r"just a moment",
        r"attention required",
        r"please wait",
        r"one more step",
        r"(?:security|robot|browser|human) (?:check|verification)",
        r"checking your browser(?: before accessing)?",
        r"are you (?:a )?(?:human|robot)",
        r"verify(?:ing)? you are (?:a )?human",
        r"access to this page has been denied",
    ),
    "not_found": (
        r"(?:page |file |document )?not found",
        r"(?:this )?page (?:does not|doesn't) exist",
        r"gone",
    ),
    "denied": (
        r"access denied",
        r"forbidden",
        r"unauthori[sz]ed",
        r"(?:account|site) suspended",
    ),
}
_CODE = r"[45]\d\d"
#: a status code or the word "error"/"http" may stand before or after the phrase
_AROUND = rf"(?:(?:http|error) )*(?:{_CODE} )?(?:error )?(?:{{phrase}})(?: (?:{_CODE}|error))*"
# The generic "error" phrases are the unavailable kind's, so it is tried last: "Error: page
# not found" is a page not found.
_ORDER: tuple[ErrorPageKind, ...] = ("throttled", "not_found", "denied", "unavailable")
_MATCHERS = tuple(
    (kind, re.compile("|".join(_AROUND.format(phrase=p) for p in _PHRASES[kind])))
    for kind in _ORDER
)
_BARE_CODE = re.compile(rf"(?:(?:http|error) )*{_CODE}(?: error)?")
_KIND_OF_CODE: dict[str, ErrorPageKind] = {
    "429": "throttled",
    "404": "not_found",
    "410": "not_found",
}
_CODE_RE = re.compile(rf"\b{_CODE}\b")
#: a page titled with one error word says little else, or it is a page of that name
ONE_WORD_TITLE_CHARS = 80
#: what corroborates a one-word title: a longer phrase, an error page's usual sentences, or a
#: status code in the text
_ERROR_SENTENCES = (
    r"try again",
    r"went wrong",
    r"no longer (?:available|exists)",
    r"(?:could|can) ?not be (?:found|displayed)",
    r"has been (?:removed|deleted|moved)",
    r"(?:does not|doesn't) exist",
)
_CORROBORATING = re.compile(
    rf"\b{_CODE}\b|"
    + "|".join(
        rf"\b(?:{p})\b"
        for p in (*_ERROR_SENTENCES, *(p for ps in _PHRASES.values() for p in ps if " " in p))
    )
)
_SEPARATORS = re.compile(r"\s+[|\-\u2013\u2014\u00b7\u00bb:]{1,2}\s+")
_NOT_WORD = re.compile(r"[^\w']+")


def _says_more(text: str, title_part: str) -> bool:
    """Whether ``text`` (casefolded) is an error page's besides its title's one word: little
    else, or more words of an error."""
    body = _NOT_WORD.sub(" ", text.replace(title_part, " ", 1).replace("\u2019", "'")).strip()
    return len(body) < ONE_WORD_TITLE_CHARS or _CORROBORATING.search(body) is not None


def error_page_kind(title: str | None, text: str | None) -> ErrorPageKind | None:
    """What kind of error page a 2xx body with this extracted ``title`` and ``text`` is, or
    None when it reads as a page. ``text`` is the normalized extracted text (title included).
    A status code in the title decides the kind (429: throttled, 5xx: unavailable, 404 and 410:
    not_found, other 4xx: denied); without one, the phrase does."""
    if not title or len(text or "") > MAX_ERROR_PAGE_CHARS:
        return None
    for part in _SEPARATORS.split(title.casefold()):
        words = _NOT_WORD.sub(" ", part.replace("\u2019", "'")).strip()
        if not words:
            continue
        kind = next((k for k, m in _MATCHERS if m.fullmatch(words)), None)
        if kind is None and _BARE_CODE.fullmatch(words) is None:
            continue
        code = _CODE_RE.search(words)
        if code is None:
            if " " not in words and not _says_more((text or "").casefold(), part):
                continue
            return kind
        return _KIND_OF_CODE.get(
            code.group(), "unavailable" if code.group()[0] == "5" else "denied"
        )
    return None
