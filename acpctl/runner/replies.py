"""A client's request answered from the agent's read loop, as the agent's response line is
read: the answer is written to the client before anything the agent wrote after it (an
update right behind a result, as codex-acp sends after set_mode), so the client gets them
in the agent's order. Answering from the request's task instead would let the read loop
relay the next lines first: a task runs only once the loop gets to it.

Used for the requests whose answer is the agent's own (relayed ones, prompts, settings);
not in a batch, whose answers go out together as one array."""

from __future__ import annotations

from typing import Any

from acpctl.jsonrpc import JsonObject, ResponseHook
from acpctl.runner.clients import Client
from acpctl.runner.incidents import Incidents


class ReadLoopReply:
    def __init__(self, client: Client, msg_id: Any, method: str, incidents: Incidents) -> None:
        self.client = client
        self.msg_id = msg_id
        self.method = method
        self.incidents = incidents
        self.sent = False  # the client has its answer: its request's task sends nothing

    def hook(self, before: ResponseHook | None = None) -> ResponseHook:
        """The response hook that answers the client; `before`: what must be done with
        the response before the client sees it (a turn's end recorded, a setting kept)."""

        def answer(response: JsonObject) -> None:
            if self.sent:  # answered already, for an agent that did not (turns.py)
                return
            if before is not None:
                before(response)
            if "error" in response:
                self.incidents.failed(self.method, response["error"])
            self.client.channel.send({**response, "jsonrpc": "2.0", "id": self.msg_id})
            self.sent = True

        return answer
