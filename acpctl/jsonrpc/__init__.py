"""JSON-RPC 2.0 over stdio, kept free of ACP knowledge: messages, line framing with the one
read loop, the pending-request table, and the asyncio ends of a pipe."""

from acpctl.jsonrpc.framing import (
    MAX_LINE_BYTES,
    BadLine,
    Message,
    parse_line,
    read_lines,
    read_messages,
)
from acpctl.jsonrpc.messages import (
    JsonObject,
    MessageId,
    RpcError,
    encode,
    error,
    error_response,
    id_key,
    is_id,
    notification,
    request,
    result,
    unwrap,
)
from acpctl.jsonrpc.pending import Pending, PendingRequests, ResponseHook
from acpctl.jsonrpc.streams import Output, open_input

__all__ = [
    "MAX_LINE_BYTES",
    "BadLine",
    "JsonObject",
    "Message",
    "MessageId",
    "Output",
    "Pending",
    "PendingRequests",
    "ResponseHook",
    "RpcError",
    "encode",
    "error",
    "error_response",
    "id_key",
    "is_id",
    "notification",
    "open_input",
    "parse_line",
    "read_lines",
    "read_messages",
    "request",
    "result",
    "unwrap",
]
