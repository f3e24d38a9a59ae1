"""`run --acp` for a remote agent (config.toml's `url` or `ssh`): the editor's stdio linked
to the remote (remote/link.py) over the transport its address names."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any
from urllib.parse import urlsplit

from acpctl.config import Remote
from acpctl.jsonrpc.streams import Output, open_input
from acpctl.remote.link import Link
from acpctl.remote.transports import (
    LinkRefused,
    ResumePoint,
    Transport,
    open_ssh,
    open_websocket,
    read_token,
    tls_context,
)


def relay_remote(remote: Remote, log: logging.Logger) -> int:
    return asyncio.run(_relay(remote, log))


async def _relay(remote: Remote, log: logging.Logger) -> int:
    output = await Output.open(1)
    session: Any = None
    if remote.url is not None:
        import aiohttp

        # Cookies kept and returned for the connection's life: a load balancer's
        # affinity cookie keeps every reconnect on the same host. unsafe: also for hosts
        # named by IP address.
        session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        url = remote.url

        async def dial(point: ResumePoint | None) -> Transport:
            check_clear_text(url)
            context = tls_context(remote) if url.startswith(("wss:", "https:")) else None
            if url.startswith(("http:", "https:")):
                from acpctl.remote.streamable import open_streamable

                return await open_streamable(session, url, read_token(remote), context, point)
            return await open_websocket(session, url, read_token(remote), context, point)

    else:

        async def dial(point: ResumePoint | None) -> Transport:
            return await open_ssh(remote, point)

    link = Link(remote.address, dial, output, log, remote.outage_limit_s)
    try:
        return await link.run(await open_input(0))
    finally:
        if session is not None:
            await session.close()
        output.close()


def check_clear_text(url: str) -> None:
    """ws:// and http:// carry the token in clear text: on loopback only."""
    parts = urlsplit(url)
    if parts.scheme in ("wss", "https"):
        return
    host = parts.hostname or ""
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise LinkRefused(
        f"{url} is not encrypted and {host} is not this machine: use wss:// or https:// "
        "(the token would cross the network in clear text)"
    )
