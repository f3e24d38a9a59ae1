"""Whether two processes' environments differ, and in which variables, without either side
learning the other's values: the session host's agents run with the host's environment,
and a client whose own differs is told so (docs/remote.md)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

# What differs between any two shells or editors, and tells an agent nothing: terminals,
# sessions, the shell's own state, editors' markers, and acpctl's own (its directories
# must be the same for the host to be found at all).
VOLATILE = frozenset(
    {
        "_",
        "COLORTERM",
        "COLUMNS",
        "HISTFILE",
        "INVOCATION_ID",
        "JOURNAL_STREAM",
        "LINES",
        "LS_COLORS",
        "MANAGERPID",
        "NOTIFY_SOCKET",
        "OLDPWD",
        "PS1",
        "PROMPT_COMMAND",
        "PWD",
        "SHLVL",
        "SSH_CLIENT",
        "SSH_CONNECTION",
        "SSH_TTY",
        "STY",
        "SYSTEMD_EXEC_PID",
        "TERM",
        "TERM_PROGRAM",
        "TERM_PROGRAM_VERSION",
        "TERM_SESSION_ID",
        "TMUX",
        "TMUX_PANE",
        "WINDOWID",
        "XDG_SESSION_ID",
        "XDG_VTNR",
        "DESKTOP_STARTUP_ID",
        "INSIDE_EMACS",
        "TERMINAL_EMULATOR",
        "NVIM",
        "VIMRUNTIME",
        "MYVIMRC",
    }
)
VOLATILE_PREFIXES = ("ACPCTL_", "ZED_", "VSCODE_", "JETBRAINS_", "IDEA_", "ELECTRON_")


def digest(env: Mapping[str, str]) -> dict[str, str]:
    """Each variable that matters, by name, with a checksum of its value: enough to tell
    that two values differ (it crosses only the host's unix socket, to the same user, who
    can read both environments anyway), and cheap to import for the thin client's start,
    which hashlib (OpenSSL's, 2 ms) is not."""
    return {
        name: f"{zlib.crc32(value.encode('utf-8', 'surrogateescape')):08x}{len(value):x}"
        for name, value in env.items()
        if name not in VOLATILE and not name.startswith(VOLATILE_PREFIXES)
    }


def differing(theirs: object, ours: Mapping[str, str]) -> list[str]:
    """The variables set differently in a client's digest and ours (sorted; none when the
    client sent no digest)."""
    if not isinstance(theirs, dict):
        return []
    names = set(theirs) | set(ours)
    return sorted(name for name in names if str(theirs.get(name)) != str(ours.get(name)))


def said(names: list[str], most: int = 6) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
