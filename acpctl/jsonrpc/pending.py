"""The requests a peer has sent and not yet seen answered: id → future, in one table.

Every connection acpctl holds (to the agent, to pi, to a child `run --acp`, the editor's
side of the agent's own requests) sends requests through one of these, so each decides the
same way what happens to an answer, to an unknown id, and to everything in flight when the
other side dies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from acpctl.jsonrpc.messages import JsonObject, ResponseHook

IdT = TypeVar("IdT", bound=Hashable)


@dataclass
class Pending:
    future: asyncio.Future[JsonObject]
    method: str
    on_response: ResponseHook | None
    context: Any  # what the sender needs back with the answer (e.g. who asked)


class PendingRequests(Generic[IdT]):
    def __init__(self, ids: Iterator[IdT]) -> None:
        self._ids = ids
        self._by_id: dict[IdT, Pending] = {}
        self._by_future: dict[asyncio.Future[JsonObject], IdT] = {}

    def register(
        self, method: str, on_response: ResponseHook | None = None, context: Any = None
    ) -> tuple[IdT, asyncio.Future[JsonObject]]:
        """A fresh id and the future its response will resolve.

        `on_response` runs when the response is resolved, before the future's callbacks and
        before the reader routes the peer's next message (session/new relies on this)."""
        msg_id = next(self._ids)
        future: asyncio.Future[JsonObject] = asyncio.get_running_loop().create_future()
        self._by_id[msg_id] = Pending(future, method, on_response, context)
        self._by_future[future] = msg_id
        return msg_id, future

    def resolve(self, msg_id: Any, response: JsonObject) -> Pending | None:
        """Settle the request `msg_id` with `response`; None when no such request waits."""
        try:
            entry = self._by_id.pop(msg_id)
        except (KeyError, TypeError):  # TypeError: an unhashable id from a broken peer
            return None
        del self._by_future[entry.future]
        try:
            if entry.on_response is not None:
                entry.on_response(response)
        finally:  # whatever the hook does, the request is answered
            if not entry.future.done():
                entry.future.set_result(response)
        return entry

    def get(self, msg_id: Any) -> Pending | None:
        """The request `msg_id` while it waits (None when none does)."""
        try:
            return self._by_id.get(msg_id)
        except TypeError:
            return None

    def id_of(self, future: asyncio.Future[JsonObject]) -> IdT | None:
        return self._by_future.get(future)

    def items(self) -> list[tuple[IdT, Pending]]:
        return list(self._by_id.items())

    def settle(self, method: str, response: JsonObject) -> None:
        """Resolve every pending request of `method` with `response` (at shutdown)."""
        for msg_id, entry in self.items():
            if entry.method == method:
                self.resolve(msg_id, response)

    def fail_all(self, response_for: Callable[[Pending], JsonObject]) -> None:
        """The peer is gone: every request still waiting gets the response made for it."""
        for msg_id, entry in self.items():
            self.resolve(msg_id, response_for(entry))

    def __len__(self) -> int:
        return len(self._by_id)
