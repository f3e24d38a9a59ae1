"""The host's unix socket: JSON-RPC lines, as on stdio, for `run --acp` through the host and
acpctl's commands on this machine. Its permissions (0600, in a 0700 directory) are its
check, so no token is asked. The first line of a connection says what it is for:

    {"jsonrpc": "2.0", "id": 0, "method": "_acpctl/connect", "params": {"agent": "NAME"}}
    {"jsonrpc": "2.0", "id": 0, "method": "_acpctl/status"}

Each is answered; after a connect's answer the connection is an ACP client's (`agent`
null: the default agent) until it closes. No HTTP here: the thin client of `run --acp`
starts without importing an HTTP library."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from pathlib import Path
from typing import Any

from acpctl import __version__, jsonrpc, paths
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.agents import AgentChanged, AgentPool
from acpctl.jsonrpc import JsonObject
from acpctl.jsonrpc.channel import StreamChannel
from acpctl.jsonrpc.framing import MAX_LINE_BYTES
from acpctl.runner.clients import Client

UNIX_PATH_MAX = 107  # sun_path's size, less its NUL
FIRST_LINE_TIMEOUT_S = 30.0


async def listen(
    path: Path, pool: AgentPool, log: logging.Logger, listening: list[JsonObject]
) -> asyncio.AbstractServer:
    """The socket at `path`, 0600 in a 0700 directory; a stale one (no host answers on it)
    is replaced, a live one is refused."""
    if len(os.fsencode(path)) > UNIX_PATH_MAX:
        raise AcpctlError(f"the socket path {path} is too long for a unix socket")
    paths.ensure_private_dir(path.parent)
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

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _client(reader, writer, pool, log, listening)
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
    pool: AgentPool,
    log: logging.Logger,
    listening: list[JsonObject],
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
    if method == acp.HOST_STATUS:
        status = {
            "pid": os.getpid(),
            "version": __version__,
            "socket": str(paths.host_socket()),
            "listening": listening,
            "agents": pool.status(),
        }
        _answer(writer, jsonrpc.result(msg_id, status))
        await writer.drain()
        return
    if method != acp.HOST_CONNECT:
        _answer(writer, jsonrpc.error(msg_id, acp.METHOD_NOT_FOUND, f"{method}: not a host method"))
        return
    agent = params.get("agent")
    try:
        hosted = await pool.get(agent if isinstance(agent, str) else None)
    except AgentChanged as exc:
        _answer(writer, jsonrpc.error(msg_id, acp.INTERNAL_ERROR, str(exc)))
        return
    except AcpctlError as exc:  # an unknown agent, a config.toml that does not parse
        _answer(writer, jsonrpc.error(msg_id, acp.RESOURCE_NOT_FOUND, str(exc)))
        return
    _answer(writer, jsonrpc.result(msg_id, {"agent": hosted.name}))
    channel = StreamChannel.on_socket(reader, writer)
    forward = _LogLines(channel) if params.get("log") is True else None
    if forward is not None:
        hosted.log.addHandler(forward)
    try:
        with contextlib.suppress(ConnectionError):
            await pool.serve(hosted, Client(channel))
            await channel.drain()
    finally:
        if forward is not None:
            hosted.log.removeHandler(forward)


class _LogLines(logging.Handler):
    """The agent's log, as the client's `_acpctl/log` notifications: `run --acp` through the
    host writes them to its stderr, where the editor's agent log shows them, as it shows a
    direct run's."""

    def __init__(self, channel: StreamChannel) -> None:
        super().__init__(logging.INFO)
        self.channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        self.channel.send(jsonrpc.notification(acp.HOST_LOG, {"message": record.getMessage()}))


def _answer(writer: asyncio.StreamWriter, message: Any) -> None:
    writer.write(jsonrpc.encode(message))
