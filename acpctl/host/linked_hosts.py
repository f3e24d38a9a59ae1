"""What this session host knows of its linked hosts (config.toml's [links], host_links.py):
a connection to each, kept (dialled again after a drop, backing off), on which that host
tells its own waiting questions and live sessions as they change (acp.LINKED_META: its
own only, so links are not transitive and a loop never echoes). This host's clients (the
page) are told them too, each marked with its host; a question of a linked host is
answered there through the connection (HOST_ANSWER), as "by DEVICE, through THIS HOST".

The connection is the remote transports' (remote/lines.py over ssh, through `serve
--bridge --no-start`: a list starts no host there; remote/websocket.py with the linked
host's token, which never leaves this host)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.host_links import HostLink
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.remote.transport import LinkDown, LinkRefused, NoSuchHost, Transport
from acpctl.runner.clients import Client

BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 30.0


@dataclass
class Watched:
    link: HostLink
    transport: Transport | None = None
    waiting: list[JsonObject] = field(default_factory=list)
    sessions: list[JsonObject] = field(default_factory=list)
    projects: JsonObject = field(default_factory=dict)  # its agents and projects
    down_since: float | None = None  # time.time() of the first failure in a row
    problem: str = acp.NOT_CONNECTED_YET
    stopped: bool = False  # it said it stops (acpctl host stop), rather than dropping
    # Its questions told as asked (on_asked): one still waiting after a drop is not again.
    announced: set[str] = field(default_factory=set)


class LinkedHosts:
    def __init__(
        self,
        on_change: Callable[[str], None],
        log: logging.Logger,
        on_asked: Callable[[str, JsonObject], None] = lambda host, entry: None,
    ) -> None:
        self.name = socket.gethostname().split(".")[0] or "a linked host"  # as they say us
        self._watched: dict[str, Watched] = {}  # relink() says which
        self._on_change = on_change
        self._on_asked = on_asked  # a linked host's question, new (the notifier's)
        self._log = log
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._ids = itertools.count(1)
        self._http: Any = None
        self._sending: set[asyncio.Task[None]] = set()

    def relink(self, links: list[HostLink]) -> list[str]:
        """config.toml's links as they are now (`host link add` or `remove` says so while
        the host runs): one removed is no longer watched, one added or changed is watched
        afresh; the names watched."""
        wanted = {link.name: link for link in links}
        for name in [n for n, w in self._watched.items() if wanted.get(n) != w.link]:
            self._tasks.pop(name).cancel()  # its connection closes as its task ends
            del self._watched[name]
        for name, link in wanted.items():
            if name not in self._watched:
                self._watched[name] = watched = Watched(link)
                self._tasks[name] = asyncio.ensure_future(self._watch(watched))
        self._on_change(acp.WAITING_CHANGED)
        self._on_change(acp.SESSIONS_CHANGED)
        return list(self._watched)

    async def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._http is not None:
            await self._http.close()

    # -- what this host's clients are told ------------------------------------------------

    def waiting(self) -> list[JsonObject]:
        return [
            {**entry, "host": w.link.name}
            for w in self._watched.values()
            if w.transport is not None
            for entry in w.waiting
        ]

    def sessions(self) -> list[JsonObject]:
        """The linked hosts' live sessions, each marked with its host; a host that does not
        answer is one entry that says since when (`unreachableSince`), or that it stopped."""
        listed: list[JsonObject] = []
        for w in self._watched.values():
            if w.transport is None:
                listed.append(
                    {
                        "host": w.link.name,
                        "unreachableSince": w.down_since,
                        "problem": "stopped" if w.stopped else w.problem,
                        "live": False,
                    }
                )
                continue
            listed += [{**s, "host": w.link.name} for s in w.sessions if s.get("live") is True]
        return listed

    def waiting_entry(self, host: str, question: str) -> JsonObject | None:
        """`host`'s question `question` while it waits (the notifier's check)."""
        watched = self._watched.get(host)
        waiting = watched.waiting if watched is not None else []
        return next((e for e in waiting if e.get("question") == question), None)

    def projects(self) -> JsonObject:
        """Each linked host's agents and projects (a new session's choices), by host."""
        return {
            name: {
                "agents": _strings(w.projects.get("agents")),
                "projects": _strings(w.projects.get("projects")),
            }
            for name, w in self._watched.items()
            if w.transport is not None and w.projects
        }

    def link(self, host: str) -> HostLink | None:
        watched = self._watched.get(host)
        return watched.link if watched is not None else None

    def names(self) -> list[str]:
        """The hosts watched (`sessions list` takes them from here, not asking each)."""
        return list(self._watched)

    def forward(self, params: JsonObject, client: Client) -> JsonObject:
        """HOST_ANSWER with "host": sent to that host, answered there as by `client` (its
        device, else its name) through this host. What it says back comes as its
        questions' change."""
        watched = self._watched.get(str(params.get("host")))
        if watched is None or watched.transport is None:
            raise RpcError(acp.RESOURCE_NOT_FOUND, f"no linked host {params.get('host')!r} answers")
        answer = {
            "question": params.get("question"),
            "optionId": params.get("optionId"),
            "by": client.device or client.info.get("name"),
            "device": client.device is not None,
            "via": client.via,  # from a notification, or the page
            "through": self.name,
        }
        message = jsonrpc.request(f"answer-{next(self._ids)}", acp.HOST_ANSWER, answer)
        self._spawn_send(watched.transport, message)
        return {"forwarded": watched.link.name}

    def _spawn_send(self, transport: Transport, message: JsonObject) -> None:
        sending = asyncio.ensure_future(self._send(transport, message))
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)

    # -- the connections ------------------------------------------------------------------

    async def _watch(self, watched: Watched) -> None:
        backoff = BACKOFF_FIRST_S
        while True:
            try:
                transport = await self._dial(watched.link)
            except (LinkDown, LinkRefused, NoSuchHost, OSError, asyncio.TimeoutError) as exc:
                self._went_down(watched, str(exc) or type(exc).__name__)
            else:
                began = time.monotonic()
                reason = await self._carry(watched, transport)
                self._went_down(watched, reason)
                if time.monotonic() - began > BACKOFF_MAX_S:
                    backoff = BACKOFF_FIRST_S
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _dial(self, link: HostLink) -> Transport:
        if link.ssh is not None:
            from acpctl.remote.lines import open_ssh

            return await open_ssh(link.remote, None, "--no-start")
        from acpctl.remote.relay import make_dial, open_http

        if self._http is None:
            self._http = await open_http(link.remote)
        return await asyncio.wait_for(make_dial(link.remote, self._http)(None), 30)

    async def _carry(self, watched: Watched, transport: Transport) -> str:
        """Until the connection drops; why it did."""
        capabilities = {"_meta": {acp.CHANGES_META: True, acp.LINKED_META: True}}
        hello = {
            "protocolVersion": 1,
            "clientCapabilities": capabilities,
            "clientInfo": {"name": f"the session host of {self.name}"},
        }
        try:
            for msg_id, method, params in (
                ("hello", acp.INITIALIZE, hello),
                ("waiting", acp.HOST_WAITING, {"own": True}),
                ("sessions", acp.HOST_SESSIONS, {"own": True}),
                ("projects", acp.HOST_PROJECTS, {"own": True}),
            ):
                await transport.send(json.dumps(jsonrpc.request(msg_id, method, params)))
            watched.transport, watched.stopped = transport, False
            watched.down_since = None
            while (text := await transport.receive()) is not None:
                self._took(watched, text)
            return "stopped" if watched.stopped else transport.close_reason
        except LinkDown as exc:
            return str(exc)
        finally:
            watched.transport = None
            with contextlib.suppress(Exception):
                await transport.close(leaving=True)

    def _took(self, watched: Watched, text: str) -> None:
        try:
            message = json.loads(text)
        except (ValueError, RecursionError):
            return
        if not isinstance(message, dict):
            return
        method, msg_id = message.get("method"), message.get("id")
        result = message.get("result") if method is None else message.get("params")
        result = result if isinstance(result, dict) else {}
        if method == acp.WAITING_CHANGED or msg_id == "waiting":
            watched.waiting = _entries(result.get("waiting"))
            asked = {str(e.get("question")) for e in watched.waiting}
            for entry in watched.waiting:
                if str(entry.get("question")) not in watched.announced:
                    self._on_asked(watched.link.name, entry)
            watched.announced = asked
            self._on_change(acp.WAITING_CHANGED)
        elif method == acp.SESSIONS_CHANGED or msg_id == "sessions":
            watched.sessions = _entries(result.get("sessions"))
            self._on_change(acp.SESSIONS_CHANGED)
            if method == acp.SESSIONS_CHANGED and watched.transport is not None:
                # A new session may be in a new project: its choices asked again, under
                # an id of its own (the host runs a request id it has seen once only).
                again_id = f"projects-{next(self._ids)}"
                again = jsonrpc.request(again_id, acp.HOST_PROJECTS, {"own": True})
                self._spawn_send(watched.transport, again)
        elif isinstance(msg_id, str) and msg_id.startswith("projects"):
            watched.projects = result
        elif method == acp.HOST_STOPPING:
            watched.stopped = True
        elif isinstance(msg_id, str) and msg_id.startswith("answer-") and "error" in message:
            self._log.warning("%s refused an answer: %s", watched.link.name, message["error"])

    def _went_down(self, watched: Watched, reason: str) -> None:
        if watched.down_since is None:
            watched.down_since = time.time()
            self._log.info("linked host %s: %s", watched.link.name, reason)
        watched.problem = reason
        watched.waiting, watched.sessions = [], []
        self._on_change(acp.WAITING_CHANGED)
        self._on_change(acp.SESSIONS_CHANGED)

    async def _send(self, transport: Transport, message: JsonObject) -> None:
        with contextlib.suppress(LinkDown):
            await transport.send(json.dumps(message))


def _strings(listed: Any) -> list[str]:
    return [v for v in listed if isinstance(v, str)] if isinstance(listed, list) else []


def _entries(listed: Any) -> list[JsonObject]:
    """A linked host's list, as data from the network: its objects only."""
    return [e for e in listed if isinstance(e, dict)] if isinstance(listed, list) else []
