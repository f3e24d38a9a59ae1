"""Making the agent know a session again (after a restart, or for a session loaded from the
store): the agent's session/resume, else its session/load with its replay suppressed (the
editor gets acpctl's replay instead), else a fresh agent session, given the mode, model and
options the user chose, with a note in `_meta` that the agent's context was lost."""

from __future__ import annotations

from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.context import Connection
from acpctl.runner.session import SessionRecord
from acpctl.runner.state import STATE_KEYS

CONTEXT_LOST_NOTE = "the agent's context for this session could not be restored"


def beyond_state(result: JsonObject) -> JsonObject:
    """What an agent's answer establishing a session carries beyond its state and its
    own id for it (which acpctl's differs from)."""
    return {k: v for k, v in result.items() if k not in (*STATE_KEYS, "sessionId")}


class Attacher:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        # The agent names the session in its load and resume answers (claude-agent-acp
        # does; the schema does not ask it): so do acpctl's answers for it.
        self.names_session = False

    async def attach(self, record: SessionRecord) -> tuple[JsonObject, str | None]:
        """The session's state (modes, models, options) as the editor gets it, and a note
        when the agent's context was lost. Call with record.lock held."""
        await self.conn.start_agent()
        if record.generation == self.conn.backend.generation:
            return self.carried(record), None
        result: Any = None
        attached = False
        if record.agent_session_id:
            attached, result = await self._resume(record, record.agent_session_id)
            if not attached:
                attached, result = await self._load(record, record.agent_session_id)
        note = None
        if attached:
            record.state.absorb(result)
            if isinstance(result, dict):
                self.names_session = self.names_session or "sessionId" in result
                record.carried = beyond_state(result)
        else:
            note = await self._fresh(record)
        record.generation = self.conn.backend.generation
        return self.carried(record), note

    def carried(self, record: SessionRecord) -> JsonObject:
        """An answer from acpctl's state for `record` that keeps what the agent's own
        answers carry: its own fields, and the session named (by acpctl's id) when the
        agent names it."""
        named = {"sessionId": record.id} if self.names_session else {}
        return {**named, **record.carried, **record.state.as_result()}

    async def _resume(self, record: SessionRecord, agent_id: str) -> tuple[bool, Any]:
        if not self.conn.handshake.agent_can("resume"):
            return False, None
        self.conn.sessions.bind(record, agent_id)
        response = await self.conn.backend.call(
            acp.SESSION_RESUME, {**record.attach_params, "sessionId": agent_id}
        )
        if "result" not in response:
            self.conn.log.info(
                "agent could not resume session %s: %s", record.id, response.get("error")
            )
            return False, None
        return True, response["result"]

    async def _load(self, record: SessionRecord, agent_id: str) -> tuple[bool, Any]:
        if not self.conn.handshake.agent_can("load"):
            return False, None
        self.conn.sessions.bind(record, agent_id)
        record.suppress_replay = True

        def replay_done(response: JsonObject) -> None:
            record.suppress_replay = False

        response = await self.conn.backend.call(
            acp.SESSION_LOAD,
            {**record.attach_params, "sessionId": agent_id},
            on_response=replay_done,
        )
        record.suppress_replay = False
        if "result" not in response:
            self.conn.log.info(
                "agent could not load session %s: %s", record.id, response.get("error")
            )
            return False, None
        return True, response["result"]

    async def _fresh(self, record: SessionRecord) -> str | None:
        had_context = bool(record.agent_session_id or record.meta.turns)

        def bind(response: JsonObject) -> None:
            # In the read loop: the updates the agent sends right after its answer (its
            # commands, say) already find the session.
            result = response.get("result")
            if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                self.conn.sessions.unbind(record)
                record.meta.agent_session_id = result["sessionId"]
                self.conn.sessions.bind(record, result["sessionId"])

        # `_meta.acpctl.sessionId`: the session this one stands in for (the pi backend keeps
        # pi's files in its directory; ACP agents ignore what they do not know in _meta).
        params = {**record.attach_params, "_meta": {"acpctl": {"sessionId": record.id}}}
        response = await self.conn.backend.call(acp.SESSION_NEW, params, on_response=bind)
        fresh = jsonrpc.unwrap(response)
        if not isinstance(fresh, dict) or not isinstance(fresh.get("sessionId"), str):
            raise RpcError(acp.INTERNAL_ERROR, "agent returned no sessionId")
        chosen = record.state.restore_calls(fresh, fresh["sessionId"])
        record.state.absorb({k: v for k, v in fresh.items() if k != "sessionId"})
        for method, params in chosen:
            answer = await self.conn.backend.call(method, params)
            if "result" in answer:
                record.state.on_set(method, params, answer["result"])
            else:
                self.conn.log.info(
                    "could not restore %s of session %s: %s", method, record.id, answer.get("error")
                )
        note = None
        if had_context:
            note = CONTEXT_LOST_NOTE
            self.conn.log.warning("session %s: %s; started a fresh agent session", record.id, note)
        self.conn.recorder.save(record)
        return note


def with_note(result: Any, note: str | None) -> Any:
    """The attach result as the editor gets it: with acpctl's note when context was lost."""
    result = dict(result) if isinstance(result, dict) else {}
    if note:
        meta = dict(result.get("_meta") or {})
        meta["acpctl"] = {"contextRestored": False, "note": note}
        result["_meta"] = meta
    return result
