"""A local stand-in for a model API (Anthropic Messages, streamed as server-sent events).

Started by tests on 127.0.0.1 so the npm agents (claude-agent-acp, pi) run for real with no
network. Each request to /v1/messages takes the next scripted reply, or a default text
reply; every request body is recorded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Block = dict[str, Any]  # {"type": "text"|"thinking"|"tool_use", ...}


def text(value: str) -> Block:
    return {"type": "text", "text": value}


def thinking(value: str) -> Block:
    return {"type": "thinking", "thinking": value}


def tool_use(name: str, arguments: dict[str, Any], tool_id: str = "toolu_1") -> Block:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}


@dataclass(frozen=True)
class ApiError:
    """An error as the Anthropic Messages API sends it."""

    status: int
    type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"type": "error", "error": {"type": self.type, "message": self.message}}


def write_pi_models(agent_dir: Path, url: str, *model_ids: str) -> None:
    """pi's models.json (in `~/.pi/agent`) with one provider, `stub`, at this stand-in's
    url, offering these models (reasoning, text in)."""
    models = [{"id": model, "reasoning": True, "input": ["text"]} for model in model_ids]
    provider = {"baseUrl": url, "api": "anthropic-messages", "apiKey": "test", "models": models}
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.json").write_text(json.dumps({"providers": {"stub": provider}}))


def pi_on_stub(binary: Path, model: str) -> list[str]:
    """pi's command line in RPC mode on the stand-in's provider (see write_pi_models)."""
    return [str(binary), "--mode", "rpc", "--provider", "stub", "--model", model, "--no-themes"]


class ModelStub:
    def __init__(self, default_reply: str = "Hello from the stand-in model.") -> None:
        self.default_reply = default_reply
        self.script: list[list[Block]] = []
        # claude asks for a session title beside the turn, a request with no tools; a script of
        # tool calls is for the turn, so such side requests get the default reply when this is set.
        self.script_turns_only = False
        self.requests: list[dict[str, Any]] = []
        self.delay = 0.0  # seconds between streamed deltas
        self.fail_with: tuple[int, str] | None = None  # (HTTP status, message) for the next call
        # Every call fails (the corpus of real failures): an API error, or a stream that stalls.
        self.fail_always: ApiError | None = None
        self.stall = False
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.stub = self
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ModelStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def _stop_reason(blocks: list[Block]) -> str:
        return "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"

    def message(self, blocks: list[Block]) -> dict[str, Any]:
        content = [b if b["type"] != "thinking" else {**b, "signature": "stub"} for b in blocks]
        return {
            "id": "msg_stub",
            "type": "message",
            "role": "assistant",
            "model": "stub",
            "content": content,
            "stop_reason": self._stop_reason(blocks),
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }

    def events(self, blocks: list[Block]) -> Iterator[tuple[str, dict[str, Any]]]:
        yield (
            "message_start",
            {"type": "message_start", "message": {**self.message([]), "stop_reason": None}},
        )
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
                for word in _pieces(block["text"]):
                    yield (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": word},
                        },
                    )
            elif block["type"] == "thinking":
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "thinking", "thinking": ""},
                    },
                )
                for word in _pieces(block["thinking"]):
                    yield (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "thinking_delta", "thinking": word},
                        },
                    )
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": "stub"},
                    },
                )
            else:
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": block["id"],
                            "name": block["name"],
                            "input": {},
                        },
                    },
                )
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {
                            "type": "input_json_delta",
                            "partial_json": json.dumps(block["input"]),
                        },
                    },
                )
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": self._stop_reason(blocks), "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
        )
        yield "message_stop", {"type": "message_stop"}


def _pieces(value: str) -> list[str]:
    words = value.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


class _Server(ThreadingHTTPServer):
    stub: ModelStub


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        stub = self.server.stub
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.rstrip("/").endswith("count_tokens"):
            self._json({"input_tokens": 10})
            return
        with stub.lock:
            stub.requests.append(body)
            failure, stub.fail_with = stub.fail_with, None
            scripted = stub.script and (body.get("tools") or not stub.script_turns_only)
            blocks = stub.script.pop(0) if scripted else [text(stub.default_reply)]
        if self._fails_always():
            return
        if failure is not None:
            status, message = failure
            self._json(
                {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": message},
                },
                status,
            )
            return
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            try:
                for event, data in stub.events(blocks):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                    if stub.delay:
                        threading.Event().wait(stub.delay)
            except (BrokenPipeError, ConnectionResetError):
                pass
        else:
            self._json(stub.message(blocks))

    def do_GET(self) -> None:
        self._json({"data": [], "has_more": False})

    def _fails_always(self) -> bool:
        """An API error, or a stall: headers and the first event, then nothing
        until the test ends."""
        stub = self.server.stub
        if stub.fail_always is not None:
            error = stub.fail_always
            self._json(error.body(), error.status, error.headers)
            return True
        if not stub.stall:
            return False
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        event, data = next(stub.events([]))
        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
        stub.stopped.wait()
        return True

    def _json(self, value: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        for name, header in (headers or {}).items():
            self.send_header(name, header)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
