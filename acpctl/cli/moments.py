"""The moments and durations the history's commands take: `--since 12h`, `--older-than
2026-11-01`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from acpctl.errors import UsageError

if TYPE_CHECKING:
    from datetime import timedelta

_DURATION = re.compile(r"^(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    from datetime import timedelta  # here: `acpctl --help` is timed

    match = _DURATION.match(text.strip())
    if not match:
        raise UsageError(f"{text!r} is not a duration like 90m, 12h, 7d or 2w")
    return timedelta(**{_UNITS[match[2]]: int(match[1])})


def parse_since(text: str, option: str = "--since") -> float:
    """A moment (`--since`, `--older-than`): a duration back from now (90m, 12h, 7d, 2w)
    or a local date (2026-11-01)."""
    import time
    from datetime import datetime

    try:
        return datetime.strptime(text.strip(), "%Y-%m-%d").timestamp()
    except ValueError:
        pass
    try:
        return time.time() - parse_duration(text).total_seconds()
    except UsageError:
        raise UsageError(
            f"{option} {text!r} is neither a date (2026-11-01) nor a duration (12h, 7d)"
        ) from None
