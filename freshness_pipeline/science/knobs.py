"""Checking a settings object's knobs when it is made, so that a bad value is refused where it
is typed, with the knob's name, instead of surfacing as a strange plan or a stuck fetch."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["require"]


def require(settings: object, names: Iterable[str], ok: Callable[[Any], bool], says: str) -> None:
    """ValueError "<name> must <says>" for the first of ``names`` whose value fails ``ok``."""
    for name in names:
        if not ok(getattr(settings, name)):
            raise ValueError(f"{name} must {says}")
