"""Text without the tokens that change while the content does not.

Numbers are content (a price, a count, a score, a year in a sentence, a phone number), so only
the ones known to move by themselves go: dates, clock times, relative times, view and like
counters and visitor counters, copyright years, how long the page took and which machine
served it, and identifiers (hex and base64 tokens, UUIDs, runs of 10+ digits: ids, epoch
timestamps with their fraction, cache busters).

Speed: Python's regex engine skips quickly only to the characters a pattern can start with.
So every pattern here starts at a digit (or, for identifiers, an upper-case letter), which
ordinary prose has few of, and the rare forms that begin with a word ("Nov 30", "Views: 12",
"© 2026", "Monday, ...") are found from their digit, with look-behinds or a look back in
Python at the few matches.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from freshness_pipeline.science.fingerprint.whitespace import fold_spaces

__all__ = ["normalize_content"]

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
    r"|januar|februar|märz|mai|juni|juli|oktober|dezember"
    r"|janvier|février|mars|avril|juin|juillet|août|septembre|octobre|novembre|décembre"
    r"|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre)"
    r"\.?(?![^\W\d_])"
)
_WEEKDAY = (
    r"(?:mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:r(?:s(?:day)?)?)?|fri(?:day)?"
    r"|sat(?:urday)?|sun(?:day)?)\.?|montag|dienstag|mittwoch|donnerstag|freitag|samstag"
    r"|sonntag|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche"
)
_TIME = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s*[ap]\.?\s*m\.?(?![a-z])|\s*uhr\b)?"
_ZONE = (
    r"(?:\s*(?:z|gmt|utc|[ecmp][sd]?t|cet|cest|bst|ist|jst|kst|aest|[+-]\d{2}:?\d{2})(?![a-z]))?"
)
_UNITS = (
    r"(?:s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|wks?|weeks?|mo|mos|months?"
    r"|y|yrs?|years?)"
)
_FOREIGN_UNITS = (
    r"(?:sekunden|minuten|stunden|tagen|wochen|monaten|jahren|segundos|minutos|horas|días|dias"
    r"|semanas|meses|años|secondes|minutes|heures|jours|semaines|mois|ans)"
)
_COUNTED = (
    r"(?:views?|likes?|comments?|reads?|plays?|listens?|followers?|subscribers?|retweets?"
    r"|reposts?|reactions?|upvotes?|replies|reply|visits|hits|aufrufe|kommentare|vues"
    r"|visualizaciones|(?:users?|visitors?|guests?|members?|people)\s+online"
    # "917 shares", "12 people are viewing this", "42 online" (not "3 online courses")
    r"|shares?|(?:people|users|visitors|others|shoppers)\s+(?:are\s+)?(?:viewing|watching|looking)"
    r"|online(?![ \t]*[a-z]))"
)


def _after(words: Sequence[str]) -> str:
    """Look-behinds for "one of ``words``, then the digit just matched", grouped by length (a
    look-behind must have one width)."""
    by_width: dict[int, list[str]] = {}
    for word in words:
        by_width.setdefault(len(word), []).append(re.escape(word))
    return "|".join(rf"(?<=(?:{'|'.join(group)})\d)" for _, group in sorted(by_width.items()))


_COUNTER_LABELS = [
    f"{label}{sep}"
    for label in ("views", "view count", "pageviews", "page views", "viewed", "hits", "visits", "likes",
                  "comments", "reads", "plays", "aufrufe", "vues",
                  # a page's visitor counter, in the words such counters use (not "visitors"
                  # alone: "12,000 visitors" is as often what an article reports)
                  "visitor number", "visitor no.", "you are visitor", "visitors online",
                  "users online", "online users", "online now", "visitors today", "hit counter",
                  "besucher online", "besucherzähler", "read by", "shared", "viewed by")
    for sep in (" ", ": ", ":", " : ")
] + ["visitor #", "visitor no"]  # fmt: skip
_COPYRIGHT_LABELS = ["© ", "©", "(c) ", "copyright ", "copyright © ", "copyright (c) "]
_RELATIVE_LEADS = ["vor ", "hace ", "il y a ", "há ", "fa "]
# How long the server took, which some pages print: "generated in 0.12 s", "took 37 ms".
_TIMING_LEADS = [
    f"{verb} in " for verb in ("generated", "rendered", "served", "loaded", "processed")
]
_TIMING_LEADS += ["took "]
# The last characters of a month name and a space: a number after one may be a month-first
# date ("nov 30", "november 30, 2026"); the look back in Python confirms the month.
_MONTH_ENDS = [
    f"{end}{sep}"
    for end in ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                "dec", "ary", "rch", "ril", "une", "uly", "ust", "ber", "ept", "mai", "rz")
    for sep in (" ", ". ")
]  # fmt: skip

_DIGIT_LED = re.compile(
    # a digit; one that starts a number (\b\d, written so the pattern begins with a digit
    # class) may start a date, time or counter
    r"\d(?:(?<!\w\d)(?:"
    # dates: ISO 8601 (with a time), numeric, CJK and Korean, day-first with a month name
    rf"(?P<date>\d{{3}}-\d{{2}}-\d{{2}}(?:[t ]{_TIME}{_ZONE})?(?!\w)"
    r"|\d{0,3}[/.-]\d{1,2}[/.-]\d{2,4}(?!\d)"
    r"|\d{0,3}\s*년\s*\d{1,2}\s*월\s*\d{1,2}\s*일|\d{0,3}\s*年\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*日)?"
    r"|\d{3}\.\s\d{1,2}\.\s\d{1,2}\.?"
    rf"|\d?(?:st|nd|rd|th|er)?\.?(?:\s+de)?\s+{_MONTH}(?:\s+de)?(?:,?\s+\d{{4}})?"
    rf"(?:,?\s+(?:at\s+|um\s+|à\s+)?{_TIME}{_ZONE})?)"
    # clock times: 12:34, 12:34:56, 9:05 pm, 5pm
    rf"|(?P<time>\d?:\d{{2}}(?::\d{{2}}(?:[.,]\d+)?)?(?:\s*[ap]\.?\s*m\.?(?![a-z])|\s*uhr\b)?"
    rf"{_ZONE}(?!\w)"
    r"|\d?\s*[ap]\.?m\.?(?![a-z])(?!\w))"
    # relative times and counters: "5 minutes ago", "5m ago", "vor 5 minuten", "1.2k views"
    rf"|(?P<relative>\d*\s*{_UNITS}\s+ago(?![a-z])"
    rf"|(?:{_after(_RELATIVE_LEADS)})\d*\s+{_FOREIGN_UNITS}(?!\w))"
    rf"|(?P<counter>[\d.,]*\s*[km]?\+?\s*{_COUNTED}(?![a-z])"
    rf"|(?:{_after(_COUNTER_LABELS)})[\d.,]*[km]?(?![\w.,])"
    rf"|(?:{_after(_COPYRIGHT_LABELS)})\d{{3}}(?:\s*[-–]\s*\d{{4}})?(?!\w)"
    rf"|(?:{_after(_TIMING_LEADS)})[\d.,]*\s*(?:ms|milliseconds?|s|secs?|seconds?)(?![a-z]))"
    # a day after what may be a month: "nov 30", "november 30, 2026 12:34" (a month and a
    # year alone, "may 2026", is what a text says, not when it was served)
    rf"|(?P<month_first>(?:{_after(_MONTH_ENDS)})\d?(?!\d)(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"(?:,?\s+(?:at\s+)?{_TIME}{_ZONE})?(?!\w))"
    r")"
    # or the digit is part of an identifier: it touches a letter, or 9 more digits follow
    r"|(?P<mixed>(?<=[a-z]\d)|(?=[a-z])|(?=\d{9})))",
    re.I,
)
# Ending where a digit-led date starts: the month of a month-first date (required), or the
# weekday of any date or time (optional, "monday, 30 november"), so they go with it.
_MONTH_BEFORE = re.compile(rf"(?:\b(?:{_WEEKDAY}),?\s+)?\b{_MONTH}\s*\Z", re.I)
_WEEKDAY_BEFORE = re.compile(rf"\b(?:{_WEEKDAY}),?\s+\Z", re.I)
_LOOK_BACK = 32  # characters: a weekday and a month name with their separators
# Which machine answered, which some pages print: "served by node web5", "rendered on
# app-03.example.com". Word-led, so looked for only when its verb is in the text.
_SERVED_BY_VERBS = ("served", "generated", "rendered", "delivered", "processed")
_SERVED_BY = re.compile(
    r"\b(?:served|generated|rendered|delivered|processed)\s+(?:by|on|from)\s+"
    r"(?:(?:the\s+)?(?:node|server|host|instance|pod|machine|backend)\s*:?\s*)?"
    r"(?=[\w.-]*[a-z])[\w.-]*\d[\w.-]*"  # a name with a digit in it: web5, app-03.example.com
    r"(?:\s+in\s+[\d.,]+\s*(?:ms|milliseconds?|s|secs?|seconds?)(?![a-z]))?",  # and the time
    re.I,
)
_RELATIVE_WORDS = re.compile(
    rf"\b(?:an?|one|a\s+few|few|several)\s+{_UNITS}\s+ago\b|\bjust\s+now\b|\bmoments?\s+ago\b"
    # "Updated today at 3:56 pm" is "yesterday at 3:56 pm" tomorrow (the time is gone already)
    r"|\b(?:today|yesterday)(?:\s+at)?\b"
)
_RELATIVE_CUES = ("ago", "just now", "today", "yesterday")

# Identifiers: a token (letters, digits and + / = _ -) that mixes character classes. Those
# with a digit are found by _DIGIT_LED; the rest by an upper-case letter after a lower-case
# one (random base64 has many, words have few).
_CASE_HINT = re.compile(r"[A-Z](?<=[a-z0-9][A-Z])")
_RUN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")
_RUN = re.compile(r"[A-Za-z0-9+/=_-]+")
_RUN_PART = re.compile(r"[A-Za-z0-9]+")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_FRACTION = re.compile(r"[.,]\d+(?!\d)")
_HEX_ID = re.compile(r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}", re.I)


def _character_classes(token: str) -> int:
    return (
        any(c.isdigit() for c in token)
        + any(c.isupper() for c in token)
        + any(c.islower() for c in token)
    )


def _drop_identifier(run: str) -> str:
    """``run`` without its random parts; the whole run goes when it looks random itself."""
    # 16+ characters from two of three classes: random tokens almost always qualify, long
    # plain words ("internationalization") and hyphenated slugs of plain words do not; a
    # token without digits must also be a quarter upper case, which random base64 is and a
    # CamelCase name ("PricewaterhouseCoopers") is not.
    if _UUID.fullmatch(run):
        return " "
    if (
        len(run) >= 16
        and _character_classes(run) >= 2
        and (any(c.isdigit() for c in run) or sum(c.isupper() for c in run) * 4 >= len(run))
    ):
        return " "
    return _RUN_PART.sub(
        lambda m: " " if _HEX_ID.fullmatch(m[0]) or (len(m[0]) >= 10 and m[0].isdigit()) else m[0],
        run,
    )


class _Rewriter:
    """Builds the text with spans replaced, left to right; a span found inside one already
    replaced is skipped."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pieces: list[str] = []
        self.last = 0  # end of the text emitted so far
        self.scanned = 0  # end of the last identifier run looked at

    def replace(self, start: int, end: int, with_: str = " ") -> None:
        self.pieces += (self.text[self.last : start], with_)
        self.last = end

    def identifier_at(self, at: int) -> None:
        """Look at the run of token characters around ``at``, once."""
        if at < self.scanned:
            return
        text, start = self.text, at
        while start > max(self.scanned, self.last) and text[start - 1] in _RUN_CHARS:
            start -= 1
        run = _RUN.match(text, start)
        if run is None:  # pragma: no cover - the hint is a run character
            return
        self.scanned = run.end()
        if run[0].isdigit() and len(run[0]) >= 10:
            # an epoch timestamp goes with its fraction (1733420000.123: seconds as a float)
            fraction = _FRACTION.match(text, self.scanned)
            if fraction is not None:
                self.scanned = fraction.end()
                self.replace(start, self.scanned)
                return
        cleaned = _drop_identifier(run[0])
        if cleaned != run[0]:
            self.replace(start, self.scanned, cleaned)

    def result(self) -> str:
        if not self.pieces:
            return self.text
        return "".join([*self.pieces, self.text[self.last :]])


# An ASCII text's characters as the case hints see them: a lower-case letter or digit ("l"),
# an upper-case letter ("U"), anything else (".").
_CASE_CLASSES = (
    bytes(
        ord("l")
        if chr(c).islower() or chr(c).isdigit()
        else ord("U")
        if chr(c).isupper()
        else ord(".")
        for c in range(128)
    )
    + b"." * 128
)


def _digit_led_matches(text: str) -> Iterator[re.Match[str]]:
    """``_DIGIT_LED.finditer(text)``. The pattern can only start at a digit, and a regex scan
    for one costs about 10 ns a character while ``str.find`` skips to each of ten ASCII digits
    in a fraction of that; so an ASCII text is matched only where its digits are, left to
    right, skipping those inside a match (what finditer does)."""
    if not text.isascii():
        yield from _DIGIT_LED.finditer(text)
        return
    starts: list[int] = []
    for digit in "0123456789":
        at = text.find(digit)
        while at >= 0:
            starts.append(at)
            at = text.find(digit, at + 1)
    end = 0
    for at in sorted(starts):
        if at < end:
            continue
        match = _DIGIT_LED.match(text, at)
        if match is not None:
            end = match.end()
            yield match


def _case_hints(text: str) -> list[int]:
    """Where ``_CASE_HINT`` matches (an upper-case letter after a lower-case one or a digit),
    found in an ASCII text by translating it to character classes and searching for the
    pair, for the same reason as :func:`_digit_led_matches`."""
    if not text.isascii():
        return [match.start() for match in _CASE_HINT.finditer(text)]
    classes = text.encode("ascii").translate(_CASE_CLASSES)
    hints, at = [], classes.find(b"lU")
    while at >= 0:
        hints.append(at + 1)
        at = classes.find(b"lU", at + 1)
    return hints


def _drop_volatile(text: str) -> str:
    """Identifiers, dates, times and counters: one pass over the digits, one over the
    upper-case letters that follow a lower-case one."""
    out = _Rewriter(text)
    for match in _digit_led_matches(text):
        kind, start = match.lastgroup, match.start()
        if kind == "mixed":
            out.identifier_at(start)
            continue
        if start < out.last:
            continue
        if kind == "month_first":
            lead = _MONTH_BEFORE.search(text, max(out.last, start - _LOOK_BACK), start)
            if lead is None:
                continue  # "number 30", "must 5": not a date
            start = lead.start()
        elif kind in ("date", "time"):
            lead = _WEEKDAY_BEFORE.search(text, max(out.last, start - _LOOK_BACK), start)
            if lead is not None:
                start = lead.start()
        out.replace(start, match.end())
    text = out.result()
    out = _Rewriter(text)
    for at in _case_hints(text):
        out.identifier_at(at)
    return out.result()


def normalize_content(text: str) -> str:
    """Text with the volatile tokens dropped, casefolded and whitespace-folded.

    Numbers stay unless they are dates, times, relative times, counters ("1.2k views",
    "Views: 12"), copyright years or identifiers; so a changed price, count, score or year in
    a sentence is a changed fingerprint.
    """
    text = _drop_volatile(text).casefold()  # case tells random tokens from words
    if any(cue in text for cue in _RELATIVE_CUES):
        text = _RELATIVE_WORDS.sub(" ", text)
    if any(verb in text for verb in _SERVED_BY_VERBS):
        text = _SERVED_BY.sub(" ", text)
    return fold_spaces(text)
