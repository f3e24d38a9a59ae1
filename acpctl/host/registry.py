"""The host's logical connections (host/connection.py) by id: each served on its agent by
a task of its own for as long as it lives, past any one transport."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import NamedTuple

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.agents import AgentPool, HostedAgent
from acpctl.host.connection import GRACE_S, LogicalConnection
from acpctl.runner.clients import Client

# Logical connections a token (or a paired device) may hold, and all of them: past either,
# the oldest idle one (no transport attached) makes way, else the new one is refused. A
# token's share is sized for one person's tabs and devices (a page holds one connection
# an agent it shows, and a client's burst of 100 fits); the unix socket's clients are
# this user's own processes, held by the total alone. Once half are taken, a connection
# that goes idle is kept SHORT_GRACE_S for its client to come back, not the usual GRACE_S
# (host/connection.py): a flood of initializes is reaped in seconds.
MAX_PER_TOKEN = 128
MAX_IN_ALL = 4096
SHORT_GRACE_S = 5.0
ROOM_SAID_EVERY_S = 10.0


class Caller(NamedTuple):
    """Who a connection came in as: a token's role, or a paired device (acpctl serve
    --pair), which has a role of its own. A connection is resumed only by the same."""

    role: str
    device: str | None = None
    local: bool = False  # on the unix socket: no token's share applies


class TooManyConnections(AcpctlError):
    """Every place a token may hold is in use by a client that is connected."""


class Connections:
    def __init__(self, pool: AgentPool, log: logging.Logger) -> None:
        self.pool = pool
        self.log = log
        self.by_id: dict[str, tuple[LogicalConnection, Caller]] = {}  # id -> (it, whose)
        self._tasks: set[asyncio.Task[None]] = set()
        self._made_room = 0  # idle connections ended for new ones, since it was last said
        self._said_room = -ROOM_SAID_EVERY_S

    async def open(
        self,
        agent: str | None,
        caller: Caller,
        connection_id: str,
        forward_log: bool = False,
        link: bool = False,
        client_dir: str | None = None,
    ) -> LogicalConnection:
        """A new connection on `agent`, served from now on; with `forward_log`, the agent's
        log is sent on it too. Raises AgentChanged and AcpctlError (unknown agent) before
        anything is made."""
        if connection_id in self.by_id:
            raise AcpctlError(f"connection {connection_id} exists; resume it with stream/resume")
        self._make_room(caller)
        hosted = await self.pool.get(agent, client_dir)
        turns = hosted.server.turns
        connection = LogicalConnection(
            connection_id,
            on_idle=self._forget,
            store=self.pool.store,
            grace_s=self._grace_s,
            turn_running=lambda session: any(r.id == session for r in turns.running.values()),
            role=caller.role,
            device=caller.device,
        )
        self.by_id[connection.id] = (connection, caller)
        client = Client(
            connection,
            may_control=caller.role == acp.CONTROLLER,
            link=link,
            device=caller.device,
        )
        task = asyncio.ensure_future(self._serve(hosted, client, connection, forward_log))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return connection

    async def _serve(
        self, hosted: HostedAgent, client: Client, connection: LogicalConnection, log: bool
    ) -> None:
        forward = _LogLines(connection) if log else None
        if forward is not None:
            hosted.log.addHandler(forward)
        try:
            await self.pool.serve(hosted, client)
        finally:
            if forward is not None:
                hosted.log.removeHandler(forward)
            connection.end()
            self.by_id.pop(connection.id, None)

    def _make_room(self, caller: Caller) -> None:
        held = [(c, whose) for c, whose in self.by_id.values() if not c.ended]
        mine = [c for c, whose in held if whose == caller]
        if len(mine) >= MAX_PER_TOKEN and not caller.local:
            crowded, limit = mine, MAX_PER_TOKEN
        elif len(held) >= MAX_IN_ALL:
            crowded, limit = [c for c, _ in held], MAX_IN_ALL
        else:
            return
        idle = next((c for c in crowded if c.idle), None)  # oldest first: by_id's order
        if idle is None:
            raise TooManyConnections(
                f"{limit} connections are open{' for this token' if crowded is mine else ''}, "
                "all in use; close one first"
            )
        idle.end()
        self.by_id.pop(idle.id, None)
        self._made_room += 1
        now = time.monotonic()
        if now - self._said_room >= ROOM_SAID_EVERY_S:  # a flood is one line, not thousands
            self.log.info("%d idle connection(s) ended to make room for new ones", self._made_room)
            self._made_room, self._said_room = 0, now

    def _grace_s(self) -> float:
        return SHORT_GRACE_S if len(self.by_id) >= MAX_IN_ALL // 2 else GRACE_S

    def _forget(self, connection: LogicalConnection) -> None:
        self.by_id.pop(connection.id, None)

    def find(self, connection_id: str | None, caller: Caller) -> LogicalConnection | None:
        """The live connection `connection_id` names, for `caller` (a connection id is a
        name, not a credential: an observer's token never reaches a controller's
        connection, nor one device another's)."""
        found = self.by_id.get(connection_id or "")
        if found is None or found[1] != caller or found[0].ended:
            return None
        return found[0]

    def end_role(self, role: str) -> int:
        """End every connection that came in with `role`'s token (it was replaced); how
        many."""
        return self._end(Caller(role))

    def end_device(self, device: str) -> int:
        """End every connection of the device (it was revoked); how many."""
        return sum(
            self._end(whose) for whose in {w for _, w in self.by_id.values() if w.device == device}
        )

    def _end(self, caller: Caller) -> int:
        ending = [connection for connection, whose in self.by_id.values() if whose == caller]
        for connection in ending:
            connection.end()
        return len(ending)

    async def close(self) -> None:
        for connection, _ in list(self.by_id.values()):
            connection.end()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)


class _LogLines(logging.Handler):
    """The agent's log, as the client's `_acpctl/log` notifications: `run --acp` through the
    host writes them to its stderr, where the editor's agent log shows them, as it shows a
    direct run's."""

    def __init__(self, connection: LogicalConnection) -> None:
        super().__init__(logging.INFO)
        self.connection = connection

    def emit(self, record: logging.LogRecord) -> None:
        message = {"message": record.getMessage()}
        self.connection.send(jsonrpc.notification(acp.HOST_LOG, message))
