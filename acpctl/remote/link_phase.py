"""Where the link stands (remote/link_state.py), one phase at a time, and every move between
phases, in one table: the link's state changes phase by `LinkState._move` only, which
refuses a move the table does not have."""

from __future__ import annotations

import enum


class Phase(enum.Enum):
    NEW = "new"  # no transport has come up yet
    SETTING_UP = "setting up"  # a transport is up: a resume, or a new connection being set up
    UP = "up"  # set up: the editor's messages flow to the host
    DOWN = "down"  # dropped: reconnecting, the editor's messages held
    # Down past the outage limit, or refused in a way no retry cures: the waiting requests
    # failed, and the editor's next request tries again.
    GIVEN_UP = "given up"


MOVES: dict[Phase, frozenset[Phase]] = {
    Phase.NEW: frozenset({Phase.SETTING_UP, Phase.DOWN}),  # the first dial, done or failed
    Phase.SETTING_UP: frozenset({Phase.UP, Phase.DOWN}),  # set up, or dropped meanwhile
    Phase.UP: frozenset({Phase.DOWN}),
    # dialled again, still down (another reason), past the limit
    Phase.DOWN: frozenset({Phase.SETTING_UP, Phase.DOWN, Phase.GIVEN_UP}),
    # the editor's request tries again (DOWN), a transport came up all the same
    Phase.GIVEN_UP: frozenset({Phase.SETTING_UP, Phase.DOWN, Phase.GIVEN_UP}),
}


class NoSuchMove(RuntimeError):
    """A move the table does not have: a fault of the link's own code."""
