"""The connection-level methods a client sends before any session: initialize (the agent
started and initialized by the first client, its answer kept for the others: the session
host's later clients and its spare), authenticate and logout (kept, so that a restarted
agent is logged in again, or not)."""

from __future__ import annotations

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.runner.clients import Client, checked_client_id, declared_elicitation
from acpctl.runner.context import Connection
from acpctl.runner.handshake import as_v1_initialize


class Handshaking:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    async def initialize(self, client: Client, params: JsonObject) -> JsonObject:
        # Both sides speak the version acpctl's own handlers implement, at most.
        params = as_v1_initialize(params)
        info = params.get("clientInfo")
        client.info = info if isinstance(info, dict) else {}
        if client.info.get("clientId") is not None:  # for a load or resume that joins
            client.client_id = checked_client_id(client.info["clientId"])
        capabilities = params.get("clientCapabilities")
        meta = capabilities.get("_meta") if isinstance(capabilities, dict) else None
        client.wants_recorded = isinstance(meta, dict) and meta.get(acp.RECORDED_META) is True
        client.wants_changes = isinstance(meta, dict) and meta.get(acp.CHANGES_META) is True
        client.linked = isinstance(meta, dict) and meta.get(acp.LINKED_META) is True
        client.elicitation_modes = declared_elicitation(capabilities)
        handshake = self.conn.handshake
        if self.conn.shared and handshake.answer is not None:
            # The agent is initialized already (by the first client, or as a spare): the
            # session host's later clients get its answer.
            await self.conn.start_agent()
            return handshake.answer
        try:
            answer = await self.prepare(params)
        except Exception:  # the agent did not start: said in the error answer
            client.handshake_failed = True
            raise
        client.handshake_failed = "error" in answer  # nothing else is served then
        return answer

    async def prepare(self, params: JsonObject) -> JsonObject:
        """The agent started and initialized with `params` (a client's; or, for the session
        host's spare, the last client's), the answer kept for the clients to come."""
        handshake = self.conn.handshake
        to_agent = handshake.to_agent(params)
        await self.conn.start_agent()
        return handshake.to_editor(
            await self.conn.backend.call(acp.INITIALIZE, to_agent), self.conn.shared
        )

    async def authenticate(self, params: JsonObject) -> JsonObject:
        return await self._login_state(acp.AUTHENTICATE, params, replayed=params)

    async def logout(self, params: JsonObject) -> JsonObject:
        # A restart must not log in again.
        return await self._login_state(acp.LOGOUT, params, replayed=None)

    async def _login_state(
        self, method: str, params: JsonObject, replayed: JsonObject | None
    ) -> JsonObject:
        """Relay authenticate or logout; on success, what a restarted agent is sent."""
        await self.conn.ensure_agent()
        response = await self.conn.backend.call(method, params)
        if "result" in response:
            self.conn.handshake.logged_in(replayed)
        return response
