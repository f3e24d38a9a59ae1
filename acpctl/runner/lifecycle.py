"""The lifecycle of the sessions on one connection: session/new and session/fork (registered
before the agent's next message is routed), load and resume (of acpctl's own history, or of
a session only the agent knows), list (both, merged), close and delete; and which clients
see each session: the one that opened it, and on the session host those that joined it
(load, resume or session/attach of a session open at the agent) until they detach or go.

A connection serves one agent: it lists and opens that agent's sessions only."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, ResponseHook, RpcError
from acpctl.runner import served
from acpctl.runner.attach import Attacher, beyond_state, with_note
from acpctl.runner.clients import Client, attach_role, checked_client_id, tell
from acpctl.runner.context import Connection
from acpctl.runner.directories import attach_params, session_directories
from acpctl.runner.questions import Questions
from acpctl.runner.session import (
    SessionRecord,
    client_session_id,
    fresh_session_id,
    not_found,
    wire_session_id,
)
from acpctl.store.lines import CorruptSession
from acpctl.store.sessions import SessionMeta, utc_stamp, valid_session_id
from acpctl.store.writer import HistoryWriter

# Opens the history of a new session: (editor's id, agent's id) -> (metadata, writer).
OpenHistory = Callable[[str, str], tuple[SessionMeta, HistoryWriter]]
# The agent's own session/list: how many pages acpctl reads, and how long it waits.
HISTORY_POLICIES = ("full", "pending_only", "none", "after_message")  # session/attach's


class SessionLifecycle:
    def __init__(
        self,
        conn: Connection,
        attacher: Attacher,
        end_turns: Callable[[SessionRecord], Awaitable[None]],
        questions: Questions,
    ) -> None:
        self.conn = conn
        self.attacher = attacher
        self.end_turns = end_turns
        self.questions = questions
        # While the agent forks, what it says about a session no one has yet (the fork's,
        # whose id its answer will name: opencode replays the history there first) is held,
        # and routed once the answer has registered the session (runner/server.py).
        self.forking = 0
        self.unclaimed: dict[str, list[tuple[JsonObject, bytes]]] = {}
        self.route_held: Callable[[JsonObject, bytes], None] | None = None

    # == new sessions ==================================================================

    async def new(self, client: Client, params: JsonObject) -> JsonObject:
        cwd, directories = self._directories(params)
        await self.conn.ensure_agent()
        opened: list[SessionRecord] = []
        register = self._registering(
            client,
            params,
            lambda client_id, agent_id: self.conn.recorder.create(
                client_id, agent_id, cwd, directories
            ),
            opened,
        )
        try:
            return await self.conn.backend.call(acp.SESSION_NEW, params, register)
        finally:
            self._announce(opened)

    async def fork(self, client: Client, params: JsonObject) -> JsonObject:
        """The agent's fork when it has one; else acpctl's: the history copied, and a fresh
        agent session (with the context-lost note) behind it."""
        cwd, directories = self._directories(params)
        parent = await self._open(params)
        await self.conn.ensure_agent()
        if not self._agent_can("fork"):
            meta, writer = self.conn.recorder.fork(
                parent, fresh_session_id(), None, cwd, directories
            )
            record = SessionRecord(meta=meta, writer=writer, attach_params=attach_params(params))
            record.unannounced = []  # the fork is new to the editor too
            record.clients[client] = acp.CONTROLLER
            self.conn.sessions.add(record)
            try:
                async with record.lock:
                    result, note = await self.attacher.attach(record)
                return jsonrpc.result(None, {"sessionId": record.id, **with_note(result, note)})
            finally:
                self._announce([record])
        opened: list[SessionRecord] = []
        register = self._registering(
            client,
            params,
            lambda client_id, agent_id: self.conn.recorder.fork(
                parent, client_id, agent_id, cwd, directories
            ),
            opened,
        )
        self.forking += 1
        try:
            async with parent.lock:
                await self.attacher.attach(parent)
                future = self.conn.backend.call(acp.SESSION_FORK, parent.to_agent(params), register)
            return await future
        finally:
            self.forking -= 1
            if not self.forking:
                self.unclaimed.clear()  # no answer named them: nobody's
            self._announce(opened)

    def _registering(
        self,
        client: Client,
        params: JsonObject,
        open_history: OpenHistory,
        opened: list[SessionRecord],
    ) -> ResponseHook:
        """The hook that registers the session a session/new or fork answer names (and adds
        it to `opened`). It runs in the agent's read loop, before the agent's next message
        is routed, so updates sent right after the answer already find their session."""
        reopen_with = attach_params(params)

        def register(response: JsonObject) -> None:
            result = response.get("result")
            if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
                return
            agent_id = result["sessionId"]
            client_id = self._client_id(agent_id)
            meta, writer = open_history(client_id, agent_id)
            record = SessionRecord(meta=meta, writer=writer, attach_params=reopen_with)
            # Updates the agent sends right behind its answer (claude-agent-acp's commands)
            # are routed before the answer reaches the editor: held until it has.
            record.unannounced = []
            record.clients[client] = acp.CONTROLLER
            self._add(record, result)
            opened.append(record)
            for message, raw in self.unclaimed.pop(agent_id, []):
                assert self.route_held is not None
                self.route_held(message, raw)  # held with the session's other news
            if client_id != agent_id:
                response["result"] = {**result, "sessionId": client_id}

        return register

    def _announce(self, opened: list[SessionRecord]) -> None:
        """Called as the answer naming these new sessions is returned (it is written in this
        turn of the event loop): what the agent said about them meanwhile is relayed in the
        next. Also when the request failed or was cancelled, so nothing stays held."""
        loop = asyncio.get_running_loop()
        for record in opened:
            loop.call_soon(record.announced)

    def _client_id(self, agent_id: str) -> str:
        return client_session_id(agent_id, self.conn.store.exists, self.conn.sessions.get)

    def subagent(self, parent: SessionRecord, update: JsonObject) -> None:
        """A subagent_update of `parent`'s: the child it announces is a session of its own
        from now on (its updates and requests relayed under an id the clients know, its
        history kept, linked to the parent's), seen by the parent's clients. A child known
        already only takes the new title."""
        agent_id = update.get("sessionId")
        if not isinstance(agent_id, str):
            return
        known = self.conn.sessions.of_agent(agent_id)
        title = update.get("title")
        if known is not None:
            if isinstance(title, str):
                known.meta.title = title
            return
        cwd = update.get("cwd")
        cwd = cwd if isinstance(cwd, str) and cwd else parent.meta.cwd
        meta, writer = self.conn.recorder.subagent(
            parent,
            self._client_id(agent_id),
            agent_id,
            cwd,
            title if isinstance(title, str) else None,
        )
        child = SessionRecord(meta=meta, writer=writer, attach_params=dict(parent.attach_params))
        child.clients = dict(parent.clients)
        self._add(child, {})

    def _add(self, record: SessionRecord, result: JsonObject) -> None:
        record.generation = self.conn.backend.generation
        record.state.absorb(result)
        record.carried = beyond_state(result)
        self.conn.sessions.add(record)

    # == reopening =====================================================================

    async def load(self, client: Client, params: JsonObject) -> JsonObject:
        return await self._reopen(client, params, replay=True)

    async def resume(self, client: Client, params: JsonObject) -> JsonObject:
        return await self._reopen(client, params, replay=False)

    async def _reopen(self, client: Client, params: JsonObject, replay: bool) -> JsonObject:
        """Load or resume: a session open at the agent is joined (the session host's
        clients share it), one in the store is opened; a session only the agent knows is
        adopted."""
        session_id = wire_session_id(params.get("sessionId"))
        if isinstance(params.get("cwd"), str) or "additionalDirectories" in params:
            self._directories(params)
        live = self.conn.sessions.get(session_id)
        if live is None and not self.conn.store.exists(session_id):
            return await self._adopt(client, session_id, params, replay)
        wanted = self._wanted(client, params) if replay else None
        record, _, replayed = await self._join(client, params, acp.CONTROLLER, wanted)
        async with record.lock:
            result, note = await self.attacher.attach(record)
        if live is not None and not replay and record.commands is not None:
            # The agent said its commands once, when the session began: a client resuming
            # it now gets them again, right behind the answer (written in this turn).
            line = served.update_line(record.id, record.commands)
            asyncio.get_running_loop().call_soon(client.channel.write, line)
        return jsonrpc.result(None, served.with_replayed(with_note(result, note), replayed))

    async def attach(self, client: Client, params: JsonObject) -> JsonObject:
        """session/attach (the multi-client proposal): the session, open or stored, joined
        as a controller or an observer, its history replayed as `historyPolicy` asks
        (as session/update notifications, the way load replays; `after_message`: only
        what follows `afterMessageId`; a controller is also asked the questions still
        open). `clientId`, the client's own name for itself, is echoed wherever it is
        named (Client.label)."""
        policy = params.get("historyPolicy", "full")
        if policy not in HISTORY_POLICIES:
            raise RpcError(
                acp.INVALID_PARAMS, f"historyPolicy must be one of {', '.join(HISTORY_POLICIES)}"
            )
        wanted = None
        if policy == "after_message":
            after = params.get("afterMessageId")
            if not isinstance(after, str):
                raise RpcError(acp.INVALID_PARAMS, "after_message takes afterMessageId, a string")
            session_id = wire_session_id(params.get("sessionId"))
            skip = 0  # a session neither open nor stored: _join says it is not found
            if self.conn.sessions.get(session_id) is not None or self.conn.store.exists(session_id):
                self.conn.recorder.batch_end()  # a live session's newest updates too
                skip = served.through_message(
                    self.conn.store, session_id, after, client.wants_recorded
                )
            wanted = served.Wanted(answers=client.wants_recorded, skip=skip)
        elif policy == "full":
            wanted = self._wanted(client, params)
        info = params.get("clientInfo")
        if isinstance(info, dict):
            client.info = info
        client_id = params.get("clientId", client.info.get("clientId"))
        if client_id is not None:
            client.client_id = checked_client_id(client_id)
        client.knows_attach = True
        role = attach_role(client, params.get("role"))
        record, others, replayed = await self._join(client, params, role, wanted)
        async with record.lock:
            result, note = await self.attacher.attach(record)
        answer = {
            **with_note(result, note),
            "sessionId": record.id,
            "role": role,
            "connectedClients": others,
        }
        return jsonrpc.result(None, served.with_replayed(answer, replayed))

    @staticmethod
    def _wanted(client: Client, params: JsonObject) -> served.Wanted:
        """The whole history, as the client asked for it."""
        return served.Wanted(served.wants_recorded(params), client.wants_recorded)

    async def _join(
        self, client: Client, params: JsonObject, role: str, wanted: served.Wanted | None
    ) -> tuple[SessionRecord, list[JsonObject], int | None]:
        """`client` sees the session from now on (after the replay `wanted`, if any), in
        `role`; the other clients that see it; how many stored updates the replay covered,
        for acpctl's link (Client.link), which asks."""
        live = self.conn.sessions.get(params.get("sessionId"))
        record = await self._open(params)
        if live is None or not live.clients:
            record.attach_params = attach_params({"cwd": record.meta.cwd, **params})
        await self.conn.ensure_agent()
        replayed = None
        if wanted is not None:
            store, out = self.conn.store, client.channel
            if live is None:
                replayed = await served.replay(store, record.id, out, wanted)
            else:
                # The session is live: its history up to now goes out in this turn of the
                # event loop, so that no update falls between the replay and the live ones.
                self.conn.recorder.batch_end()
                replayed = served.replay_now(store, record.id, out, wanted)
        others = [c.label(r) for c, r in record.clients.items() if c is not client]
        record.clients[client] = role
        if role == acp.CONTROLLER:
            self.questions.ask_joiner(record, client)
        return record, others, replayed if client.link else None

    async def detach(self, client: Client, params: JsonObject) -> JsonObject:
        session_id = params.get("sessionId")
        record = self.conn.sessions.get(session_id)
        if record is None or not record.sees(client):
            raise not_found(session_id)
        self._leave(record, client)
        return jsonrpc.result(None, {"sessionId": record.id, "status": "detached"})

    def left(self, client: Client) -> None:
        """`client` is gone: it leaves every session it saw, which go on."""
        for record in self.conn.sessions:
            if record.sees(client):
                self._leave(record, client)

    def _leave(self, record: SessionRecord, client: Client) -> None:
        """The session goes on without `client`; the clients still there that attached are
        told. The permission requests it was asked wait for another controller."""
        role = record.clients.pop(client)
        self.questions.forget_asked(record, client)
        update: JsonObject = {
            "sessionUpdate": acp.CLIENT_DISCONNECTED,
            "client": client.label(role),
            "timestamp": utc_stamp(),
        }
        tell(
            [other for other in record.clients if other.knows_attach],
            jsonrpc.notification(acp.SESSION_UPDATE, {"sessionId": record.id, "update": update}),
        )

    async def _open(self, params: JsonObject) -> SessionRecord:
        """The session `params` names: open on this connection, or opened from the store
        (not yet attached to the agent)."""
        session_id = params.get("sessionId")
        record = self.conn.sessions.get(session_id)
        if record is not None:
            return record
        if not isinstance(session_id, str) or not self.conn.store.exists(session_id):
            raise not_found(session_id)
        try:
            meta, writer = self.conn.recorder.reopen(session_id)
        except (CorruptSession, OSError) as exc:
            raise RpcError(
                acp.INTERNAL_ERROR, f"session {session_id} cannot be opened: {exc}"
            ) from exc
        if meta.agent != self.conn.recorder.agent_name:
            writer.close()
            raise RpcError(
                acp.RESOURCE_NOT_FOUND,
                f"session {session_id} belongs to agent {meta.agent!r}; open it through "
                f"that agent's entry (acpctl run --acp --agent {meta.agent})",
                {"sessionId": session_id},
            )
        record = SessionRecord(meta=meta, writer=writer)
        self.conn.sessions.add(record)
        return record

    async def _adopt(
        self, client: Client, session_id: str, params: JsonObject, replay: bool
    ) -> JsonObject:
        """A session acpctl has no history of, that the agent may know (made before acpctl
        was installed, or in another client): loaded or resumed through the agent, its
        replay relayed and recorded, and recorded from then on."""
        await self.conn.ensure_agent()
        if not self._agent_can("load" if replay else "resume"):
            raise not_found(session_id)
        cwd, directories = self._directories(params)
        meta, writer = self.conn.recorder.create(session_id, session_id, cwd, directories)
        record = SessionRecord(meta=meta, writer=writer, attach_params=attach_params(params))
        record.clients[client] = acp.CONTROLLER
        self.conn.sessions.add(record)
        response = await self.conn.backend.call(
            acp.SESSION_LOAD if replay else acp.SESSION_RESUME, params
        )
        if "result" not in response:
            self.forget(record)
            self.conn.store.delete(session_id)
            return response
        self._add(record, response["result"])
        self.conn.recorder.save(record)
        return response

    # == closing =======================================================================

    async def close(self, client: Client, params: JsonObject) -> JsonObject:
        """Ends the session; on the session host, while other clients see it (or for an
        observer), only this client's part in it."""
        session_id = params.get("sessionId")
        record = self.conn.sessions.get(session_id)
        if record is None or not record.sees(client):
            if isinstance(session_id, str) and self.conn.store.exists(session_id):
                return jsonrpc.result(None, {})
            raise not_found(session_id)
        if len(record.clients) > 1 or record.clients[client] != acp.CONTROLLER:
            self._leave(record, client)
            return jsonrpc.result(None, {})
        await self.end_turns(record)
        answer = await self._agent_session_call(record, "close", acp.SESSION_CLOSE, params)
        self.forget(record)
        return jsonrpc.result(None, answer)

    async def delete(self, params: JsonObject) -> JsonObject:
        session_id = params.get("sessionId")
        if not isinstance(session_id, str) or not valid_session_id(session_id):
            return jsonrpc.result(None, {})  # unknown sessions: succeed silently (ACP)
        record = self.conn.sessions.get(session_id)
        result: JsonObject = {}
        if record is not None:
            await self.end_turns(record)
            result = await self._agent_session_call(record, "delete", acp.SESSION_DELETE, params)
            self.forget(record)
        self.conn.store.delete(session_id)
        return jsonrpc.result(None, result)  # the agent's, as close returns it

    def forget(self, record: SessionRecord) -> None:
        self.conn.sessions.remove(record)
        self.conn.recorder.close(record)

    def _directories(self, params: JsonObject) -> tuple[str, list[str]]:
        return session_directories(params, self.conn.sandbox)

    def _agent_can(self, capability: str) -> bool:
        return self.conn.handshake.agent_can(capability)

    async def _agent_session_call(
        self, record: SessionRecord, capability: str, method: str, params: JsonObject
    ) -> JsonObject:
        """close/delete on the agent's side too, when it is attached and supports it, with
        the client's params (its `_meta` too); the agent's result, or {} when it was not
        asked or failed (acpctl's own close or delete stands then)."""
        if (
            record.generation == self.conn.backend.generation
            and self.conn.backend.alive
            and self._agent_can(capability)
        ):
            response = await self.conn.backend.call(method, record.to_agent(params))
            if "error" in response:
                self.conn.log.info(
                    "agent %s of session %s failed: %s", method, record.id, response["error"]
                )
            elif isinstance(response.get("result"), dict):
                return dict(response["result"])
        return {}
