"""What changed between two versions of a page: which fields, from what to what, and how many
lines of its text came and went.

A version's fields are a JSON object (field name to value; by default the title and the text).
A change names every field whose value differs. The old and new values are kept for every
changed field but the text: a page's text can be long, and what a reader of a change feed
wants from it is how much moved, which the line counts say (``freshness diff`` shows the lines
themselves). Lines are compared as multisets: a line added is one the new text has more often
than the old; a moved paragraph is no change at all. That is linear in the text, where an
ordered diff is quadratic in the worst case, and it is what the counts mean.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

__all__ = ["TEXT_FIELD", "VersionChange", "line_changes", "version_change"]

#: The field that holds the page's text (counted by lines, not quoted).
TEXT_FIELD = "text"


@dataclass(frozen=True)
class VersionChange:
    changed_fields: list[str]
    old_values: str  # JSON object
    new_values: str  # JSON object
    text_lines_added: int
    text_lines_removed: int


def line_changes(old: str | None, new: str | None) -> tuple[int, int]:
    """(lines added, lines removed) from ``old`` to ``new``, blank lines ignored."""
    before = Counter(line for line in (old or "").splitlines() if line.strip())
    after = Counter(line for line in (new or "").splitlines() if line.strip())
    return sum((after - before).values()), sum((before - after).values())


def _fields(text: str | None) -> dict[str, object]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def version_change(
    old_fields: str | None, new_fields: str | None, old_text: str | None, new_text: str | None
) -> VersionChange:
    """The change from one version (its fields JSON and text) to the next."""
    old, new = _fields(old_fields), _fields(new_fields)
    names = sorted(name for name in set(old) | set(new) if old.get(name) != new.get(name))
    quoted = [name for name in names if name != TEXT_FIELD]
    added, removed = line_changes(old_text, new_text)
    return VersionChange(
        changed_fields=names,
        old_values=json.dumps({n: old.get(n) for n in quoted}, ensure_ascii=False, sort_keys=True),
        new_values=json.dumps({n: new.get(n) for n in quoted}, ensure_ascii=False, sort_keys=True),
        text_lines_added=added,
        text_lines_removed=removed,
    )
