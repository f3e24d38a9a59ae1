"""One connection's state, owned in one place: the backend and the handshake it replays,
the store and the recorder, the sessions open on the connection and the request ids across
both hops, the clients (one editor for `run --acp`; any number in the session host), the
log, the incidents and the limits.

The server and its parts (lifecycle, turns, attach) each take this one object, so what a
connection knows is written once and read by whoever needs it."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.backends import Backend
from acpctl.runner.clients import Client
from acpctl.runner.handshake import Handshake
from acpctl.runner.idmap import IdMap
from acpctl.runner.incidents import Incidents
from acpctl.runner.recorder import Recorder
from acpctl.runner.runs import RunRecord
from acpctl.runner.session import SessionTable
from acpctl.sandbox import Policy
from acpctl.store.sessions import SessionStore

# A method the session host answers itself (HOST_WAITING...): at once, or once awaited.
HostAnswer = Callable[[Client, Any], JsonObject | Awaitable[JsonObject]]


class Connection:
    def __init__(
        self,
        backend: Backend,
        store: SessionStore,
        recorder: Recorder,
        log: logging.Logger,
        *,
        incidents: Incidents | None = None,
        run_record: RunRecord | None = None,
        silence_s: float,
        shared: bool = False,
        sandbox: Policy | None = None,
    ) -> None:
        self.backend = backend
        self.store = store
        self.recorder = recorder
        self.log = log
        # Whether several clients may join one session (the session host): then initialize
        # advertises session/attach.
        self.shared = shared
        self.clients: list[Client] = []
        self.incidents = incidents or Incidents(None, log)
        self.run_record = run_record
        self.silence_s = silence_s  # config.toml's silence_warning_s (0: no watchdog)
        self.debug = bool(os.environ.get("ACPCTL_DEBUG"))
        self.handshake = Handshake()
        self.sessions = SessionTable(self.update_run_record)
        self.ids = IdMap()
        self.sandbox = sandbox  # the agent's: a session outside its roots is refused
        # Told of each question the agent asks a person in a session (a permission, an
        # elicitation), by its editor-hop id: the session host's notifier (host/notify.py).
        self.on_question: Callable[[int], None] | None = None
        # Told whenever the questions waiting for a person change (one asked, one settled,
        # withdrawn): the session host tells the clients that asked (its page).
        self.on_waiting_changed: Callable[[], None] | None = None
        # Told whenever its sessions change (one opened or closed, a turn begun or ended):
        # the session host tells the same clients.
        self.on_sessions_changed: Callable[[], None] | None = None
        # Methods the session host answers itself, on any agent's connection (HOST_WAITING,
        # HOST_SESSIONS): its state across all its agents, asked by a client with params.
        # Empty for `run --acp`.
        self.host_methods: dict[str, HostAnswer] = {}

    def waiting_changed(self) -> None:
        if self.on_waiting_changed is not None:
            self.on_waiting_changed()

    def sessions_changed(self) -> None:
        if self.on_sessions_changed is not None:
            self.on_sessions_changed()

    def broadcast(self, line: bytes) -> None:
        """What concerns no one session goes to every client."""
        for client in self.clients:
            client.channel.write(line)

    async def drain(self) -> None:
        for client in self.clients:
            await client.channel.drain()

    def update_run_record(self) -> None:
        self.sessions_changed()
        if self.run_record is not None:
            self.run_record.update(sessions=self.sessions.ids(), agentPid=self.backend.pid)

    async def start_agent(self) -> None:
        """The agent running (started, or restarted with the handshake replayed)."""
        await self.backend.ensure_running()
        self.update_run_record()

    async def ensure_agent(self) -> None:
        """As start_agent, for a request that needs the editor's initialize first."""
        if not self.handshake.started:
            raise RpcError(acp.INVALID_REQUEST, "initialize must be called first")
        await self.start_agent()
