"""Request ids across acpctl, both ways.

Editor → agent: a forwarded request gets the backend's id on the agent hop; the editor's id
is kept here (by its key, unique among the connection's clients) so that the editor's
`$/cancel_request` can name the agent's id, and the agent's messages that name the request
(a request-scoped elicitation) the editor's.
Agent → editor: a request from the agent (a permission, fs, terminal...) gets an id of
acpctl's own on the editor hop, from a pending table; the editor's answer goes back under
the agent's id, and the agent's `$/cancel_request` is translated to the editor's id.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from acpctl import jsonrpc
from acpctl.jsonrpc import JsonObject
from acpctl.jsonrpc.pending import PendingRequests
from acpctl.runner.clients import Client, RequestKey, cancel_request, tell


@dataclass
class ReverseRequest:
    """A request from the agent, forwarded to the editor under acpctl's id."""

    agent_id: Any
    generation: int  # the agent process that asked; its answer is void once it died
    session: Any  # the SessionRecord it belongs to, or None
    method: str
    message: JsonObject = field(default_factory=dict)  # as the clients get it
    # The clients asked (a controller that attaches later is asked too); the first to
    # answer settles it.
    asked: list[Client] = field(default_factory=list)
    asked_at: float = field(default_factory=time.time)  # when the agent asked (epoch)
    # What each client that failed it answered (an error, a malformed answer): it stays
    # open while another client asked may still answer.
    failed: list[str] = field(default_factory=list)

    def ask(self, clients: list[Client]) -> None:
        """Send the request to those of `clients` not asked yet."""
        line = jsonrpc.encode(self.message)
        for client in clients:
            if client not in self.asked:
                self.asked.append(client)
                client.channel.write(line)

    def withdraw(self, editor_id: Any, clients: list[Client] | None = None) -> None:
        """Tell the clients asked (or `clients` of them) that the request is settled."""
        tell(self.asked if clients is None else clients, cancel_request(editor_id))


class IdMap:
    def __init__(self) -> None:
        self._upstream: dict[RequestKey, asyncio.Future[JsonObject]] = {}
        self._reverse: PendingRequests[int] = PendingRequests(itertools.count(1))
        self._editor_id_of: dict[tuple[bool, Any], int] = {}
        self._forwarded_as: dict[tuple[bool, Any], Any] = {}  # agent-hop id -> editor's

    # -- editor → agent -------------------------------------------------------------

    def forwarded(
        self,
        key: RequestKey,
        editor_id: Any,
        upstream: asyncio.Future[JsonObject],
        agent_id: Any,
    ) -> None:
        """`upstream` (`agent_id` on the agent's hop) answers the editor's request
        `editor_id` (`key` among the connection's), until it is done."""
        self._upstream[key] = upstream
        agent_key = jsonrpc.id_key(agent_id) if agent_id is not None else None
        if agent_key is not None:
            self._forwarded_as[agent_key] = editor_id

        def forget(_: asyncio.Future[JsonObject]) -> None:
            if self._upstream.get(key) is upstream:
                del self._upstream[key]
            if agent_key is not None:
                self._forwarded_as.pop(agent_key, None)

        upstream.add_done_callback(forget)

    def editor_request(self, agent_id: Any) -> Any:
        """The editor's id of the request the agent knows as `agent_id` (unchanged when
        acpctl forwarded no such request)."""
        try:
            return self._forwarded_as.get(jsonrpc.id_key(agent_id), agent_id)
        except TypeError:
            return agent_id

    def upstream(self, client: Client, editor_id: Any) -> asyncio.Future[JsonObject] | None:
        try:
            return self._upstream.get(client.key(editor_id))
        except TypeError:  # an unhashable id in a $/cancel_request
            return None

    # -- agent → editor -------------------------------------------------------------

    def to_editor(self, request: ReverseRequest) -> int:
        """The editor-hop id for the agent's request."""
        editor_id, _ = self._reverse.register(request.method, context=request)
        self._editor_id_of[jsonrpc.id_key(request.agent_id)] = editor_id
        return editor_id

    def editor_id(self, agent_id: Any) -> int | None:
        try:
            return self._editor_id_of.get(jsonrpc.id_key(agent_id))
        except TypeError:
            return None

    def pending(self, editor_id: Any) -> ReverseRequest | None:
        """The request `editor_id` names while it waits for an answer."""
        entry = self._reverse.get(editor_id)
        return entry.context if entry is not None else None

    def settle(self, editor_id: Any, response: JsonObject) -> ReverseRequest | None:
        """The editor answered (or acpctl settled) `editor_id`: the request it answers, no
        longer pending; None when no such request waits."""
        entry = self._reverse.resolve(editor_id, response)
        if entry is None:
            return None
        request: ReverseRequest = entry.context
        self._editor_id_of.pop(jsonrpc.id_key(request.agent_id), None)
        return request

    def waiting(self, wanted: Callable[[ReverseRequest], bool]) -> list[int]:
        """Editor-hop ids of the requests still waiting for the editor that `wanted` picks
        (those of a dead agent process, the permission dialogs of a session), oldest first."""
        return [editor_id for editor_id, entry in self._reverse.items() if wanted(entry.context)]


def map_at(value: Any, path: str, convert: Callable[[Any], Any]) -> Any:
    """`value` with what sits at the dotted `path` converted (`[]` steps into each element
    of an array); the containers on the way are copied, the original is left as it was."""
    head, _, rest = path.partition(".")
    key = head.removesuffix("[]")
    if not isinstance(value, dict) or key not in value:
        return value
    inner = value[key]
    if head.endswith("[]"):
        if not isinstance(inner, list):
            return value
        mapped: Any = [map_at(item, rest, convert) if rest else convert(item) for item in inner]
    else:
        mapped = map_at(inner, rest, convert) if rest else convert(inner)
    return {**value, key: mapped}
