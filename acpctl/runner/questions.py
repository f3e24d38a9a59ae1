"""The agent's questions for a person: a permission request and an elicitation (a form, or
a URL to open). A session's question is asked of every client that may act in the session
and declared what answering it needs (an elicitation's mode; one that joins later is asked
then); the first valid answer goes to the agent and is recorded with who gave it; the
others asked are withdrawn, and every other client of the session is told who answered
and how. An error, or an answer that is none, from one client settles nothing while
another asked may still answer; when every one asked has failed, the agent gets one error
that says so. A cancelled turn's open questions are answered cancelled for
the person, as ACP asks of a client. How a question is asked first is the agent side's
(from_agent.py); docs/relay.md, "The agent's questions"."""

from __future__ import annotations

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.runner.clients import Client, tell
from acpctl.runner.context import Connection
from acpctl.runner.session import SessionRecord

# A question the person did not answer because the turn was cancelled: ACP's answer.
CANCELLED_ANSWER: dict[str, JsonObject] = {
    acp.REQUEST_PERMISSION: {"outcome": {"outcome": acp.CANCELLED}},
    acp.ELICITATION_CREATE: {"action": "cancel"},
}


class Questions:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def answered(self, client: Client, message: JsonObject) -> None:
        """A client answered a request that came from the agent: the first valid answer
        from a client that was asked goes back; the others asked are told it is settled.
        A failed answer waits for the others asked; the last one failing sends the agent
        one error naming every failure."""
        request = self.conn.ids.pending(message.get("id"))
        if request is None or client not in request.asked:
            self.conn.log.debug("client answered unknown or settled request %r", message.get("id"))
            return
        by: Client | None = client
        failure = _failure(request.method, message)
        if failure is not None:
            request.asked.remove(client)
            record = request.session
            who = client.label(record.clients.get(client) if record is not None else None)
            request.failed.append(f"{who['name']}: {failure}")
            if request.asked:  # another may still answer: this settles nothing
                self.conn.log.info("%s failed %s; waiting for the others asked", who, failure)
                return
            by = None
            said = "; ".join(request.failed)
            message = jsonrpc.error(
                message.get("id"), acp.INTERNAL_ERROR, f"every client asked failed it ({said})"
            )
        self.conn.ids.settle(message.get("id"), message)
        record = request.session
        if record is not None:
            label = by.label(record.clients.get(by)) if by is not None else None
            if request.method == acp.REQUEST_PERMISSION:
                self.conn.recorder.permission_outcome(record, message, label)
                if by is not None:
                    self._tell_resolved(record, request.message, message, by)
            elif request.method == acp.ELICITATION_CREATE:
                self.conn.recorder.elicitation_outcome(record, message, label)
                if by is not None:
                    self._tell_answered(record, request.message, message, by)
        if request.generation == self.conn.backend.generation:  # else the agent that asked died
            self.conn.backend.send({**message, "id": request.agent_id})
        request.withdraw(message.get("id"), [c for c in request.asked if c is not client])
        if request.method in acp.QUESTIONS:
            self.conn.waiting_changed()

    def ask_joiner(self, record: SessionRecord, client: Client) -> None:
        """A controller joined the session (by attach, load or resume): the questions
        still open in it are asked of it too."""
        for editor_id in self.conn.ids.waiting(lambda request: request.session is record):
            request = self.conn.ids.pending(editor_id)
            if request is not None and client.can_answer(
                request.method, request.message.get("params")
            ):
                request.ask([client])

    def forget_asked(self, record: SessionRecord, client: Client) -> None:
        """`client` left the session: the questions it was asked wait for another."""
        for editor_id in self.conn.ids.waiting(lambda request: request.session is record):
            request = self.conn.ids.pending(editor_id)
            if request is not None and client in request.asked:
                request.asked.remove(client)

    def cancel_open(self, record: SessionRecord) -> None:
        """The session's turn was cancelled: its open questions are answered cancelled,
        recorded so (with no one's name), and withdrawn from the clients asked."""
        conn = self.conn
        open_questions = conn.ids.waiting(
            lambda request: request.session is record and request.method in acp.QUESTIONS
        )
        for editor_id in open_questions:
            request = conn.ids.pending(editor_id)
            if request is None:
                continue
            cancelled = jsonrpc.result(None, CANCELLED_ANSWER[request.method])
            conn.ids.settle(editor_id, cancelled)
            if request.method == acp.REQUEST_PERMISSION:
                conn.recorder.permission_outcome(record, cancelled, None)
            else:
                conn.recorder.elicitation_outcome(record, cancelled, None)
            if request.generation == conn.backend.generation:
                conn.backend.send({**cancelled, "id": request.agent_id})
            request.withdraw(editor_id)
            conn.waiting_changed()

    @staticmethod
    def _tell_resolved(
        record: SessionRecord, asked: JsonObject, answer: JsonObject, by: Client
    ) -> None:
        """The session's other clients learn who answered a permission, and how: those
        that attached by the attach proposal's permission_resolved update, the others
        (an ACP v1 client would refuse an update kind it does not know) by the extension
        notification PERMISSION_ANSWERED, which a client that does not know it ignores.
        The $/cancel_request of their copy closes their dialog."""
        params = asked.get("params")
        tool = params.get("toolCall") if isinstance(params, dict) else None
        result = answer.get("result")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        update: JsonObject = {
            "sessionUpdate": acp.PERMISSION_RESOLVED,
            "toolCallId": tool.get("toolCallId") if isinstance(tool, dict) else None,
            "chosenOptionId": outcome.get("optionId") if isinstance(outcome, dict) else None,
            "resolvedBy": by.label(record.clients.get(by)),
        }
        others = [client for client in record.clients if client is not by]
        tell(
            [client for client in others if client.knows_attach],
            jsonrpc.notification(acp.SESSION_UPDATE, {"sessionId": record.id, "update": update}),
        )
        told = {"sessionId": record.id, **{k: v for k, v in update.items() if k != "sessionUpdate"}}
        tell(
            [client for client in others if not client.knows_attach],
            jsonrpc.notification(acp.PERMISSION_ANSWERED, told),
        )

    @staticmethod
    def _tell_answered(
        record: SessionRecord, asked: JsonObject, answer: JsonObject, by: Client
    ) -> None:
        """The session's other clients learn who answered the agent's question, and how
        (ELICITATION_RESOLVED, an extension notification: a client that does not know it
        ignores it; the content of the answer stays with the agent and the history)."""
        params = asked.get("params")
        params = params if isinstance(params, dict) else {}
        result = answer.get("result")
        action = result.get("action") if isinstance(result, dict) else None
        told: JsonObject = {"sessionId": record.id}
        for key in ("elicitationId", "toolCallId"):
            if params.get(key) is not None:
                told[key] = params[key]
        told["action"] = action if isinstance(action, str) else "error"
        told["resolvedBy"] = by.label(record.clients.get(by))
        tell(
            [client for client in record.clients if client is not by],
            jsonrpc.notification(acp.ELICITATION_RESOLVED, told),
        )


def _failure(method: str, message: JsonObject) -> str | None:
    """Why a client's answer to the agent's question is none (an error, or a result that
    is not an answer), or None for a valid one, or for any answer to a request that is no
    question for a person (a file read: its error is the answer)."""
    if method not in acp.QUESTIONS:
        return None
    error = message.get("error")
    if error is not None:
        said = error.get("message") if isinstance(error, dict) else None
        return str(said or error)
    result = message.get("result")
    if not isinstance(result, dict):
        return "an answer that is no object"
    if method == acp.REQUEST_PERMISSION:
        outcome = result.get("outcome")
        outcome = outcome if isinstance(outcome, dict) else {}
        chose = outcome.get("outcome") == "selected" and isinstance(outcome.get("optionId"), str)
        if outcome.get("outcome") == acp.CANCELLED or chose:
            return None
        return "a permission answer with no outcome"
    if method == acp.ELICITATION_CREATE:
        if result.get("action") in ("accept", "decline", "cancel"):
            return None
        return "an elicitation answer with no action"
    return None
