"""How far an archive install may go, in one place for the installer and the options of
`acpctl agents install` (which show the defaults): plain data, cheap to import."""

from __future__ import annotations

from typing import NamedTuple


class Limits(NamedTuple):
    """The download's whole time and its slowest rate, and what its archive may unpack to
    (a zip or tar bomb stops at these, with one line naming the flag)."""

    download_s: float = 600.0
    unpacked_bytes: int = 4 << 30
    members: int = 100_000
    # Below this many bytes a second over RATE_WINDOW_S, a download stops: a server that
    # trickles a byte now and then never holds an install for the whole download_s.
    min_rate: int = 1024


RATE_WINDOW_S = 30.0


DEFAULT_LIMITS = Limits()
