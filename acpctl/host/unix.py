"""The host's unix socket: JSON-RPC lines, as on stdio, for `run --acp` through the host and
acpctl's commands on this machine. Its permissions (0600, in a 0700 directory) are its
check, so no token is asked. The first line of a connection says what it is for:

    {"jsonrpc": "2.0", "id": 0, "method": "_acpctl/connect", "params": {"agent": "NAME"}}
    {"jsonrpc": "2.0", "id": 0, "method": "_acpctl/status"}
    {"jsonrpc": "2.0", "id": 0, "method": "stream/resume", "params": {"connectionId": …}}

Each is answered. After a connect's answer (`agent` null: the default agent) the
connection is an ACP client's, and a logical connection, as a WebSocket's is: its id is in
the answer, every line the host sends carries a cursor, an end without `_acpctl/leave`
first is a drop, and a later connection whose first line is `stream/resume` (with the
connection's id and the last `cursor` the client holds) takes it up where it dropped. The
connect may ask for the agent's log (`"log": true`, sent as `_acpctl/log` notifications)
and carry a digest of the client's environment (`environment`: the answer's
`environmentDiffers` names the variables the host's differs in) and the client's directory
(`cwd`: a sandboxed agent runs a process per project, whose sandbox's roots start there).
Every client on this machine comes in this way: `run --acp` through the host and
`sessions attach` (remote/lines.py), and a remote acpctl through `serve --bridge`."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from acpctl import __version__, environ, jsonrpc, paths
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.agents import AgentChanged, AgentPool
from acpctl.host.connection import (
    LogicalConnection,
    resume,
    resume_failed,
)
from acpctl.host.cursors import ALL_STREAMS, ResumeRefused
from acpctl.host.outbox import Outbox, Reader
from acpctl.host.registry import Caller, Connections
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.framing import MAX_LINE_BYTES, read_lines
from acpctl.jsontext import encode_text

T = TypeVar("T")
UNIX_PATH_MAX = 107  # sun_path's size, less its NUL
FIRST_LINE_TIMEOUT_S = 30.0
# The host's methods asked as the socket's first line (host/control.py's LOCAL ones: `acpctl
# host status`, `pair`, `stop`...; the socket's permissions are their check): params ->
# result.
Control = Callable[[JsonObject], JsonObject | Awaitable[JsonObject]]


async def listen(
    path: Path,
    pool: AgentPool,
    log: logging.Logger,
    controls: Mapping[str, Control],
) -> asyncio.AbstractServer:
    """The socket at `path`, 0600 in a 0700 directory; a stale one (no host answers on it)
    is replaced, a live one is refused."""
    if len(os.fsencode(path)) > UNIX_PATH_MAX:
        raise AcpctlError(f"the socket path {path} is too long for a unix socket")
    paths.own_private_dir(path.parent)
    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()
        else:
            raise AcpctlError(f"a session host already listens on {path}")
        finally:
            probe.close()

    connections = Connections(pool, log)

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _client(reader, writer, connections, log, controls)
        except asyncio.CancelledError:
            # The host stops with this client connected. Nothing awaits this task, and
            # Python 3.11's stream callback would print the cancellation as a traceback.
            pass
        finally:
            writer.close()

    previous = os.umask(0o177)
    try:
        server = await asyncio.start_unix_server(on_client, str(path), limit=MAX_LINE_BYTES)
    finally:
        os.umask(previous)
    os.chmod(path, paths.PRIVATE_FILE_MODE)
    return server


async def _client(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    connections: Connections,
    log: logging.Logger,
    controls: Mapping[str, Control],
) -> None:
    try:
        first = await asyncio.wait_for(reader.readline(), FIRST_LINE_TIMEOUT_S)
        request = json.loads(first)
    except (asyncio.TimeoutError, ValueError, RecursionError, ConnectionError):
        return
    if not isinstance(request, dict) or not jsonrpc.is_id(request.get("id")):
        return
    msg_id, method = request["id"], request.get("method")
    params = request.get("params")
    params = params if isinstance(params, dict) else {}
    control = controls.get(str(method))
    if control is not None:
        try:
            answered = control(params)
            if inspect.isawaitable(answered):
                answered = await answered
            _answer(writer, jsonrpc.result(msg_id, answered))
        except AcpctlError as exc:
            _answer(writer, jsonrpc.error(msg_id, acp.INVALID_PARAMS, exc.message))
        except RpcError as exc:
            _answer(writer, {"jsonrpc": "2.0", "id": msg_id, "error": exc.to_error()})
        await writer.drain()
        return
    if method == acp.STREAM_RESUME:
        await _resume(request, reader, writer, connections, log)
        return
    if method != acp.HOST_CONNECT:
        _answer(writer, jsonrpc.error(msg_id, acp.METHOD_NOT_FOUND, f"{method}: not a host method"))
        return
    await _open(msg_id, params, reader, writer, connections, log)


async def _open(
    msg_id: Any,
    params: JsonObject,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    connections: Connections,
    log: logging.Logger,
) -> None:
    import uuid

    agent = params.get("agent")
    name = agent if isinstance(agent, str) else None
    opening = connections.open(
        name,
        Caller(acp.CONTROLLER, local=True),
        uuid.uuid4().hex,
        forward_log=params.get("log") is True,
        link=params.get("link") is True,
        client_dir=_client_dir(params.get("cwd")),
    )
    connection = await _or_refused(writer, msg_id, opening)
    if connection is None:
        return
    sender = UnixSender(writer, log)
    # The agent runs with this host's environment, whichever client reaches it: a client
    # whose own differs is told in which variables (environ.py), never silently.
    differs = environ.differing(params.get("environment"), environ.digest(os.environ))
    answer = {
        "agent": agent,
        "version": __version__,
        "connectionId": connection.id,
        "environmentDiffers": differs,
    }
    sender.push(0, encode_text(jsonrpc.result(msg_id, answer)))
    attached = sender.reader()
    connection.attach(attached, connection.backlog(ALL_STREAMS, None))
    await _carry(connection, attached, reader, Holder.of(params, writer))


async def _or_refused(writer: asyncio.StreamWriter, msg_id: Any, opening: Awaitable[T]) -> T | None:
    """What `opening` (the agent's start, a connection on it) gives; None when config.toml
    refuses the agent, and the client was told why."""
    try:
        return await opening
    except AgentChanged as exc:
        _answer(writer, jsonrpc.error(msg_id, acp.INTERNAL_ERROR, str(exc)))
    except AcpctlError as exc:  # an unknown agent, a config.toml that does not parse
        _answer(writer, jsonrpc.error(msg_id, acp.RESOURCE_NOT_FOUND, str(exc)))
    return None


async def _resume(
    request: dict[str, Any],
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    connections: Connections,
    log: logging.Logger,
) -> None:
    attached = UnixSender(writer, log).reader()
    try:
        connection = resume(
            request,
            lambda wanted: connections.find(wanted, Caller(acp.CONTROLLER, local=True)),
            attached,
        )
    except ResumeRefused as exc:
        writer.write("".join(text + "\n" for text in resume_failed(request, str(exc))).encode())
        await writer.drain()
        return
    params = request.get("params")
    await _carry(connection, attached, reader, Holder.of(params, writer))


class UnixSender:
    """What the connection sends, written to the socket as it is sent: the socket's own
    buffer is the outbox (no task between the agent's line and the client, a wait a turn
    less). Past Outbox.HIGH_WATER the server's drain waits (the agent is read no faster
    than the client takes it); past Outbox.MAX_BEHIND the socket is cut off (its
    connection can resume) rather than buffered without bound."""

    def __init__(self, writer: asyncio.StreamWriter, log: logging.Logger) -> None:
        self._writer = writer
        self._log = log
        writer.transport.set_write_buffer_limits(high=Outbox.HIGH_WATER)

    def reader(self) -> Reader:
        return Reader(ALL_STREAMS, self.push, self.drain)

    def push(self, cursor: int, text: str) -> None:
        transport = self._writer.transport
        if transport.is_closing():
            return
        transport.write(text.encode() + b"\n")
        if transport.get_write_buffer_size() > Outbox.MAX_BEHIND:
            self._log.warning(
                "a client fell %d MiB behind; cutting its socket off", Outbox.MAX_BEHIND >> 20
            )
            transport.abort()

    async def drain(self) -> None:
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()


async def _carry(
    connection: LogicalConnection,
    attached: Reader,
    reader: asyncio.StreamReader,
    holder: Holder | None,
) -> None:
    """The connection's lines both ways until the client's end closes: a drop, unless the
    client said `_acpctl/leave` first, or the process that held it has exited (a killed
    `run --acp` cannot come back: it is not listed as a client for the grace)."""
    left = False
    try:
        with contextlib.suppress(ConnectionError):
            async for lines in read_lines(reader):
                for line in lines:
                    if line is None or not line.strip():
                        continue  # an oversized line: too big for any agent
                    if acp.HOST_LEAVE.encode() in line and _is_leave(line):
                        left = True
                        continue
                    connection.deliver(line)
    finally:
        connection.detach(attached)
        if left or (holder is not None and not connection.ended and await holder.exited()):
            connection.end()
        if holder is not None:
            holder.close()


class Holder:
    """The process on this machine that holds a connection: the client said its pid, and
    the kernel says the socket's peer is that process. Over `serve --bridge` the peer is
    the bridge, which a remote link outlives: its connections have no holder."""

    EXIT_WAIT_S = 1.0  # a socket is closed as its process exits, just before it has

    def __init__(self, pidfd: int) -> None:
        self._pidfd = pidfd

    @classmethod
    def of(cls, params: object, writer: asyncio.StreamWriter) -> Holder | None:
        said = params.get("pid") if isinstance(params, dict) else None
        peer = _peer_pid(writer)
        if not isinstance(said, int) or said != peer or not hasattr(os, "pidfd_open"):
            return None
        try:  # the pidfd is this process, whatever takes its pid later
            return cls(os.pidfd_open(said))
        except OSError:
            return None

    async def exited(self) -> bool:
        """Whether the process has exited (its pidfd turns readable), waiting a moment."""
        loop = asyncio.get_running_loop()
        readable = asyncio.Event()
        loop.add_reader(self._pidfd, readable.set)
        try:
            await asyncio.wait_for(readable.wait(), self.EXIT_WAIT_S)
            return True
        except asyncio.TimeoutError:
            return False  # it lives: a drop it may resume from within the grace
        finally:
            loop.remove_reader(self._pidfd)

    def close(self) -> None:
        os.close(self._pidfd)


def _peer_pid(writer: asyncio.StreamWriter) -> int | None:
    peer = writer.get_extra_info("socket")
    if peer is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    with contextlib.suppress(OSError):
        pid, _, _ = struct.unpack("3i", peer.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        return int(pid)
    return None


def _client_dir(said: object) -> str | None:
    """The client's directory, as its connect says it: where a sandboxed agent's roots
    start (the socket is this user's only, so its word is taken; a path it is not, not)."""
    if isinstance(said, str) and os.path.isabs(said) and os.path.isdir(said):
        return said
    return None


def _is_leave(line: bytes) -> bool:
    with contextlib.suppress(ValueError, RecursionError):
        message = json.loads(line)
        return isinstance(message, dict) and message.get("method") == acp.HOST_LEAVE
    return False


def _answer(writer: asyncio.StreamWriter, message: Any) -> None:
    writer.write(jsonrpc.encode(message))
