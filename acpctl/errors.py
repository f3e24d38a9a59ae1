"""Errors that reach the user as a message and an exit code, never as a traceback."""

from __future__ import annotations


class AcpctlError(Exception):
    """A failure explained to the user; `exit_code` follows the CLI's conventions."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(AcpctlError):
    """Bad input from the user: unknown names, unparsable files, wrong flags (exit 2)."""

    exit_code = 2
