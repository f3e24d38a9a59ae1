"""A remote agent's sessions, recorded on this machine as `run --acp` records a local
agent's: what the link relays (remote/link.py) is written to the store here, so that
`sessions list/show/search`, `usage`, `run --continue` and `run --session` see them. The
remote host keeps its own copy, which is the one `session/list` through the link serves.

Recorded: a session when the remote answers its session/new (or a load, resume or fork of
one this machine has not recorded: from then on); the user's prompt; the agent's updates as
their bytes, except a replay the editor asked for (a load: history this machine has, or has
not, but did not see live); the turn's end; the agent's permission requests and questions
(elicitations) and how the editor answered them. A link to a host that records in this
machine's own store (its initialize says which) records nothing: the host's copy is this
one."""

from __future__ import annotations

import logging
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.runner.recorder import Recorder
from acpctl.runner.session import SessionRecord
from acpctl.store.lines import CorruptSession
from acpctl.store.sessions import SessionStore, valid_session_id

OPENING = frozenset({acp.SESSION_NEW, acp.SESSION_LOAD, acp.SESSION_RESUME, acp.SESSION_FORK})


class RemoteHistory:
    def __init__(self, store: SessionStore, agent: str, address: str, log: logging.Logger):
        self.recorder = Recorder(store, agent, ["remote", address], log)
        self.store = store
        self.log = log
        self.records: dict[str, SessionRecord] = {}
        self.loading: set[str] = set()  # sessions whose load's replay is under way
        self.prompts: dict[Any, str] = {}  # the editor's prompt request id -> its session
        # A question's id (the editor's) -> its method and session: a permission's or an
        # elicitation's, whose answer is recorded.
        self.asked: dict[Any, tuple[str, str]] = {}
        self.recording = True  # False: the remote host records in this very store
        self.editor: JsonObject = {"name": "editor"}  # who answers, as its initialize says

    # -- from the editor ------------------------------------------------------------

    def request(self, message: JsonObject) -> None:
        """A request of the editor's, as the link sends it on."""
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        method, session = message.get("method"), params.get("sessionId")
        info = params.get("clientInfo")
        if (
            method == acp.INITIALIZE
            and isinstance(info, dict)
            and isinstance(info.get("name"), str)
        ):
            self.editor = {"name": info["name"]}
        if method == acp.SESSION_LOAD and isinstance(session, str):
            self.loading.add(session)
        elif method == acp.SESSION_PROMPT and session in self.records:
            record = self.records[str(session)]
            prompt = params.get("prompt")
            self.recorder.prompt(record, prompt if isinstance(prompt, list) else [])
            self.prompts[jsonrpc.id_key(message["id"])] = record.id

    def answered_agent(self, answer: JsonObject) -> None:
        """The editor's answer to a request of the agent's (a permission, a question)."""
        with_key = jsonrpc.id_key(answer.get("id")) if jsonrpc.is_id(answer.get("id")) else None
        method, session = self.asked.pop(with_key, (None, None))
        if session not in self.records:
            return
        record = self.records[str(session)]
        if method == acp.REQUEST_PERMISSION:
            self.recorder.permission_outcome(record, answer, self.editor)
        else:
            self.recorder.elicitation_outcome(record, answer, self.editor)
        self.recorder.batch_end()

    # -- from the remote --------------------------------------------------------------

    def answer(self, request: JsonObject, answer: JsonObject) -> None:
        """The remote's answer to a request of the editor's."""
        method = request.get("method")
        params = request.get("params")
        params = params if isinstance(params, dict) else {}
        result = answer.get("result")
        if method == acp.INITIALIZE and isinstance(result, dict):
            meta = result.get("_meta")
            theirs = meta.get(acp.HOST_STORE_META) if isinstance(meta, dict) else None
            if theirs is not None and theirs == self.store.identity():
                self.log.info("the remote host records in this machine's store: not twice")
                self.recording = False
        if not self.recording:
            return
        if method in OPENING:
            session = result.get("sessionId") if isinstance(result, dict) else None
            session = session if isinstance(session, str) else params.get("sessionId")
            self.loading.discard(str(session))
            if isinstance(result, dict) and isinstance(session, str):
                self._opened(session, params)
        elif method == acp.SESSION_PROMPT:
            session = self.prompts.pop(jsonrpc.id_key(request["id"]), None)
            if session in self.records:
                self.recorder.turn_end(self.records[str(session)], answer)
        elif method == acp.SESSION_CLOSE:
            record = self.records.pop(str(params.get("sessionId")), None)
            if record is not None:
                self.recorder.close(record)

    def update(self, message: JsonObject, raw: bytes) -> None:
        """A notification of the agent's, as the editor gets it."""
        params = message.get("params")
        session = params.get("sessionId") if isinstance(params, dict) else None
        if message.get("method") != acp.SESSION_UPDATE or session in self.loading:
            return
        record = self.records.get(str(session))
        if record is not None:
            self.recorder.agent_update(record, raw)
            self.recorder.batch_end()

    def asking(self, message: JsonObject) -> None:
        """A request of the agent's, as the editor is asked it (its id the editor's)."""
        params = message.get("params")
        session = params.get("sessionId") if isinstance(params, dict) else None
        method = message.get("method")
        if method in acp.QUESTIONS and session in self.records and isinstance(params, dict):
            if method == acp.REQUEST_PERMISSION:
                self.recorder.permission(self.records[str(session)], params)
            else:
                self.recorder.elicitation(self.records[str(session)], params)
            self.asked[jsonrpc.id_key(message["id"])] = (str(method), str(session))

    async def close(self) -> None:
        for record in list(self.records.values()):
            self.recorder.close(record)
        self.records.clear()
        await self.recorder.committed()

    def _opened(self, session: str, params: JsonObject) -> None:
        if session in self.records or not valid_session_id(session):
            return
        try:
            if self.store.exists(session):
                meta, writer = self.recorder.reopen(session)
            else:
                cwd = params.get("cwd")
                extra = params.get("additionalDirectories")
                meta, writer = self.recorder.create(
                    session,
                    session,
                    cwd if isinstance(cwd, str) else "/",
                    [d for d in extra if isinstance(d, str)] if isinstance(extra, list) else [],
                )
        except (OSError, CorruptSession) as exc:
            self.log.warning("the remote session %s is not recorded here: %s", session, exc)
            return
        self.records[session] = SessionRecord(meta=meta, writer=writer)
