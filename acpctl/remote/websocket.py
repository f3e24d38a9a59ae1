"""ACP's WebSocket profile as a transport of the link (aiohttp), and what both HTTP
profiles share (remote/streamable.py is the other): the token, the certificate check, what
an HTTP refusal is said as."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import ssl
import uuid
from pathlib import Path
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.config import Remote, shown_url
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

CONNECTION_ID_HEADER = "Acp-Connection-Id"
HEARTBEAT_S = 5.0  # WebSocket pings: a link silent for about twice this is dead
MAX_MESSAGE_BYTES = 16 << 20


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
