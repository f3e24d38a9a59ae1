"""Full-text search over the history, the matches as `sessions search --json` gives them:
for the command line here, and for the session host, which a linked host's `sessions
search --host` asks (`_acpctl/search`)."""

from __future__ import annotations

import time
from typing import Any

from acpctl.store.history_index import MARK_END, MARK_START, HistoryIndex, fts_query
from acpctl.store.index import SessionIndex
from acpctl.store.sessions import SessionStore


def search(
    store: SessionStore,
    words: str,
    agent: str | None = None,
    cwd: str | None = None,
    since: float | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """The best `limit` matches of `words`, each with its session, where it is, its snippet
    and where in it the words matched ([start, end] offsets); none for no words."""
    text = fts_query(words)
    if not text:
        return []
    listing = SessionIndex(store)
    wanted = set(listing.models(agent, cwd)) if agent or cwd else None
    history = HistoryIndex(store)
    with history.connected(listing) as connection:
        hits = history.search(connection, text, wanted, since, limit)
    metas = {sid: s.meta for sid, s in listing.rows(h.session for h in hits).items()}
    found = []
    for hit in hits:
        meta = metas.get(hit.session)
        if meta is None:  # deleted meanwhile
            continue
        plain, marks = _marks(hit.snippet)
        found.append(
            {
                "session": hit.session,
                "agent": meta.agent,
                "name": meta.name,
                "title": meta.title,
                "cwd": meta.cwd,
                "turn": hit.turn + 1,
                "kind": hit.kind,
                "time": time.strftime("%Y-%m-%d %H:%M", time.localtime(hit.ts)),
                "snippet": plain,
                "matches": marks,
            }
        )
    return found


def _marks(snippet: str) -> tuple[str, list[list[int]]]:
    """The snippet without its markers, and where the matches are in it."""
    plain, marks, opened = "", [], 0
    for char in snippet:
        if char == MARK_START:
            opened = len(plain)
        elif char == MARK_END:
            marks.append([opened, len(plain)])
        else:
            plain += char
    return plain, marks
