"""`initialize` on both hops: what acpctl sends the agent and answers the editor, and the
exchange of it before the server is up.

Editors time `initialize`, and importing acpctl's server (asyncio and its own modules) takes
50 to 80 ms; an agent that starts fast would wait for it. So `run --acp`, once its agent is
spawned, imports the server in a thread and meanwhile relays the editor's first message over
the plain pipes (`exchange`). Only the ordinary case is done there: the editor's first line
is an initialize request and the agent's first message its successful answer (lines that are
not JSON, a banner, may come before it). Anything else, or the server being imported before
the answer comes, leaves the rest to the server: the bytes read so far are handed to it, and
an initialize already sent is the backend's first request (id 1), whose answer it awaits.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading

from acpctl import jsontext
from acpctl import protocol as acp

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without typing's import (mypy reads it so)
if TYPE_CHECKING:
    import subprocess
    from typing import Any

    JsonObject = dict[str, Any]

# The id of the backend's first request to a new agent (jsonrpc.PendingRequests counts
# from 1): an initialize sent here is that request.
AGENT_REQUEST_ID = 1
SESSION_CAPABILITIES_SERVED = ("list", "resume", "close", "delete", "fork")
# While the main thread waits on the pipes, the importing thread may hold the interpreter
# this long before handing it over (the default is 5 ms).
SWITCH_INTERVAL_S = 0.0005


def negotiated_version(offered: Any) -> Any:
    """The protocol version to speak: the lower of what the peer offers and what acpctl's
    own handlers implement (a non-integer is passed on for the peer to refuse)."""
    if isinstance(offered, int) and not isinstance(offered, bool):
        return min(offered, acp.PROTOCOL_VERSION)
    return offered


def to_agent(params: JsonObject) -> JsonObject:
    """The editor's initialize params as the agent gets them."""
    return {**params, "protocolVersion": negotiated_version(params.get("protocolVersion"))}


def served_capabilities(agent: Any) -> JsonObject:
    """The agent's capabilities plus load, list, resume, close, delete and fork, which
    acpctl serves from its store."""
    capabilities = dict(agent) if isinstance(agent, dict) else {}
    capabilities["loadSession"] = True
    session_caps = capabilities.get("sessionCapabilities")
    session_caps = dict(session_caps) if isinstance(session_caps, dict) else {}
    for name in SESSION_CAPABILITIES_SERVED:
        if not isinstance(session_caps.get(name), dict):
            session_caps[name] = {}
    capabilities["sessionCapabilities"] = session_caps
    return capabilities


def agent_capabilities(result: JsonObject) -> JsonObject:
    """The capabilities the agent gave in its initialize result, as it gave them."""
    capabilities = result.get("agentCapabilities")
    return dict(capabilities) if isinstance(capabilities, dict) else {}


def to_editor(result: JsonObject) -> JsonObject:
    """The agent's initialize result as the editor gets it."""
    return {
        **result,
        "protocolVersion": negotiated_version(result.get("protocolVersion")),
        "agentCapabilities": served_capabilities(result.get("agentCapabilities")),
    }


class Exchange:
    """What `exchange` leaves to the server. A plain class: dataclasses would cost its
    import before the exchange."""

    def __init__(self) -> None:
        self.editor_bytes = b""  # read from the editor, not consumed
        self.agent_bytes = b""  # read from the agent, not consumed
        self.sent: JsonObject | None = None  # params of the initialize sent as id 1
        # Set when the editor has its answer: the agent's capabilities as it gave them.
        self.agent_capabilities: JsonObject | None = None


def exchange(popen: subprocess.Popen[bytes], server_module: str) -> Exchange:
    """Relay the editor's initialize to the agent and its answer back while a thread
    imports `server_module`; returns once the answer is sent, or once that import is done
    (or at EOF, or at anything unusual), with what is left for the server."""
    assert popen.stdin is not None and popen.stdout is not None
    import_done, imported = os.pipe()
    importer = threading.Thread(target=_import, args=(server_module, imported), daemon=True)
    previous_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    importer.start()
    state = Exchange()
    editor = _LineReader(0, import_done)
    agent = _LineReader(popen.stdout.fileno(), import_done)
    try:
        _exchange(state, editor, agent, popen.stdin.fileno())
    finally:
        importer.join()
        sys.setswitchinterval(previous_interval)
        os.close(import_done)
        state.editor_bytes = editor.buffer
        state.agent_bytes = agent.buffer
    return state


def _import(module: str, done: int) -> None:
    try:
        __import__(module)
    except BaseException:  # the main thread's own import of it says what failed
        pass
    finally:
        os.write(done, b".")
        os.close(done)


class _LineReader:
    """Whole lines from a pipe, given back with unread() when they turn out to be the
    server's to handle; `buffer` is what is read and not taken."""

    def __init__(self, fd: int, stop: int) -> None:
        self.fd = fd
        self.stop = stop  # readable once the server is imported: stop waiting then
        self.buffer = b""

    def line(self) -> bytes | None:
        """The next line, without its newline; None at EOF or once `stop` is readable,
        before a whole line is there."""
        while b"\n" not in self.buffer:
            readable, _, _ = select.select([self.fd, self.stop], [], [])
            if self.fd not in readable:
                return None
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def unread(self, lines: list[bytes]) -> None:
        self.buffer = b"".join(line + b"\n" for line in lines) + self.buffer


def _exchange(state: Exchange, editor: _LineReader, agent: _LineReader, agent_in: int) -> None:
    line = editor.line()
    if line is not None and not _relayed(state, line, agent, agent_in):
        editor.unread([line])  # the server answers it (and awaits an answer already sent)


def _relayed(state: Exchange, line: bytes, agent: _LineReader, agent_in: int) -> bool:
    """Whether the editor got the answer to `line` from the agent."""
    request = _json(line)
    if not (
        isinstance(request, dict)
        and request.get("method") == acp.INITIALIZE
        and _is_id(request.get("id", False))
        and isinstance(request.get("params"), dict)
    ):
        return False
    params = to_agent(request["params"])
    outgoing = _encode(
        {"jsonrpc": "2.0", "id": AGENT_REQUEST_ID, "method": acp.INITIALIZE, "params": params}
    )
    if outgoing is None:  # the server says what is wrong with it
        return False
    try:
        os.write(agent_in, outgoing)  # a few hundred bytes: a pipe takes them whole
    except OSError:  # the agent is gone: the server reports it
        return False
    state.sent = params
    banners: list[bytes] = []  # lines that are not JSON: the server logs them
    try:
        while (answer_line := agent.line()) is not None:
            answer = _json(answer_line)
            if answer is None:
                banners.append(answer_line)
                continue
            result = answer.get("result") if isinstance(answer, dict) else None
            if isinstance(result, dict) and answer.get("id") == AGENT_REQUEST_ID:
                reply = _encode(
                    {**answer, "jsonrpc": "2.0", "id": request["id"], "result": to_editor(result)}
                )
                if reply is not None:
                    with contextlib.suppress(OSError):  # the editor is gone: the server sees
                        _write_all(1, reply)  # its end of input next
                    state.agent_capabilities = agent_capabilities(result)
                    return True
            banners.append(answer_line)  # not the answer looked for: the server routes it
            return False
        return False
    finally:
        agent.unread(banners)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _json(line: bytes) -> Any:
    """The line's value as the server's parser reads it (jsonrpc.parse_line, whose package
    imports asyncio); None for what it refuses (a UnicodeDecodeError is a ValueError)."""
    try:
        return jsontext.decode_text(line.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def _is_id(value: Any) -> bool:
    """What JSON-RPC allows as an id (jsonrpc.is_id; that package imports asyncio)."""
    return value is None or (isinstance(value, int | str) and not isinstance(value, bool))


def _encode(message: Any) -> bytes | None:
    """The message's line; None for what JSON cannot carry (NaN, Infinity) or what is
    nested too deeply: the server's own parser then says what is wrong."""
    try:
        return jsontext.encode(message)
    except (ValueError, RecursionError):
        return None
