"""The linked hosts' live sessions in `acpctl sessions list` (remote/fleet.py asks them): a
HOST column, their rows after this machine's, and a line for each host that did not
answer. What a host sends is shown as agent text is: printable only."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from acpctl.remote.fleet import Answer, unreachable_said
from acpctl.terminal.screen import one_line

if TYPE_CHECKING:
    from acpctl.config import Remote
    from acpctl.host_links import HostLink
    from acpctl.store.sessions import SessionMeta

__all__ = ["Answer", "as_json", "asked", "rows", "session_at", "this_machine", "unreachable"]


def unreachable(answer: Answer) -> str:
    """`build: unreachable since 14:02 (why)` as a terminal may show it: the why is often
    the other machine's words (its refusal, ssh's last line), so made printable."""
    return one_line(unreachable_said(answer))


def asked() -> list[Answer]:
    """Every linked host's live sessions, asked at once; nothing when none is linked, or
    when config.toml does not parse (this machine's list goes on: said on stderr)."""
    import sys

    from acpctl import config
    from acpctl.errors import UsageError
    from acpctl.host_links import links_of

    try:
        links = list(links_of(config.load()).values())
    except UsageError as exc:
        sys.stderr.write(f"acpctl: linked hosts not asked: {exc.message}\n")
        return []
    if not links:
        return []
    import asyncio

    from acpctl import protocol as acp
    from acpctl.remote.fleet import ask_all

    watched = _watched(links)
    if watched is None:
        return asyncio.run(ask_all(links, acp.HOST_SESSIONS, {}))
    # The hosts the watch has not reached yet are asked here, each within its deadline.
    pending = [a.link for a in watched if a.problem == acp.NOT_CONNECTED_YET]
    asked = {a.link.name: a for a in asyncio.run(ask_all(pending, acp.HOST_SESSIONS, {}))}
    return [asked.get(a.link.name, a) for a in watched]


def _watched(links: list[HostLink]) -> list[Answer] | None:
    """The linked hosts as this machine's running host sees them (it watches them: no
    connection to each to make); None when no host runs, or it does not watch them all
    (linked since it started)."""
    import asyncio

    from acpctl import protocol as acp
    from acpctl.remote.host_socket import ask_host

    answer = asyncio.run(ask_host(acp.HOST_SESSIONS, {}, timeout=2))
    result = answer.get("result") if isinstance(answer, dict) else None
    watched = result.get("linkedHosts") if isinstance(result, dict) else None
    if not isinstance(watched, list) or any(link.name not in watched for link in links):
        return None
    assert isinstance(result, dict)
    entries = [e for e in result.get("sessions") or [] if isinstance(e, dict) and e.get("host")]
    answers = []
    for link in links:
        mine = [e for e in entries if e["host"] == link.name]
        down = next((e for e in mine if "unreachableSince" in e), None)
        if down is None:
            answers.append(Answer(link, {"sessions": mine}))
            continue
        since = down["unreachableSince"]
        since = float(since) if isinstance(since, (int, float)) else None
        answers.append(Answer(link, None, str(down.get("problem") or "unreachable"), since))
    return answers


def this_machine() -> str:
    return socket.gethostname().split(".")[0] or "here"


def live_sessions(answer: Answer) -> list[dict[str, Any]]:
    """The host's live sessions, each checked enough to show (a host's list is data from
    the network: an entry that is not one is left out)."""
    listed = answer.result.get("sessions") if isinstance(answer.result, dict) else None
    return [
        s
        for s in (listed if isinstance(listed, list) else [])
        if isinstance(s, dict) and s.get("live") is True and isinstance(s.get("sessionId"), str)
    ]


def as_json(answer: Answer) -> list[dict[str, Any]]:
    """The host's live sessions as `sessions list --json` gives this machine's."""
    return [
        {
            "host": answer.link.name,
            "id": s["sessionId"],
            "agent": s.get("agent"),
            "title": s.get("title"),
            "cwd": s.get("cwd"),
            "updated": s.get("updatedAt"),
            "live": {"state": s.get("state"), "clients": s.get("clients")},
        }
        for s in live_sessions(answer)
    ]


def rows(answers: list[Answer], cells: Any, relative: Any) -> list[str]:
    """The table's rows for the linked hosts: `cells(host, id, agent, title, cwd, turns,
    updated, at_host)` lays one out as this machine's are; `relative` says a time stamp
    as "5m ago"."""
    lines = []
    for answer in answers:
        if answer.result is None:
            lines.append(unreachable(answer))
            continue
        for s in live_sessions(answer):
            state = str(s.get("state") or "open")
            clients = s.get("clients")
            lines.append(
                cells(
                    answer.link.name,
                    s["sessionId"],
                    _text(s.get("agent")),
                    _text(s.get("title")),
                    _text(s.get("cwd")),
                    "-",
                    relative(str(s.get("updatedAt") or "")),
                    f"  {_text(state)} at {answer.link.name}"
                    + (f" ({clients} client(s))" if isinstance(clients, int) and clients else ""),
                )
            )
    return lines


def _text(value: Any) -> str:
    return one_line(str(value or ""))


def session_at(text: str) -> tuple[SessionMeta, Remote] | None:
    """`HOST:ID` (or a unique prefix of the id) where HOST is a linked host: its live
    session, and the link to the session's agent there; None when `text` names no linked
    host (a session of this machine's)."""
    name, sep, wanted = text.partition(":")
    if not sep or not wanted:
        return None
    from acpctl import config
    from acpctl.host_links import links_of

    link = links_of(config.load()).get(name)
    if link is None:
        return None
    import asyncio

    from acpctl import protocol as acp
    from acpctl.errors import UsageError
    from acpctl.remote.fleet import ask_all
    from acpctl.store.sessions import SessionMeta

    [answer] = asyncio.run(ask_all([link], acp.HOST_SESSIONS, {}))
    if answer.result is None:
        raise UsageError(unreachable(answer))
    live = live_sessions(answer)
    found = [s for s in live if s["sessionId"] == wanted] or [
        s for s in live if s["sessionId"].startswith(wanted)
    ]
    if len(found) != 1:
        said = "no live session" if not found else f"{len(found)} live sessions match"
        raise UsageError(f"{said} {wanted!r} at {name} (`acpctl sessions list` lists them)")
    session = found[0]
    agent = session.get("agent")
    if not isinstance(agent, str) or not agent:
        raise UsageError(f"{name} did not say which agent runs session {wanted!r}")
    cwd = session.get("cwd")
    meta = SessionMeta(
        id=session["sessionId"],
        agent=agent,
        command=[],
        cwd=cwd if isinstance(cwd, str) and cwd else "/",
        title=_text(session.get("title")) or None,
    )
    return meta, link.agent_remote(agent)
