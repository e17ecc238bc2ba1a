"""science/changes.py: which fields of a version changed, and how many text lines."""

from __future__ import annotations

import json

from freshness_pipeline.science.changes import line_changes, version_change


def test_lines_are_counted_as_multisets_and_blank_lines_ignored() -> None:
    assert line_changes("a\nb\n\nc", "c\na\nb") == (0, 0)  # a moved line is no change
    assert line_changes("a\nb", "a\nb\nb\nd") == (2, 0)
    assert line_changes(None, "x\n\n") == (1, 0)


def test_a_change_names_every_field_and_quotes_all_but_the_text() -> None:
    old = json.dumps({"title": "Lamp", "price": "30", "text": "old"})
    new = json.dumps({"title": "Lamp", "price": "25", "text": "new", "stock": "3"})
    change = version_change(old, new, "one\ntwo", "one\nthree")
    assert change.changed_fields == ["price", "stock", "text"]
    assert json.loads(change.old_values) == {"price": "30", "stock": None}
    assert json.loads(change.new_values) == {"price": "25", "stock": "3"}
    assert (change.text_lines_added, change.text_lines_removed) == (1, 1)
    assert version_change("not json", None, None, None).changed_fields == []
