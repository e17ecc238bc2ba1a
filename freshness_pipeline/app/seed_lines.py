"""What `freshness seed` says when a load ends, as text: kept apart from the command so the
words are in one place and testable without a terminal, and so that cli.py stays readable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from freshness_pipeline.app.cycle_lines import counted

if TYPE_CHECKING:
    from freshness_pipeline.app.runner import SeedLoad

__all__ = ["seed_summary"]


def seed_summary(load: SeedLoad) -> str:
    """One line on what a seed file gave. Its duplicates are counted after normalization: a
    file's distinct lines `HTTP://a/p`, `a/p#comments` and `a/p?utm_source=x` are one URL, and
    "3 duplicates" alone sent a newcomer looking for repeated lines that were not there."""
    parse = load.parse
    bucketed = "host buckets" in load.partitioning
    new = counted(len(load.new_hosts), "new host" if bucketed else "new partition")
    example = ""
    if parse.duplicate_example is not None:
        # which lines they are, in one example: "5 duplicates" alone left a newcomer unable to
        # tell what the five were
        line, written, first_line, first = parse.duplicate_example
        example = f", such as line {line}'s {written[:120]!r}, line {first_line}'s {first[:120]!r}"
    return (
        f"seeded {counted(parse.rows.height, 'URL')} on {counted(load.hosts, 'host')} "
        f"({new}, {counted(len(parse.errors), 'row')} skipped, "
        f"{counted(parse.duplicates, 'duplicate')} after normalization{example})"
        + (f"; Dagster partitions: {load.partitioning}" if bucketed else "")
    )
