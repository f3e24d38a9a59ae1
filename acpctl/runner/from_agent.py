"""What the agent says, as the backend hands it over (the AgentEvents of backends/): its
updates recorded as their own bytes and relayed to the session's clients (the hot path), its
requests asked of the clients that may answer them under ids of acpctl's, its exits. The
other direction, what the clients send, is the server's (server.py)."""

from __future__ import annotations

import time
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.jsontext import encode_text
from acpctl.runner.clients import tell
from acpctl.runner.context import Connection
from acpctl.runner.idmap import ReverseRequest, map_at
from acpctl.runner.lifecycle import SessionLifecycle
from acpctl.runner.session import SessionRecord

# What the agent may say about a session no one has while a fork is answered (the fork's own
# replay), held until the answer names it: at most this many messages.
HELD_WHILE_FORKING = 100_000
STATE_UPDATES = frozenset({acp.CURRENT_MODE_UPDATE, acp.CONFIG_OPTION_UPDATE})
# The update kinds the server looks into (everything else is relayed and recorded blind).
SPECIAL_UPDATES = STATE_UPDATES | {
    acp.SESSION_INFO_UPDATE,
    acp.SUBAGENT_UPDATE,
    acp.SESSION_MESSAGE,
    acp.SESSION_MESSAGE_CHUNK,
}
NESTED_SESSION_IDS = acp.METHODS[acp.SESSION_UPDATE].session_ids[1:]


class FromAgent:
    def __init__(self, conn: Connection, lifecycle: SessionLifecycle) -> None:
        self.conn = conn
        self.lifecycle = lifecycle

    def on_agent_notification(self, message: JsonObject, raw: bytes) -> None:
        """The hot path: every streamed update comes here. It is recorded and relayed as
        the agent's own bytes; only the kinds in SPECIAL_UPDATES are looked into."""
        params = message.get("params")
        if not isinstance(params, dict) or "sessionId" not in params:
            self._sessionless_notification(message, params, raw)
            return
        agent_session = params["sessionId"]
        record = self.conn.sessions.of_agent(agent_session)
        if record is None:
            held = self.lifecycle.unclaimed
            if self.lifecycle.forking and sum(map(len, held.values())) < HELD_WHILE_FORKING:
                held.setdefault(str(agent_session), []).append((message, raw))
                return
            # A session closed (or never opened) on this connection: what the agent still
            # says about it has no one to go to, and must not reach the editor under the
            # agent's raw id.
            self.conn.log.debug(
                "dropped %s for session %r, not open here", message.get("method"), agent_session
            )
            return
        if record.suppress_replay:
            return
        record.heard = time.monotonic()
        update = params.get("update")
        recorded = False
        if message.get("method") == acp.SESSION_UPDATE and isinstance(update, dict):
            self.conn.recorder.agent_update(record, raw)
            recorded = True
            kind = update.get("sessionUpdate")
            if kind == acp.AVAILABLE_COMMANDS_UPDATE:
                record.commands = update
            if kind in SPECIAL_UPDATES:
                params = self._special_update(record, params, update, kind)
        if self.conn.debug:
            self.conn.log.debug("-> %s session=%s", message.get("method"), record.id)
        if record.id == agent_session and params is message["params"]:
            record.write(raw + b"\n", message, recorded)  # decoded already: the line as it is
            return
        line = _renamed(raw, agent_session, record.id) if params is message["params"] else None
        if line is None:
            line = jsonrpc.encode({**message, "params": {**params, "sessionId": record.id}})[:-1]
        record.write(line + b"\n")

    def _sessionless_notification(self, message: JsonObject, params: Any, raw: bytes) -> None:
        if message.get("method") == acp.CANCEL_REQUEST and isinstance(params, dict):
            editor_id = self.conn.ids.editor_id(params.get("requestId"))
            request = self.conn.ids.pending(editor_id) if editor_id is not None else None
            if request is not None:
                tell(
                    request.asked,
                    jsonrpc.notification(acp.CANCEL_REQUEST, {**params, "requestId": editor_id}),
                )
            return
        self.conn.broadcast(raw + b"\n")

    def _special_update(
        self, record: SessionRecord, params: JsonObject, update: JsonObject, kind: str
    ) -> JsonObject:
        """Kept: the title, the mode and options. Mapped: nested session ids. Returns the
        params to relay (the same object when nothing changed)."""
        if kind == acp.SESSION_INFO_UPDATE:
            if isinstance(update.get("title"), str):
                record.meta.title = update["title"]
        elif kind in STATE_UPDATES:
            record.state.on_update(update)
        else:
            if kind == acp.SUBAGENT_UPDATE:
                self.lifecycle.subagent(record, update)
            return self._map_sessions(params, NESTED_SESSION_IDS)
        return params

    def _map_sessions(self, params: JsonObject, paths: tuple[str, ...]) -> JsonObject:
        """`params` with the agent's session ids at `paths` replaced by the editor's, where
        acpctl knows the session (a subagent's session it never saw keeps its id)."""

        def to_editor(agent_id: Any) -> Any:
            record = self.conn.sessions.of_agent(agent_id)
            return record.id if record is not None else agent_id

        for path in paths:
            params = map_at(params, path, to_editor)
        return params

    def on_agent_request(self, message: JsonObject, generation: int) -> None:
        params = message.get("params")
        agent_session = params.get("sessionId") if isinstance(params, dict) else None
        record = None
        method = str(message.get("method"))
        if isinstance(agent_session, str):
            record = self.conn.sessions.of_agent(agent_session)
            if record is None and not acp.is_extension(method):
                self.conn.backend.send(
                    jsonrpc.error(
                        message["id"], acp.RESOURCE_NOT_FOUND, f"unknown session {agent_session}"
                    )
                )
                return
        if record is not None:
            record.heard = time.monotonic()  # a question is not silence
            self._record_question(record, method, params)
        request = ReverseRequest(message["id"], generation, record, method)
        editor_id = self.conn.ids.to_editor(request)
        forwarded = {**message, "id": editor_id}
        if isinstance(params, dict):
            rule = acp.METHODS.get(method)
            for path in rule.request_ids if rule else ():
                params = map_at(params, path, self.conn.ids.editor_request)
            if record is not None:
                params = {**params, "sessionId": record.id}
            forwarded["params"] = params
        if self.conn.debug:
            self.conn.log.debug(
                "-> %s id=%s%s", method, editor_id, f" session={record.id}" if record else ""
            )
        request.message = forwarded
        # A session's requests go to its controllers (one who attaches later is asked
        # then); anything else to every client that may act.
        if record is not None:
            asked = record.controllers()
        else:
            asked = [client for client in self.conn.clients if client.may_control]
        # Only to the clients that declared what answering it needs (an elicitation's mode).
        capable = [client for client in asked if client.can_answer(method, params)]
        if not capable and (record is None or (method in acp.QUESTIONS and not self.conn.shared)):
            # No one can answer it, and no one else can come: the session host's sessions
            # wait for a client that can, as they wait for a controller.
            why = "no client is connected" if not asked else _none_can(method, params)
            self._unanswerable(record, message["id"], editor_id, method, why)
            return
        request.ask(capable)
        if record is not None and method in acp.QUESTIONS:
            if self.conn.on_question is not None:
                self.conn.on_question(editor_id)
            self.conn.waiting_changed()

    def _unanswerable(
        self, record: SessionRecord | None, agent_id: Any, editor_id: int, method: str, why: str
    ) -> None:
        """The agent's request that no client can answer: its error now, recorded."""
        self.conn.ids.settle(editor_id, {})
        self.conn.backend.send(jsonrpc.error(agent_id, acp.INTERNAL_ERROR, why))
        if record is not None and method == acp.ELICITATION_CREATE:
            refused = jsonrpc.error(None, acp.INTERNAL_ERROR, why)
            self.conn.recorder.elicitation_outcome(record, refused, None)

    def _record_question(self, record: SessionRecord, method: str, params: Any) -> None:
        """A question for a person (a permission, an elicitation) goes in the history."""
        if method == acp.REQUEST_PERMISSION and isinstance(params, dict):
            self.conn.recorder.permission(record, params)
        elif method == acp.ELICITATION_CREATE and isinstance(params, dict):
            self.conn.recorder.elicitation(record, params)

    async def on_agent_batch_end(self) -> None:
        self.conn.recorder.batch_end()
        await self.conn.drain()

    def on_agent_exit(self, description: str, generation: int) -> None:
        # Requests the dead agent asked the clients are void; tell them.
        void = jsonrpc.error(None, acp.INTERNAL_ERROR, description)
        for editor_id in self.conn.ids.waiting(lambda request: request.generation == generation):
            request = self.conn.ids.settle(editor_id, void)
            if request is not None:
                request.withdraw(editor_id)
                if request.method in acp.QUESTIONS:
                    self.conn.waiting_changed()
        self.conn.log.warning("%s; it will be restarted on the next request", description)
        self.conn.update_run_record()


def _none_can(method: str, params: Any) -> str:
    mode = params.get("mode", "form") if isinstance(params, dict) else "form"
    return (
        f"no client of this session can answer {method} ({mode}): none declared it in "
        "clientCapabilities.elicitation"
    )


def _renamed(line: bytes, agent_id: str, editor_id: str) -> bytes | None:
    """The agent's line with its session id replaced by the editor's (the agent's id was
    taken in the store), as text, without encoding the message again: when the params'
    first member is the id, written compactly (as the SDKs write them), where the text
    alone makes it certain (protocol.params_opened); else None."""
    start = acp.params_opened(line)
    agent = b'"sessionId":' + encode_text(agent_id).encode()
    if start < 0 or not line.startswith(agent, start):
        return None
    return (
        line[:start]
        + b'"sessionId":'
        + encode_text(editor_id).encode()
        + line[start + len(agent) :]
    )
