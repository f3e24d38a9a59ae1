"""`run --acp` through a session host: the editor's stdio linked (remote/link.py) to this
machine's host (config.toml's `host = true`, and `sessions attach`) over its unix socket, or
to a remote agent (`url` or `ssh`) over the transport its address names. One link, whichever
host: resume, reload, the outage limit and its messages hold for each."""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from acpctl import environ
from acpctl.config import Remote, clear_text_problem
from acpctl.jsonrpc.streams import Lines, Output, open_input
from acpctl.remote.lines import LinesTransport, open_local, open_ssh
from acpctl.remote.link import Dial, Link
from acpctl.remote.transport import LinkDown, LinkRefused, ResumePoint, Transport

NOTE = "note: "  # a line for the person, which acpctl's terminal client shows too
LOCAL_HOST = "the session host"


EditorEnds = Callable[[], Awaitable[tuple[asyncio.StreamReader, Lines]]]


def relay_local(agent: str, outage_limit_s: float, fallback: bool) -> int | None:
    """The editor linked to `agent` on this machine's session host (started when none
    answers), until the editor goes; the exit status. None: with `fallback`, the host
    could not serve the agent (the reason is on stderr), so the caller serves directly."""
    return asyncio.run(link_local(agent, outage_limit_s, fallback, _stderr_log(), _stdio))


async def _stdio() -> tuple[asyncio.StreamReader, Lines]:
    output = await Output.open(1)
    return await open_input(0), output


async def link_local(
    agent: str,
    outage_limit_s: float,
    fallback: bool,
    log: logging.Logger,
    editor: EditorEnds,
    cwd: str | None = None,
) -> int | None:
    """The link itself, said on `log`: `editor()` gives the editor's two ends once the host
    answered (stdio for `run --acp`, which is not read before: a fallback serves it; pipes
    within the process for the terminal's `sessions attach`). `cwd`: the client's project
    (ours by default)."""
    try:
        opened = await open_local(agent, start=True, resume_from=None, cwd=cwd, log=log)
    except (LinkDown, LinkRefused) as exc:
        log.warning("%s%s", exc, "; serving directly" if fallback else "")
        return None if fallback else 1
    note = environment_note(agent, opened.connected)
    if note:
        log.warning("%s", note)
    reader, output = await editor()
    first: LinesTransport | None = opened

    async def dial(point: ResumePoint | None) -> Transport:
        nonlocal first
        if first is not None:
            transport, first = first, None
            return transport
        # A host that went away is started again, unless it said it was stopping: then
        # only one started by somebody else (`serve --replace`) is taken up.
        return await open_local(
            agent, start=link.state.stopping is None, resume_from=point, cwd=cwd, log=log
        )

    link = Link(LOCAL_HOST, dial, output, log, outage_limit_s)
    try:
        return await link.run(reader)
    finally:
        output.close()


async def link_remote(remote: Remote, log: logging.Logger, editor: EditorEnds) -> int:
    """The link to `remote` (a linked host's agent: `sessions attach HOST:ID`), said on
    `log`, the editor's ends from `editor()`."""
    http = await open_http(remote)
    reader, output = await editor()
    link = Link(remote.address, make_dial(remote, http), output, log, remote.outage_limit_s)
    try:
        return await link.run(reader)
    finally:
        if http is not None:
            await http.close()
        output.close()


def _stderr_log() -> logging.Logger:
    """The link's log, on stderr: an editor's agent log shows it, as it shows a direct
    run's (the host keeps the agent's own run log)."""
    log = logging.getLogger("acpctl.link")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("acpctl: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def environment_note(agent: str, connected: Any) -> str | None:
    """What to say when the host runs `agent` with an environment other than ours."""
    differs = connected.get("environmentDiffers") if isinstance(connected, dict) else None
    if not differs or not isinstance(differs, list):
        return None
    return (
        f"{NOTE}{agent} runs in the session host, with the host's environment, which differs "
        f"from this one in {environ.said([str(name) for name in differs])}: to run it with "
        "this one, restart the host from here (acpctl host start --replace), or set the "
        "variables in config.toml for the agent (docs/remote.md)"
    )


def relay_remote(
    remote: Remote,
    log: logging.Logger,
    on_sessions: Callable[[list[str]], None],
    history: Callable[[], Any] | None = None,
) -> int:
    """The editor linked to `remote`; `history()` makes the record of what is relayed
    (runner/remote_history.py), in the link's event loop."""
    return asyncio.run(_relay(remote, log, on_sessions, history))


async def _relay(
    remote: Remote,
    log: logging.Logger,
    on_sessions: Callable[[list[str]], None],
    history: Callable[[], Any] | None,
) -> int:
    output = await Output.open(1)
    http = await open_http(remote)
    link = Link(remote.address, make_dial(remote, http), output, log, remote.outage_limit_s)
    recorded = history() if history is not None else None
    link.state.on_sessions = on_sessions
    link.state.history = recorded
    try:
        return await link.run(await open_input(0))
    finally:
        if recorded is not None:
            await recorded.close()
        if http is not None:
            await http.close()
        output.close()


async def open_http(remote: Remote) -> Any:
    """The HTTP client session a URL agent's transports share (None over ssh). Cookies are
    kept and returned for its life, so a load balancer's affinity cookie keeps every
    reconnect on the same server (unsafe: also for hosts named by IP address)."""
    if remote.url is None:
        return None
    import aiohttp

    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


def make_dial(remote: Remote, http: Any) -> Dial:
    """How the link opens a transport to `remote`: the URL's profile, or ssh."""
    url = remote.url
    if url is None:

        async def over_ssh(point: ResumePoint | None) -> Transport:
            return await open_ssh(remote, point)

        return over_ssh

    context: ssl.SSLContext | None = None  # made at the first dial, for every later one

    async def over_http(point: ResumePoint | None) -> Transport:
        nonlocal context
        check_clear_text(url)
        # Loading the CAs takes tens of milliseconds: once, not at every reconnect. (The
        # token file is read at every dial: it may have been replaced.)
        from acpctl.remote.websocket import open_websocket, read_token, tls_context

        if context is None and url.startswith(("wss:", "https:")):
            context = tls_context(remote)
        if url.startswith(("http:", "https:")):
            from acpctl.remote.streamable import open_streamable

            return await open_streamable(http, url, read_token(remote), context, point)
        return await open_websocket(http, url, read_token(remote), context, point)

    return over_http


def check_clear_text(url: str) -> None:
    """ws:// and http:// carry the token in clear text: on loopback only."""
    problem = clear_text_problem(url)
    if problem:
        raise LinkRefused(problem)
