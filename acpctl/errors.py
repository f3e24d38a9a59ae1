"""Errors that reach the user as a message and an exit code, never as a traceback."""

from __future__ import annotations

import sys


class AcpctlError(Exception):
    """A failure explained to the user; `exit_code` follows the CLI's conventions."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def report(error: AcpctlError) -> int:
    """Tell the user on stderr (stdout may be a protocol stream); returns the exit code."""
    sys.stderr.write(f"acpctl: error: {error.message}\n")
    if error.hint:
        sys.stderr.write(f"hint: {error.hint}\n")
    return error.exit_code


class UsageError(AcpctlError):
    """Bad input from the user: unknown names, unparsable files, wrong flags (exit 2)."""

    exit_code = 2
