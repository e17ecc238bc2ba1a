"""A unified diff of two versions' lines that stays fast on pages of any size.

difflib compares every line of one side with every line of the other where they differ: a
60,000-line page with every other line changed took minutes to diff. The lines both versions
share at the start and at the end are set aside first (linear, and most edits leave most of
a page alone); what lies between is compared line by line when it is small enough, and shown
as one block removed and one added when it is not, which is still a correct diff.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from typing import Literal

__all__ = ["MAX_COMPARED_CELLS", "unified_diff"]

#: Lines of one side times lines of the other that are compared line by line (about a second
#: in the worst case here); past it the differing middle is one replaced block.
MAX_COMPARED_CELLS = 16_000_000

Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


class _Given(difflib.SequenceMatcher[str]):
    """difflib's grouping of opcodes into hunks, over opcodes made elsewhere."""

    def __init__(self, opcodes: list[Opcode]) -> None:
        super().__init__(None, [], [])
        self._given = opcodes

    def get_opcodes(self) -> list[Opcode]:
        return self._given


def _shared_ends(before: Sequence[str], after: Sequence[str]) -> tuple[int, int]:
    limit = min(len(before), len(after))
    head = 0
    while head < limit and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < limit - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    return head, tail


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it (1-based; an empty one names the line before)."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return f"{beginning}"
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


def unified_diff(
    before: Sequence[str], after: Sequence[str], fromfile: str, tofile: str, context: int
) -> Iterator[str]:
    """The lines of a unified diff (no line ends) of ``before`` against ``after`` with
    ``context`` lines around each change, as ``difflib.unified_diff`` writes them; nothing when
    they are equal."""
    head, tail = _shared_ends(before, after)
    old_end, new_end = len(before) - tail, len(after) - tail
    if head == old_end and head == new_end:
        return
    old_mid, new_mid = before[head:old_end], after[head:new_end]
    middle: list[Opcode]
    if len(old_mid) * len(new_mid) <= MAX_COMPARED_CELLS:
        middle = [
            (tag, i1 + head, i2 + head, j1 + head, j2 + head)
            for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_mid, new_mid).get_opcodes()
        ]
    else:
        middle = [("replace", head, old_end, head, new_end)]
    opcodes: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
    opcodes += middle
    if tail:
        opcodes.append(("equal", old_end, len(before), new_end, len(after)))
    yield f"--- {fromfile}"
    yield f"+++ {tofile}"
    for group in _Given(opcodes).get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in before[i1:i2])
                continue
            if tag in ("replace", "delete"):
                yield from ("-" + line for line in before[i1:i2])
            if tag in ("replace", "insert"):
                yield from ("+" + line for line in after[j1:j2])
