"""Whitespace folding takes shortcuts on ASCII text; its results must be those of the plain
definitions (str.split and str.splitlines), which the fingerprint and the version text are
built on."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.science.fingerprint.whitespace import fold_lines, fold_spaces

# every ASCII character split() or splitlines() breaks on, some that look like them, and text
_PIECES = st.sampled_from(
    [" ", "  ", "\n", "\n\n", " \n ", "\r\n", "\r", "\t", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e",
     "\x1f", "\x85", "\xa0", "\u2028", "a", "b c", "word", "é", "."]
)  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_fold_lines_is_splitlines_then_split(text: str) -> None:
    expected = "\n".join(f for line in text.splitlines() if (f := " ".join(line.split())))
    assert fold_lines(text) == expected


@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_fold_spaces_is_split_then_join(text: str) -> None:
    assert fold_spaces(text) == " ".join(text.split())
