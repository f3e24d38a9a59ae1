"""`acpctl sessions watch`: follow a session another process (an editor's `run --acp`,
`acpctl run` in another shell, or the session host) is writing: its last turn so far,
then each event as it is appended, rendered as `acpctl run` renders its own turns. Reads
the events file the way any reader does (whole lines, no lock), so the writer never waits
for it."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from acpctl.store.lines import events_from
from acpctl.store.sessions import EVENTS_FILE, TURN_ENDS, SessionMeta, SessionStore
from acpctl.terminal.render import DIM
from acpctl.terminal.transcript import EventView

POLL_S = 0.2
LIVE_CHECK_S = 1.0


def last_turn_start(store: SessionStore, session_id: str) -> int:
    """Where the last turn so far begins: after the turn end before it (the running turn,
    or the last one that ended)."""
    ends = [0]
    last_was_end = False
    for event, end in events_from(store.session_dir(session_id) / EVENTS_FILE, 0):
        last_was_end = event.get("type") in TURN_ENDS
        if last_was_end:
            ends.append(end)
    return ends[-2] if last_was_end and len(ends) > 1 else ends[-1]


def _identity(path: Path) -> tuple[tuple[int, int] | None, int]:
    """((device, inode), size) of the file; (None, 0) while there is none."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None, 0
    return (info.st_dev, info.st_ino), info.st_size


def follow(
    store: SessionStore,
    meta: SessionMeta,
    out: TextIO,
    is_live: Callable[[], bool],
) -> bool:
    """Show the last turn, then what is appended while a run has the session open, until
    that run ends. Whether a run had it open at all."""
    view = EventView(out)
    view.header(meta)
    path = store.session_dir(meta.id) / EVENTS_FILE
    offset = last_turn_start(store, meta.id)
    followed, _ = _identity(path)
    live = was_live = is_live()
    checked = time.monotonic()
    while True:
        now, size = _identity(path)
        if now != followed or size < offset:
            # Replaced (a rename over it, a repair) or cut short: an offset into the old
            # file means nothing in this one, so its last turn is shown again.
            followed = now
            offset = last_turn_start(store, meta.id)
            out.write(view.renderer.style("(the events file was replaced)", DIM) + "\n")
        for event, end in events_from(path, offset):
            view.show(event)
            offset = end
        if not live:
            break
        time.sleep(POLL_S)
        if time.monotonic() - checked >= LIVE_CHECK_S:
            checked = time.monotonic()
            live = is_live()  # after it ends, one more read: its last lines
    note = "the run ended" if was_live else "no acpctl run or session host has it open"
    out.write(view.renderer.style(f"({note})", DIM) + "\n")
    out.flush()
    return was_live
