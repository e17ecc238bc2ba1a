"""Markdown tables for the end-to-end benchmark's printout and docs/e2e_quality.md."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def cell(value: object, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞"
        return f"{value:.{digits}f}"
    return str(value)


def table(header: Sequence[str], rows: Iterable[Sequence[object]], digits: int = 3) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(cell(v, digits) for v in row) + " |")
    return "\n".join(lines)


def verdict(passed: bool | None) -> str:
    if passed is None:
        return "info"
    return "PASS" if passed else "FAIL"


def share(n: float, d: float) -> float:
    return n / d if d else math.nan
