"""`run --acp` for a remote agent (config.toml's `url` or `ssh`): the editor's stdio linked
to the remote (remote/link.py) over the transport its address names."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from typing import Any

from acpctl.config import Remote, clear_text_problem
from acpctl.jsonrpc.streams import Output, open_input
from acpctl.remote.link import Dial, Link
from acpctl.remote.transports import (
    LinkRefused,
    ResumePoint,
    Transport,
    open_ssh,
    open_websocket,
    read_token,
    tls_context,
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
    link.on_sessions = on_sessions
    link.history = history() if history is not None else None
    try:
        return await link.run(await open_input(0))
    finally:
        if link.history is not None:
            await link.history.close()
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
