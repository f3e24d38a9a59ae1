"""`acpctl sessions attach` and `fork`: a stored session joined live at the host, or forked
into a new one, through a child `acpctl run --acp` (terminal/relay_connection.py)."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import sys
from typing import Any

from acpctl import __version__, config
from acpctl import protocol as acp
from acpctl.agents import discovery
from acpctl.config import Remote
from acpctl.jsonrpc import RpcError
from acpctl.store.sessions import SessionMeta, SessionStore
from acpctl.terminal.client import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    Options,
    Turn,
    chat,
    leave,
    restore_terminal,
    stored,
)
from acpctl.terminal.host import ClientHost
from acpctl.terminal.questions import ask_on_terminal, elicit_on_terminal
from acpctl.terminal.relay_connection import RelayConnection, initialize
from acpctl.terminal.render import RENDERERS, status


def fork(text: str, name: str | None) -> str:
    """`acpctl sessions fork`: a fork of a stored session through its agent's relay (the
    agent's own fork, else acpctl's), named `name`; its id."""
    parent = stored(text)
    discovery.resolve(config.load(), parent.agent).as_spec()  # not installed: say so now

    async def forked() -> str:
        host = ClientHost([parent.cwd], "deny-all", ask_on_terminal)
        conn = RelayConnection(host, RENDERERS["quiet"]())
        await conn.start(parent.agent, cwd=parent.cwd)
        try:
            with status(f"starting {parent.agent}..."):
                await initialize(conn, host)
                params = {"sessionId": parent.id, "cwd": parent.cwd, "mcpServers": []}
                result = await conn.request(acp.SESSION_FORK, params)
            return str(result["sessionId"])
        finally:
            await conn.close()

    session_id = asyncio.run(forked())
    if name:
        SessionStore().rename(session_id, name)
    return session_id


def attach(meta: SessionMeta, observe: bool, format: str, remote: Remote | None = None) -> int:
    """`acpctl sessions attach`: this terminal joined to a session the session host holds
    (this machine's, or with `remote`, a linked host's), as a controller (prompts, cancels,
    answers the agent's permission requests) or an observer: its history, then everything
    that happens in it, whoever asks."""
    cfg = config.load()
    if not observe and not sys.stdin.isatty():
        print(
            "acpctl: no terminal to prompt from or answer on: attaching as an observer",
            file=sys.stderr,
        )
        observe = True
    return asyncio.run(_attached(meta, observe, format, cfg.silence_warning_s, remote))


async def _attached(
    meta: SessionMeta, observe: bool, format: str, silence_s: float, remote: Remote | None
) -> int:
    renderer = RENDERERS[format]()
    host = ClientHost([meta.cwd], "ask", ask_on_terminal, elicit=elicit_on_terminal)
    conn = RelayConnection(host, renderer)
    conn.session_id = meta.id  # the replay that answers the attach is ours to show
    # Through the host as an editor's `run --acp` goes (one started when none runs, which
    # takes the session up from the store): the link says when the host goes and comes back.
    await conn.start(meta.agent, through_host=True, cwd=meta.cwd, remote=remote)
    try:
        await initialize(conn, host)
        role = acp.OBSERVER if observe else acp.CONTROLLER
        result = await conn.request(
            acp.SESSION_ATTACH,
            {
                "sessionId": meta.id,
                "role": role,
                "historyPolicy": "full",
                "clientInfo": {"name": "acpctl sessions attach", "version": __version__},
            },
        )
        others = ", ".join(
            f"{c.get('name')} ({c.get('role')})" for c in result.get("connectedClients") or []
        )
        banner = f"\nacpctl: attached to {meta.id} as {result.get('role')}" + (
            f"; also here: {others}" if others else ""
        )
        if observe:
            return await _until_gone(conn, f"{banner}; Ctrl-C leaves")
        conn._spawn(_left_when_the_host_goes(conn, list(conn.tasks)))
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(
            signal.SIGINT, lambda: conn.turn.interrupt() if conn.turn else conn._spawn(leave(conn))
        )
        env = dict(os.environ)
        options = Options(
            agent=meta.agent,
            prompt=None,
            cwd=meta.cwd,
            session=meta.id,
            continue_=False,
            policy="ask",
            format=format,
            timeout=None,
            piped=None,
        )
        new_turn = functools.partial(Turn, conn, meta.agent, silence_s, env)
        return await chat(conn, renderer, options, new_turn, banner)
    except RpcError as exc:
        print(f"acpctl: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if exc.code == acp.RESOURCE_NOT_FOUND else EXIT_ERROR
    finally:
        await conn.close()


async def _until_gone(conn: RelayConnection, banner: str) -> int:
    """Watch until Ctrl-C (which the banner says once it is so: 0), or until the host goes
    (said: 1)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    print(banner, file=sys.stderr)
    reading = list(conn.tasks)
    waiting = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiting, *reading}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    loop.remove_signal_handler(signal.SIGINT)
    if stop.is_set():
        return EXIT_OK
    print(f"\nacpctl: {conn.ended()}", file=sys.stderr)
    return EXIT_ERROR


async def _left_when_the_host_goes(conn: RelayConnection, reading: list[asyncio.Task[Any]]) -> None:
    """A controller at its prompt waits in a thread that nothing can wake: when the host
    goes, say so, and leave as Ctrl-C leaves (the terminal as it was), with status 1."""
    await asyncio.wait(reading)
    if conn.closing or conn.turn is not None:  # we left; or the turn's failure says it
        return
    print(f"\nacpctl: {conn.ended()}", file=sys.stderr)
    restore_terminal(conn.saved_terminal)
    os._exit(EXIT_ERROR)
