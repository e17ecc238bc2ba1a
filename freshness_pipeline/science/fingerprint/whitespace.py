"""Whitespace folding, the last step of normalization and of a version's text by line."""

from __future__ import annotations

import re

__all__ = ["fold_lines", "fold_spaces"]

_SPACE_RUNS = re.compile("  +")

# The ASCII characters str.split() and str.splitlines() break on, other than space and
# newline. An ASCII text (most pages' text) is folded with a few C-level searches and replaces
# instead: splitting a page's text into words, or into lines and each line into words, only
# to join them again made a third of a fingerprint's cost.
_ASCII_SPACES = "".join(
    chr(c) for c in range(128) if chr(c).isspace() and len(f"a{chr(c)}b".splitlines()) == 1
).replace(" ", "")
_ASCII_BREAKS = "".join(
    chr(c) for c in range(128) if chr(c).isspace() and len(f"a{chr(c)}b".splitlines()) == 2
).replace("\n", "")


def _single_spaces(text: str) -> str:
    """Every run of spaces as one. One regex pass led by its literal: CPython's replace of
    two spaces, and each search for two spaces that finds none, cost about 4 us on a 5 KB
    page's text, and a loop of them paid several."""
    return _SPACE_RUNS.sub(" ", text)


def fold_spaces(text: str) -> str:
    """``" ".join(text.split())``: whitespace runs as one space, none at the ends."""
    if not text.isascii():
        return " ".join(text.split())
    for char in _ASCII_SPACES + _ASCII_BREAKS + "\n":
        if char in text:
            text = text.replace(char, " ")
    text = _single_spaces(text)
    return text.strip(" ")


def fold_lines(text: str) -> str:
    """The non-empty lines of ``text`` (str.splitlines), each whitespace-folded as by
    :func:`fold_spaces`, joined by newlines."""
    if not text.isascii():
        return "\n".join(folded for line in text.splitlines() if (folded := " ".join(line.split())))
    for char in _ASCII_SPACES:
        if char in text:
            text = text.replace(char, " ")
    for char in _ASCII_BREAKS:  # "\r\n" becomes an empty line, which goes below
        if char in text:
            text = text.replace(char, "\n")
    text = _single_spaces(text)
    # A line now has at most one space at either end. Splitting at the newlines (a search for
    # one character) costs less than searching for " \n", "\n " and "\n\n" (two each).
    return "\n".join([line for part in text.split("\n") if (line := part.strip(" "))])
