"""The transports a remote agent is reached by, each one connection attempt: ACP's
WebSocket profile (aiohttp), its Streamable HTTP profile (remote/streamable.py), and
JSON-RPC lines over `ssh HOST acpctl serve --bridge` (the remote host's unix socket).

A transport is opened new, or resuming a connection the host still holds (by its id and
the last cursor received); it then carries text messages both ways until it drops. Opening
raises LinkDown for what a retry may cure (no route, a refused or dropped connection, a
timeout), LinkRefused for what it will not (a wrong token, an unknown agent, no acpctl on
the remote), and ResumeRefused when the host no longer holds the connection."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import shlex
import ssl
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from acpctl import __version__, jsonrpc
from acpctl import protocol as acp
from acpctl.config import Remote, shown_url
from acpctl.jsonrpc.framing import MAX_LINE_BYTES
from acpctl.jsontext import decode_text

CONNECTION_ID_HEADER = "Acp-Connection-Id"
OPEN_TIMEOUT_S = 15.0
HEARTBEAT_S = 5.0  # WebSocket pings: a link silent for about twice this is dead
MAX_MESSAGE_BYTES = 16 << 20
NOTHING_YET = "0"  # the cursor of a client that has had nothing (acpctl serve's convention)


class LinkDown(Exception):
    """The link is down now; trying again may bring it back."""


class NoSuchHost(LinkDown):
    """The remote's name does not resolve. Before the link was ever up that is a typo, said
    at once; after, the network went away, and a retry may bring it back."""


class LinkRefused(Exception):
    """The remote said no in a way no retry changes; the message says what to fix."""


class ResumeRefused(Exception):
    """The remote no longer holds the connection (or never could resume it)."""


@dataclass
class ResumePoint:
    connection_id: str
    cursors: dict[str, str]  # stream -> the last cursor received on it ("": all of them)
    streams: list[str] | None = None  # the streams to resume (Streamable HTTP's)


class Transport(Protocol):
    connection_id: str
    resumed: bool  # opened by resuming a held connection
    remote_version: str | None  # the acpctl at the other end, when the transport says

    @property
    def close_reason(self) -> str:
        """Why it dropped, said in a few words."""
        ...

    async def send(self, text: str) -> None: ...

    async def receive(self) -> str | None:
        """The next message; None once the transport has dropped."""
        ...

    def took(self, cursor: str) -> None:
        """The link has taken the message that carried `cursor`: a resume starts after it."""
        ...

    def resume_point(self) -> ResumePoint | None:
        """Where a later transport could resume this connection from; None: it cannot."""
        ...

    def peer_certificate(self) -> dict[str, Any] | None:
        """The TLS certificate the remote presented (as `ssl` gives it), if any."""
        ...

    async def close(self, leaving: bool) -> None:
        """End it; `leaving`: the client has gone for good (the host may end the
        connection), else it is a drop that a resume may follow."""
        ...


def read_token(remote: Remote) -> str | None:
    """The bearer token from the agent's token_file (first line), or None without one."""
    if remote.token_file is None:
        return None
    path = Path(remote.token_file).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LinkRefused(f"cannot read token_file {path}: {exc}") from exc
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not token:
        raise LinkRefused(f"token_file {path} is empty")
    return token


def tls_context(remote: Remote) -> ssl.SSLContext:
    """The certificate check: the system's CAs, or only the agent's ca_file. Never off."""
    if remote.ca_file is None:
        return ssl.create_default_context()
    path = Path(remote.ca_file).expanduser()
    try:
        return ssl.create_default_context(cafile=str(path))
    except (OSError, ssl.SSLError) as exc:
        raise LinkRefused(f"cannot load ca_file {path}: {exc}") from exc


# -- WebSocket ------------------------------------------------------------------------


class WebSocketTransport:
    def __init__(self, socket: Any, connection_id: str, resumed: bool) -> None:
        from aiohttp import WSMsgType  # imported once a transport, not once a message

        self._text = WSMsgType.TEXT
        self._ends = {WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR}
        self._socket = socket
        self.connection_id = connection_id
        self.resumed = resumed
        self.remote_version: str | None = None
        self._cursor: str | None = None
        # Read, not yet handed on: while resuming, and the rest of a frame of lines.
        self._first: collections.deque[str] = collections.deque()
        self._lines = socket.protocol == acp.WEBSOCKET_LINES

    async def send(self, text: str) -> None:
        try:
            await self._socket.send_str(text)
        except (ConnectionError, RuntimeError) as exc:
            raise LinkDown(str(exc) or "the connection closed") from exc

    async def receive(self) -> str | None:
        if self._first:
            return self._first.popleft()
        while True:
            try:
                frame = await self._socket.receive()
            except (ConnectionError, asyncio.TimeoutError):
                return None
            if frame.type == self._text:
                if not self._lines:
                    return str(frame.data)
                first, *rest = str(frame.data).split("\n")
                self._first.extend(rest)
                return first
            if frame.type in self._ends:
                return None

    def took(self, cursor: str) -> None:
        self._cursor = cursor

    def resume_point(self) -> ResumePoint | None:
        return ResumePoint(self.connection_id, {"": self._cursor or NOTHING_YET})

    def peer_certificate(self) -> dict[str, Any] | None:
        certificate = self._socket.get_extra_info("peercert")
        return certificate if isinstance(certificate, dict) else None

    @property
    def close_reason(self) -> str:
        code = self._socket.close_code
        return f"closed by the remote ({code})" if code else "the connection dropped"

    async def close(self, leaving: bool) -> None:
        with contextlib.suppress(Exception):
            await self._socket.close(code=1000 if leaving else 4000)


async def open_websocket(
    session: Any,
    url: str,
    token: str | None,
    context: ssl.SSLContext | None,
    resume_from: ResumePoint | None,
) -> WebSocketTransport:
    """A WebSocket to `url`: new (acpctl picks the connection's id and names it in the
    upgrade, which acpctl serve takes; other servers mint their own and cannot resume), or
    resuming with `stream/resume` as its first frame."""
    import aiohttp

    connection_id = resume_from.connection_id if resume_from else uuid.uuid4().hex
    headers = {CONNECTION_ID_HEADER: connection_id}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        socket = await session.ws_connect(
            url,
            headers=headers,
            ssl=context if url.startswith("wss:") else False,
            heartbeat=HEARTBEAT_S,
            max_msg_size=MAX_MESSAGE_BYTES,
            protocols=(acp.WEBSOCKET_LINES,),
            timeout=aiohttp.ClientWSTimeout(ws_close=2.0),
        )
    except aiohttp.WSServerHandshakeError as exc:
        raise refusal(exc.status, url, exc.message) from exc
    except aiohttp.ClientConnectorCertificateError as exc:
        raise LinkRefused(
            f"the certificate of {shown_url(url)} was refused: {exc.certificate_error}"
        ) from exc
    except aiohttp.ClientConnectorDNSError as exc:
        raise NoSuchHost(f"{shown_url(url)}: its host name does not resolve") from exc
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
        raise LinkDown(_said(exc).replace(url, shown_url(url))) from exc
    transport = WebSocketTransport(socket, connection_id, resumed=resume_from is not None)
    if resume_from is not None:
        transport._cursor = resume_from.cursors.get("")
        await _resume(transport, resume_from)
    return transport


async def _resume(transport: WebSocketTransport, point: ResumePoint) -> None:
    request = jsonrpc.request(
        "resume",
        acp.STREAM_RESUME,
        {"connectionId": point.connection_id, "cursor": point.cursors.get("", "")},
    )
    await transport.send(json.dumps(request))
    before: list[str] = []  # what a server sent before its answer: handed on first
    while True:
        try:
            text = await asyncio.wait_for(transport.receive(), OPEN_TIMEOUT_S)
        except asyncio.TimeoutError:
            text = None
        if text is None:  # it dropped again: the resume is tried again
            await transport.close(leaving=False)
            raise LinkDown("the connection dropped during stream/resume")
        message = json_object(text)
        if message.get("method") == acp.STREAM_RESUME_FAILED:
            params = message.get("params")
            reason = params.get("reason") if isinstance(params, dict) else None
            await transport.close(leaving=False)
            raise ResumeRefused(str(reason or "refused"))
        if message.get("id") == "resume" and "method" not in message:
            if "error" in message:
                await transport.close(leaving=False)
                raise ResumeRefused(str(message["error"]))
            transport._first.extendleft(reversed(before))
            return
        before.append(text)


def refusal(status: int, full_url: str, said: str) -> Exception:
    url = shown_url(full_url)
    if status == 401:
        return LinkRefused(f"{url} refused the token (401): check token_file")
    if status == 403:
        return LinkRefused(f"{url} refused the connection (403): {said}")
    if status == 404:
        return LinkRefused(f"{url}: no such agent or endpoint there (404)")
    if status == 409:
        return LinkDown(f"{url}: the agent there is changing (409)")
    if status == 429:
        return LinkDown(f"{url}: too many failed authentications (429)")
    return LinkDown(f"{url} answered {status}: {said}")


def _said(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def decoded(text: bytes | str) -> dict[str, Any] | None:
    """`text` as a JSON object, with acpctl's one decoder; None for anything else."""
    try:
        value = decode_text(text if isinstance(text, str) else text.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def json_object(text: str) -> dict[str, Any]:
    """`text` as a JSON object; {} for anything else (the callers look for a key)."""
    return decoded(text) or {}


# -- lines over ssh -----------------------------------------------------------------------


@dataclass
class LinesTransport:
    """JSON-RPC lines with the remote host's unix socket, through `serve --bridge` on
    the other end of an ssh process."""

    process: asyncio.subprocess.Process
    connection_id: str = ""
    resumed: bool = False
    remote_version: str | None = None
    _cursor: str | None = None
    _errors: list[str] = field(default_factory=list)  # ssh's stderr, its last lines
    _stderr_task: asyncio.Task[None] | None = None
    _first: list[str] = field(default_factory=list)

    async def send(self, text: str) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(text.encode() + b"\n")
            await stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise LinkDown("the ssh connection closed") from exc

    async def receive(self) -> str | None:
        if self._first:
            return self._first.pop(0)
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            try:
                line = await stdout.readline()
            except (ConnectionError, ValueError):  # ValueError: a line past the limit
                return None
            if not line:
                return None
            if acp.HOST_LOG.encode() in line and _log_line(line):
                continue
            return line.decode("utf-8", "replace").rstrip("\n")

    def took(self, cursor: str) -> None:
        self._cursor = cursor

    def resume_point(self) -> ResumePoint | None:
        if not self.connection_id:
            return None
        return ResumePoint(self.connection_id, {"": self._cursor or NOTHING_YET})

    def peer_certificate(self) -> dict[str, Any] | None:
        return None  # ssh's own host key checks the remote

    @property
    def close_reason(self) -> str:
        tail = "; ".join(self._errors[-2:])
        return f"ssh ended ({tail})" if tail else "ssh ended"

    async def close(self, leaving: bool) -> None:
        if leaving and self.process.returncode is None:
            with contextlib.suppress(Exception):
                await self.send(json.dumps(jsonrpc.notification(acp.HOST_LEAVE, {})))
        stdin = self.process.stdin
        if stdin is not None:
            with contextlib.suppress(Exception):
                stdin.close()
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.process.wait(), 5)
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
        if self._stderr_task is not None:
            self._stderr_task.cancel()


def ssh_argv(remote: Remote) -> list[str]:
    """ssh with the user's own configuration (keys, agent, jump hosts, ControlMaster),
    never asking for a password on the editor's pipe, and with keepalives that tell a dead
    link within about 15 s. The remote command is one word list, quoted for the remote
    shell."""
    assert remote.ssh is not None
    remote_command = [*shlex.split(remote.remote_acpctl), "serve", "--bridge"]
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


async def open_ssh(remote: Remote, resume_from: ResumePoint | None) -> LinesTransport:
    argv = ssh_argv(remote)
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
    transport = LinesTransport(process)
    transport._stderr_task = asyncio.ensure_future(_read_errors(process, transport._errors))
    if resume_from is not None:
        first = jsonrpc.request(
            0,
            acp.STREAM_RESUME,
            {"connectionId": resume_from.connection_id, "cursor": resume_from.cursors.get("")},
        )
    else:
        params = {
            "agent": remote.remote_agent,
            "resumable": True,
            "log": True,
            "version": __version__,
        }
        first = jsonrpc.request(0, acp.HOST_CONNECT, params)
    try:
        await transport.send(json.dumps(first))
        answer = await asyncio.wait_for(_first_answer(transport), OPEN_TIMEOUT_S)
    except (LinkDown, asyncio.TimeoutError) as exc:
        await transport.close(leaving=False)
        raise _ssh_failure(remote, process, transport._errors, exc) from exc
    if answer is None:
        await transport.close(leaving=False)
        raise _ssh_failure(remote, process, transport._errors, None)
    if "error" in answer:
        await transport.close(leaving=False)
        error = answer["error"]
        said = error.get("message") if isinstance(error, dict) else error
        if resume_from is not None:
            raise ResumeRefused(str(said))
        raise LinkRefused(f"the session host on {remote.ssh} refused: {said}")
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
        version = result.get("version", "older than 0.3")
        raise LinkRefused(
            f"acpctl {version} on {remote.ssh} cannot hold a resumable connection: "
            f"upgrade it there to acpctl {__version__} (pipx upgrade acp-ctl)"
        )
    transport.connection_id = connection_id
    transport.remote_version = str(result.get("version"))
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


def _log_line(line: bytes) -> bool:
    """The remote agent's log line (the host's `_acpctl/log`), written to stderr."""
    message = json_object(line.decode("utf-8", "replace"))
    if message.get("method") != acp.HOST_LOG:
        return False
    params = message.get("params")
    if isinstance(params, dict) and isinstance(params.get("message"), str):
        sys.stderr.write(f"acpctl: remote: {params['message']}\n")
    return True
