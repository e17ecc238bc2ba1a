"""science/fingerprint/whitespace.py: whitespace folded the same way in ASCII and beyond."""

from __future__ import annotations

from freshness_pipeline.science.fingerprint.whitespace import fold_lines, fold_spaces


def test_spaces_fold_to_one_and_empty_lines_go() -> None:
    assert fold_spaces("  a \t b\n\nc  ") == "a b c"
    assert fold_lines(" a  b \r\n\r\n\tc\n  \n") == "a b\nc"
    # the non-ASCII path folds the same way (a no-break space is whitespace too)
    assert fold_lines("caf\u00e9  au\u00a0 lait\n\n x ") == "caf\u00e9 au lait\nx"
