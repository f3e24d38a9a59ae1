"""What the link keeps of the messages in flight (remote/link_state.py): an editor's request
not answered yet, and a request of the host's as the editor holds it (numbered by the link,
matched when a new connection asks it again)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, Protocol

from acpctl import protocol as acp


class History(Protocol):
    """What the link tells the history of this machine (runner/remote_history.py)."""

    def request(self, message: dict[str, Any]) -> None: ...
    def answered_agent(self, answer: dict[str, Any]) -> None: ...
    def answer(self, request: dict[str, Any], answer: dict[str, Any]) -> None: ...
    def update(self, message: dict[str, Any], raw: bytes) -> None: ...
    def asking(self, message: dict[str, Any]) -> None: ...


# Plain classes, not dataclasses: the thin client's start imports this module, and a
# dataclass costs a third of a millisecond to make.


class Waiting:
    """An editor's request not answered yet."""

    __slots__ = ("connection", "line", "message")

    def __init__(self, message: dict[str, Any], line: bytes) -> None:
        self.message = message
        self.line = line
        self.connection: int | None = None  # the logical connection it went out on; None: held


class Ask:
    """A request of the host's, as the editor holds it."""

    __slots__ = ("answer", "connection", "editor_id", "fingerprint", "host_id")

    def __init__(
        self, editor_id: int, host_id: Any, connection: int, fingerprint: tuple[Any, ...] | None
    ) -> None:
        self.editor_id = editor_id
        self.host_id = host_id
        self.connection = connection
        self.fingerprint = fingerprint
        self.answer: dict[str, Any] | None = None  # the editor's, until a transport takes it


def ask_fingerprint(message: dict[str, Any]) -> tuple[Any, ...] | None:
    """What identifies a permission request across connections: its session and tool
    call. Other requests of the host's are not asked again."""
    if message.get("method") != acp.REQUEST_PERMISSION:
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    tool = params.get("toolCall")
    tool_id = tool.get("toolCallId") if isinstance(tool, dict) else None
    return (params.get("sessionId"), tool_id)


def own_ids() -> Iterator[str]:
    """The ids of the link's own requests (a new connection's setup)."""
    return (f"acpctl-link-{n}" for n in itertools.count(1))


def unreadable(message: dict[str, Any]) -> bool:
    """An answer of the host's to a line it could not read (not one of the editor's ids)."""
    error = message.get("error")
    return isinstance(error, dict) and error.get("code") in (acp.PARSE_ERROR, acp.INVALID_REQUEST)
