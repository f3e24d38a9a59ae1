"""The host's logical connections (host/connection.py) by id: each served on its agent by
a task of its own for as long as it lives, past any one transport."""

from __future__ import annotations

import asyncio
import logging

from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.agents import AgentPool, HostedAgent
from acpctl.host.connection import LogicalConnection
from acpctl.runner.clients import Client


class Connections:
    def __init__(self, pool: AgentPool, log: logging.Logger) -> None:
        self.pool = pool
        self.log = log
        self.by_id: dict[str, tuple[LogicalConnection, str]] = {}  # id -> (it, role)
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self, agent: str | None, role: str, connection_id: str) -> LogicalConnection:
        """A new connection on `agent`, served from now on. Raises AgentChanged and
        AcpctlError (unknown agent) before anything is made."""
        if connection_id in self.by_id:
            raise AcpctlError(f"connection {connection_id} exists; resume it with stream/resume")
        hosted = await self.pool.get(agent)
        connection = LogicalConnection(connection_id, on_idle=self._forget, store=self.pool.store)
        self.by_id[connection.id] = (connection, role)
        client = Client(connection, may_control=role == acp.CONTROLLER)
        task = asyncio.ensure_future(self._serve(hosted, client, connection))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return connection

    async def _serve(
        self, hosted: HostedAgent, client: Client, connection: LogicalConnection
    ) -> None:
        try:
            await self.pool.serve(hosted, client)
        finally:
            connection.end()
            self.by_id.pop(connection.id, None)

    def _forget(self, connection: LogicalConnection) -> None:
        self.by_id.pop(connection.id, None)

    def find(self, connection_id: str | None, role: str) -> LogicalConnection | None:
        """The live connection `connection_id` names, for a client of `role` (a connection
        id is a name, not a credential: an observer's token never reaches a controller's
        connection)."""
        found = self.by_id.get(connection_id or "")
        if found is None or found[1] != role or found[0].ended:
            return None
        return found[0]

    def end_role(self, role: str) -> int:
        """End every connection that came in as `role` (its token was replaced); how many."""
        ending = [connection for connection, its in self.by_id.values() if its == role]
        for connection in ending:
            connection.end()
        return len(ending)

    async def close(self) -> None:
        for connection, _ in list(self.by_id.values()):
            connection.end()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)
