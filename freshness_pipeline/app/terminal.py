"""Where the `freshness` command writes: stdout, stderr and wide tables, each surviving a reader
that stops reading, and the one-line failures every command says the same way."""

from __future__ import annotations

import os
import sys

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["BUSY_EXIT", "Output", "console", "errors", "failed", "unwritable", "wide"]


class Output(Console):
    """stdout or stderr that a reader may stop reading (``freshness report | head``, ``2>&1 |
    head``): rich's default exits 1 there, which a command's caller reads as a failure, and a
    cycle piped into ``head`` stopped mid-run. What is left to print goes nowhere and the
    command carries on to its own exit status."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (sys.stderr if self.stderr else sys.stdout).fileno())


console = Output()
errors = Output(stderr=True, soft_wrap=True)  # one message, one line: easy to grep
# Reports are wide tables; piped output (CI logs, files) should not squeeze their headers.
wide = Output(width=None if console.is_terminal else 220)

# EX_TEMPFAIL: the home is busy with another cycle; trying again later will work.
BUSY_EXIT = 75


def failed(label: str, message: object, code: int) -> typer.Exit:
    """Say on stderr what went wrong, in red after ``label``; the caller raises the Exit
    (2: bad input, 1: the command failed, BUSY_EXIT: another command holds the home)."""
    errors.print(f"[red]{label}:[/] {escape(str(message))}")
    return typer.Exit(code)


def unwritable(exc: OSError, what: str) -> typer.Exit:
    """One line for a home that cannot be written (read-only, full, a missing parent), as every
    command says it, instead of a traceback; the caller raises the returned Exit (1)."""
    where = f" ({escape(str(exc.filename))})" if exc.filename else ""
    errors.print(
        f"[red]{what} failed:[/] cannot write the home folder{where}: "
        f"{escape(str(exc.strerror or exc))}; nothing already written was lost"
    )
    return typer.Exit(1)
