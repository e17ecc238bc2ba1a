"""science.line_diff: every diff it writes turns the old lines into the new ones; a small
edit reads as difflib writes it; a huge page's differing middle is one block, so that
`freshness diff` of a 60,000-line page with every other line changed (minutes with difflib,
found by an exploratory run) is a single linear pass."""

from __future__ import annotations

import difflib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.science.line_diff import MAX_COMPARED_CELLS, unified_diff

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$")


def apply(diff: list[str], before: list[str]) -> list[str]:
    """``before`` patched with ``diff``, checking every context and removed line on the way."""
    assert diff[0].startswith("--- ") and diff[1].startswith("+++ ")
    out: list[str] = []
    at = 0
    for line in diff[2:]:
        hunk = HUNK.match(line)
        if hunk:
            start, count = int(hunk[1]), int(hunk[2] or 1)
            begin = start if count == 0 else start - 1
            out += before[at:begin]
            at = begin
        elif line[0] in " -":
            assert before[at] == line[1:], (at, line)
            if line[0] == " ":
                out.append(before[at])
            at += 1
        else:
            assert line[0] == "+", line
            out.append(line[1:])
    return out + before[at:]


lines = st.lists(st.sampled_from(["a", "b", "c", "", "a b"]), max_size=40)


@given(before=lines, after=lines, context=st.sampled_from([0, 1, 3, 50]))
@settings(max_examples=400, deadline=None)
def test_every_diff_patches_the_old_lines_into_the_new(before, after, context) -> None:
    diff = list(unified_diff(before, after, "old", "new", context))
    if before == after:
        assert diff == []
    else:
        assert apply(diff, before) == after


def test_a_small_edit_reads_as_difflib_writes_it() -> None:
    before = [f"paragraph {i}" for i in range(30)]
    after = [*before[:10], "a new paragraph", *before[10:20], *before[21:]]
    after[25] = "paragraph twenty-six, edited"
    ours = list(unified_diff(before, after, "old", "new", 3))
    assert ours == list(difflib.unified_diff(before, after, "old", "new", n=3, lineterm=""))


def test_a_huge_page_changed_throughout_is_one_replaced_block() -> None:
    size = 60_000
    assert size * size > MAX_COMPARED_CELLS
    before = [f"line {i}" for i in range(size)]
    after = [line if i % 2 else f"{line} edited" for i, line in enumerate(before)]
    after[-1] = before[-1] = "the same last line"
    diff = list(unified_diff(before, after, "old", "new", 3))
    assert apply(diff, before) == after
    hunks = [line for line in diff if line.startswith("@@")]
    assert hunks == [f"@@ -1,{size} +1,{size} @@"]
    assert sum(line.startswith("-") for line in diff[2:]) == size - 1
