"""JSON-RPC lines with a session host's unix socket (host/unix.py) as a transport of the
link: this machine's host directly (`run --acp` with `host = true`, `sessions attach`), or
another machine's through `ssh HOST acpctl serve --bridge`. Both open the same way: a first
line that connects (a resumable logical connection) or resumes one, and its answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from acpctl import __version__, environ, jsonrpc, paths
from acpctl import protocol as acp
from acpctl.config import Remote
from acpctl.jsonrpc.framing import MAX_LINE_BYTES
from acpctl.processes import signal_child
from acpctl.remote.host_socket import open_host_socket
from acpctl.remote.transport import (
    NOTHING_YET,
    OPEN_TIMEOUT_S,
    LinkDown,
    LinkRefused,
    NoSuchHost,
    ResumePoint,
    ResumeRefused,
    json_object,
)

HOST_LOG_MARK = acp.HOST_LOG.encode()
HOST_CLOSED = "the session host closed the connection (its log: acpctl logs serve)"


class LinesTransport:
    """One connection to a host's unix socket: its own (`process` None) or through ssh's
    stdio. (A plain class: the thin client's start imports this module.)"""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        process: asyncio.subprocess.Process | None = None,
        log_prefix: str = "",
        log: logging.Logger | None = None,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.process = process
        self.log_prefix = log_prefix  # what the host's log lines are said with
        self._log = log  # where they are said: the link's log, else stderr
        self.connection_id = ""
        self.resumed = False
        self.remote_version: str | None = None
        self.connected: dict[str, Any] = {}  # the connect's answer
        self._cursor: str | None = None
        self._errors: list[str] = []  # ssh's stderr, its last lines
        self._stderr_task: asyncio.Task[None] | None = None
        self._first: list[str] = []

    async def send(self, text: str) -> None:
        try:
            self.writer.write(text.encode() + b"\n")
            await self.writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise LinkDown("the connection closed") from exc

    async def receive(self) -> str | None:
        if self._first:
            return self._first.pop(0)
        while True:
            try:
                line = await self.reader.readline()
            except (ConnectionError, ValueError):  # ValueError: a line past the limit
                return None
            if not line:
                return None
            if HOST_LOG_MARK in line and self._log_line(line):
                continue
            return line.decode("utf-8", "replace").rstrip("\n")

    def _log_line(self, line: bytes) -> bool:
        """The agent's log line (the host's `_acpctl/log`), said on the link's log (stderr
        for `run --acp`, where an editor's agent log shows it as it shows a direct run's)."""
        message = json_object(line.decode("utf-8", "replace"))
        if message.get("method") != acp.HOST_LOG:
            return False
        params = message.get("params")
        if isinstance(params, dict) and isinstance(params.get("message"), str):
            said = f"{self.log_prefix}{params['message']}"
            if self._log is not None:
                self._log.info("%s", said)
            else:
                sys.stderr.write(f"acpctl: {said}\n")
        return True

    def took(self, cursor: str) -> None:
        self._cursor = cursor

    def resume_point(self) -> ResumePoint | None:
        if not self.connection_id:
            return None
        return ResumePoint(self.connection_id, {"": self._cursor or NOTHING_YET})

    def peer_certificate(self) -> dict[str, Any] | None:
        return None  # the socket's permissions, or ssh's host key, check the host

    @property
    def close_reason(self) -> str:
        if self.process is None:
            return HOST_CLOSED
        tail = "; ".join(self._errors[-2:])
        return f"ssh ended ({tail})" if tail else "ssh ended"

    async def close(self, leaving: bool) -> None:
        if leaving and not self.writer.is_closing():
            with contextlib.suppress(Exception):
                await self.send(json.dumps(jsonrpc.notification(acp.HOST_LEAVE, {})))
        with contextlib.suppress(Exception):
            self.writer.close()
        if self.process is not None:
            await _end(self.process)
        if self._stderr_task is not None:
            self._stderr_task.cancel()


async def _end(process: asyncio.subprocess.Process) -> None:
    signal_child(process, signal.SIGTERM)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(process.wait(), 5)
    signal_child(process, signal.SIGKILL)


async def _open(
    transport: LinesTransport,
    connect: dict[str, Any],
    resume_from: ResumePoint | None,
    failed: Callable[[BaseException | None], Exception],
    refused: Callable[[str], Exception],
) -> LinesTransport:
    """`transport` connected (a new logical connection with `connect`'s params) or
    resuming `resume_from`. `failed` says what ended it before an answer came; `refused`,
    a host's refusal of a new connection."""
    if resume_from is not None:
        params = {"connectionId": resume_from.connection_id, "cursor": resume_from.cursors.get("")}
        if "pid" in connect:
            params["pid"] = connect["pid"]
        first = jsonrpc.request(0, acp.STREAM_RESUME, params)
    else:
        first = jsonrpc.request(
            0, acp.HOST_CONNECT, {**connect, "resumable": True, "log": True, "link": True}
        )
    try:
        await transport.send(json.dumps(first))
        answer = await asyncio.wait_for(_first_answer(transport), OPEN_TIMEOUT_S)
    except (LinkDown, asyncio.TimeoutError) as exc:
        await transport.close(leaving=False)
        raise failed(exc) from exc
    if answer is None:
        await transport.close(leaving=False)
        raise failed(None)
    if "error" in answer:
        await transport.close(leaving=False)
        error = answer["error"]
        said = error.get("message") if isinstance(error, dict) else error
        if resume_from is not None:
            raise ResumeRefused(str(said))
        raise refused(str(said))
    if resume_from is not None:
        transport.connection_id = resume_from.connection_id
        transport._cursor = resume_from.cursors.get("")
        transport.resumed = True
        return transport
    result = answer.get("result")
    result = result if isinstance(result, dict) else {}
    connection_id = result.get("connectionId")
    if not isinstance(connection_id, str):
        await transport.close(leaving=False)
        raise refused(
            f"acpctl {result.get('version', 'older than 0.3')} there cannot hold a "
            f"resumable connection: upgrade it to acpctl {__version__}"
        )
    transport.connection_id = connection_id
    transport.remote_version = str(result.get("version"))
    transport.connected = result
    return transport


async def _first_answer(transport: LinesTransport) -> dict[str, Any] | None:
    """The answer to the first line; a `stream/resume_failed` before it is kept out."""
    while True:
        text = await transport.receive()
        if text is None:
            return None
        message = json_object(text)
        if message.get("method") == acp.STREAM_RESUME_FAILED:
            continue  # the error answer follows
        if message.get("id") == 0 and "method" not in message:
            return message
        transport._first.append(text)


# -- this machine's host ------------------------------------------------------------------


async def open_local(
    agent: str,
    start: bool,
    resume_from: ResumePoint | None,
    cwd: str | None = None,
    log: logging.Logger | None = None,
) -> LinesTransport:
    """A connection to `agent` on this machine's session host, for a client in `cwd` (ours
    by default), the agent's log lines said on `log`; with `start`, a host started first
    when none answers. The host runs its agents with its own environment: the answer says
    in which variables it differs from ours (names only: environ.py)."""
    socket = paths.host_socket()
    try:
        reader, writer = await open_host_socket(start)
    except OSError as exc:
        raise LinkDown(f"no session host answers on {socket} ({exc.strerror or exc})") from exc
    connect = {
        "agent": agent,
        "version": __version__,
        "environment": environ.digest(os.environ),
        "cwd": cwd or os.getcwd(),  # a sandboxed agent's first root: the editor's project
        # The host ends the connection at once when this process exits without leaving
        # (killed), rather than listing a client that cannot come back.
        "pid": os.getpid(),
    }

    def failed(cause: BaseException | None) -> Exception:
        return LinkDown(f"the session host on {socket} closed the connection before answering")

    def refused(said: str) -> Exception:
        return LinkRefused(f"the session host refused agent {agent}: {said}")

    transport = LinesTransport(reader, writer, log=log)
    return await _open(transport, connect, resume_from, failed, refused)


# -- another machine's host, over ssh -----------------------------------------------------


def ssh_argv(remote: Remote, *bridge_args: str) -> list[str]:
    """ssh with the user's own configuration (keys, agent, jump hosts, ControlMaster),
    never asking for a password on the editor's pipe, and with keepalives that tell a dead
    link within about 15 s. The remote command is one word list, quoted for the remote
    shell."""
    import shlex  # here: the thin client to this machine's host never needs it

    assert remote.ssh is not None
    remote_command = [*shlex.split(remote.remote_acpctl), "serve", "--bridge", *bridge_args]
    return [
        "ssh",
        "-T",
        "-o",
        "BatchMode=yes",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
        *remote.ssh_args,
        "--",
        remote.ssh,
        shlex.join(remote_command),
    ]


async def open_ssh(
    remote: Remote, resume_from: ResumePoint | None, *bridge_args: str
) -> LinesTransport:
    argv = ssh_argv(remote, *bridge_args)
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=MAX_LINE_BYTES,
            start_new_session=True,  # the editor's Ctrl-C is not ssh's
        )
    except OSError as exc:
        raise LinkRefused(f"cannot run ssh: {exc.strerror or exc}") from exc
    assert process.stdout is not None and process.stdin is not None
    transport = LinesTransport(process.stdout, process.stdin, process, log_prefix="remote: ")
    transport._stderr_task = asyncio.ensure_future(_read_errors(process, transport._errors))
    connect = {"agent": remote.remote_agent, "version": __version__}

    def failed(cause: BaseException | None) -> Exception:
        return _ssh_failure(remote, process, transport._errors, cause)

    def refused(said: str) -> Exception:
        return LinkRefused(f"the session host on {remote.ssh} refused: {said}")

    return await _open(transport, connect, resume_from, failed, refused)


async def _read_errors(process: asyncio.subprocess.Process, errors: list[str]) -> None:
    """ssh's stderr, its last lines kept to say why it ended."""
    stream = process.stderr
    assert stream is not None
    while line := await stream.readline():
        text = line.decode("utf-8", "replace").strip()
        if text:
            errors.append(text)
            del errors[:-20]


def _ssh_failure(
    remote: Remote,
    process: asyncio.subprocess.Process,
    errors: list[str],
    cause: BaseException | None,
) -> Exception:
    """What ended ssh before the host answered, said as what to do."""
    said = " ".join(errors[-3:]).lower()
    tail = "; ".join(errors[-2:]) or (str(cause) if cause else "no answer")
    command = remote.remote_acpctl
    if "command not found" in said or "no such file" in said or process.returncode == 127:
        return LinkRefused(
            f"acpctl is not installed on {remote.ssh} (`{command}` not found there): install "
            "it there (pipx install acp-ctl), or set remote_acpctl to its path"
        )
    if "no such option: --bridge" in said or "no such command" in said:
        return LinkRefused(
            f"acpctl on {remote.ssh} is too old for remote agents (no `serve --bridge`): "
            f"upgrade it there to acpctl {__version__} (pipx upgrade acp-ctl)"
        )
    if "permission denied" in said or "host key verification failed" in said:
        return LinkRefused(f"ssh to {remote.ssh} was refused: {tail}")
    if "could not resolve hostname" in said:
        return NoSuchHost(f"ssh to {remote.ssh}: {tail}")
    return LinkDown(f"ssh to {remote.ssh}: {tail}")
