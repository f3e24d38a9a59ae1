"""The session host's own methods (`_acpctl/...`), in one table: what each answers, and where
it is asked. LOCAL methods are asked on the unix socket, as its first line (the socket's
permissions are their check: `acpctl host status`, `pair`, `stop`...); CLIENTS methods are
asked by any client of an agent's connection, on the unix socket, WebSocket or Streamable
HTTP alike (the page's lists, its push subscription). A method may be both
(`_acpctl/devices`; `_acpctl/sessions`, `_acpctl/answer` and `_acpctl/search`, which
another machine asks over ssh as the socket's first line). docs/web.md and docs/remote.md
say what each returns."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from acpctl import __version__, paths
from acpctl import protocol as acp
from acpctl.host.agents import AgentPool
from acpctl.host.answers import answered_here
from acpctl.host.push import Pusher
from acpctl.host.tcp_controls import TcpDoor
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.clients import Client

LOCAL, CLIENTS = "local", "clients"


@dataclass(frozen=True)
class HostMethod:
    # The answer to params, asked by a client (None on the unix socket's first line).
    # (Awaitable: answered once it is done, the client's other requests meanwhile.)
    answer: Callable[[Client | None, JsonObject], JsonObject | Awaitable[JsonObject]]
    reach: frozenset[str]


def host_methods(
    pool: AgentPool,
    tcp: TcpDoor,
    pusher: Pusher,
    listening: list[JsonObject],
    stop: Callable[[bool], None],
    relink: Callable[[], JsonObject],
) -> dict[str, HostMethod]:
    """The table. `stop(now)`: the host's graceful stop (now: running turns cancelled);
    `relink()`: config.toml's linked hosts watched as they are now."""

    def status(client: Client | None, params: JsonObject) -> JsonObject:
        return {
            "pid": os.getpid(),
            "version": __version__,
            "socket": str(paths.host_socket()),
            "listening": listening,
            "agents": pool.status(),
        }

    def stopping(client: Client | None, params: JsonObject) -> JsonObject:
        running = pool.running_turns()
        stop(params.get("now") is True)
        return {"pid": os.getpid(), "runningTurns": running}

    local, clients, both = frozenset({LOCAL}), frozenset({CLIENTS}), frozenset({LOCAL, CLIENTS})
    return {
        acp.HOST_STATUS: HostMethod(status, local),
        acp.HOST_STOP: HostMethod(stopping, local),
        acp.HOST_RELINK: HostMethod(lambda c, params: relink(), local),
        acp.HOST_ROTATE_TOKEN: HostMethod(lambda c, params: tcp.rotate(params), local),
        acp.HOST_PAIR: HostMethod(lambda c, params: tcp.pair(params), local),
        acp.HOST_REVOKE: HostMethod(lambda c, params: tcp.revoke(params), local),
        acp.HOST_DEVICES: HostMethod(lambda c, params: tcp.listed(), both),
        acp.HOST_WAITING: HostMethod(lambda c, p: pool.waiting(_own(c, p)), clients),
        acp.HOST_SESSIONS: HostMethod(lambda c, p: pool.sessions(_own(c, p)), both),
        acp.HOST_ANSWER: HostMethod(lambda c, params: answered(pool, c, params), both),
        acp.HOST_SEARCH: HostMethod(lambda c, params: searched(pool, params), both),
        acp.HOST_PROJECTS: HostMethod(lambda c, p: _projects(pool, c, p), clients),
        acp.HOST_PUSH_KEY: HostMethod(pusher.push_key, clients),
        acp.HOST_PUSH_SUBSCRIBE: HostMethod(pusher.push_subscribe, clients),
    }


def _own(client: Client | None, params: JsonObject) -> bool:
    """This host's own questions and sessions only (asked by a linked host: links are not
    transitive), or the linked hosts' too."""
    return params.get("own") is True or (client is not None and client.linked)


def _projects(pool: AgentPool, client: Client | None, params: JsonObject) -> JsonObject:
    """HOST_PROJECTS, with each linked host's ("linked": {host: {agents, projects}})."""
    known = pool.projects()
    if pool.linked is not None and not _own(client, params):
        known["linked"] = pool.linked.projects()
    return known


async def searched(pool: AgentPool, params: JsonObject) -> JsonObject:
    """HOST_SEARCH: this host's history searched, in a thread (an index to bring up to
    date may take a while: the host's other clients are not kept waiting)."""
    from acpctl.store.search import search

    def given(key: str, kind: type) -> Any:
        value = params.get(key)
        return value if isinstance(value, kind) and not isinstance(value, bool) else None

    words = given("words", str)
    if not words:
        raise RpcError(acp.INVALID_PARAMS, "give some words to search for")
    limit = min(max(given("limit", int) or 20, 1), 200)
    since = given("since", (int, float))  # type: ignore[arg-type]
    matches = await asyncio.to_thread(
        search, pool.store, words, given("agent", str), given("cwd", str), since, limit
    )
    return {"matches": matches}


def answered(pool: AgentPool, client: Client | None, params: JsonObject) -> JsonObject:
    """HOST_ANSWER: a question of this host's answered here; with "host", a linked host's,
    forwarded there as answered by this client's device."""
    if "host" not in params:
        return answered_here(pool, client, params)
    if client is None or not client.may_control or pool.linked is None:
        raise RpcError(acp.NOT_AUTHORISED, "not authorised: only a controller answers")
    return pool.linked.forward(params, client)


def reached(table: dict[str, HostMethod], reach: str) -> dict[str, HostMethod]:
    return {method: entry for method, entry in table.items() if reach in entry.reach}
