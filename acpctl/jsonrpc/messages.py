"""JSON-RPC 2.0 messages: their types, constructors, the error codes and type, and encoding
(the line itself is jsontext.encode)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acpctl.jsontext import encode as encode  # a message's line: named here with the rest

JsonObject = dict[str, Any]
MessageId = int | str | None
# Run as a response is read, before the peer's next message is routed.
ResponseHook = Callable[[JsonObject], None]

# JSON-RPC 2.0's own error codes (ACP's are in acpctl.protocol).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RpcError(Exception):
    """An error to send back as a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> JsonObject:
        error: JsonObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def request(msg_id: MessageId, method: str, params: Any = None) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification(method: str, params: Any = None) -> JsonObject:
    message: JsonObject = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def result(msg_id: MessageId, value: Any) -> JsonObject:
    return {"jsonrpc": "2.0", "id": msg_id, "result": value}


def error(msg_id: MessageId, code: int, message: str, data: Any = None) -> JsonObject:
    return {"jsonrpc": "2.0", "id": msg_id, "error": RpcError(code, message, data).to_error()}


def error_response(msg_id: MessageId, exc: RpcError) -> JsonObject:
    return {"jsonrpc": "2.0", "id": msg_id, "error": exc.to_error()}


def unwrap(response: JsonObject) -> Any:
    """The result of a response, or its error raised as RpcError."""
    if "error" in response:
        err = response["error"] if isinstance(response["error"], dict) else {}
        code = err.get("code")
        raise RpcError(
            code if isinstance(code, int) else INTERNAL_ERROR,
            str(err.get("message", "error without a message")),
            err.get("data"),
        )
    return response.get("result")


def is_id(value: Any) -> bool:
    """What JSON-RPC allows as an id: a string, an integer or null (never a bool)."""
    return value is None or (isinstance(value, int | str) and not isinstance(value, bool))


def id_key(msg_id: MessageId) -> tuple[bool, MessageId]:
    """A dict key for an id that keeps 1 and "1" apart."""
    return (isinstance(msg_id, str), msg_id)
