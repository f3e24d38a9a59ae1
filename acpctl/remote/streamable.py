"""ACP's Streamable HTTP profile, the client's side, as the SDKs speak it: each message a
POST (initialize answered in the body with a new `Acp-Connection-Id`; anything else 202,
its answer on a stream), and server-sent events on a GET: the connection's stream, and one
per session. A dropped stream is resumed with `Last-Event-ID` (the last event id it had);
a 409 or 404 there means the server no longer holds the connection.

A message that names a session (its params' `sessionId`; an answer, the session whose
stream asked) is POSTed with `Acp-Session-Id`, after that session's stream is open, as
the TypeScript SDK's client does: its server routes a session's answers (resume's, fork's)
to the session's stream, which it opens on request. A server that knows sessions only from
its own answers (the Python SDK's) refuses that stream with 404: the message then goes
without the header, and the session's stream is opened once an answer establishes it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from typing import Any

from acpctl import protocol as acp
from acpctl.config import shown_url
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
from acpctl.remote.websocket import CONNECTION_ID_HEADER, MAX_MESSAGE_BYTES, refusal

SESSION_ID_HEADER = "Acp-Session-Id"
SSE = "text/event-stream"
MAX_EVENT_BYTES = MAX_MESSAGE_BYTES + (64 << 10)  # a message, and its event's fields
CONNECTION_STREAM = ""
ESTABLISHING = frozenset(
    {acp.SESSION_NEW, acp.SESSION_LOAD, acp.SESSION_RESUME, acp.SESSION_FORK, acp.SESSION_ATTACH}
)
DEAD_AFTER_S = 5 * 15.0  # five silent keepalive intervals (the draft's rule)


class StreamableTransport:
    def __init__(
        self, http: Any, url: str, token: str | None, context: ssl.SSLContext | None
    ) -> None:
        self._http = http
        self._url = url
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._ssl: ssl.SSLContext | bool = context if context is not None else False
        self.connection_id = ""
        self.resumed = False
        self.remote_version: str | None = None  # the initialize answer names it
        self._inbox: asyncio.Queue[str | None] = asyncio.Queue()
        self._streams: dict[str, asyncio.Task[None]] = {}
        self._opened: dict[str, asyncio.Future[int]] = {}  # stream -> its GET's status
        self._cursors: dict[str, str] = {}  # stream -> the last event id it had
        # request id -> (method, the session its params name): what an answer establishes
        self._methods: dict[str, tuple[str, Any]] = {}
        self._asked_on: dict[str, str] = {}  # the server's request id -> its stream
        self.close_reason = "the connection dropped"
        self._closed = False

    # -- sending ------------------------------------------------------------------------

    async def send(self, text: str) -> None:
        message = json_object(text)
        method = message.get("method")
        params = message.get("params")
        session = params.get("sessionId") if isinstance(params, dict) else None
        if method in ESTABLISHING and "id" in message:
            self._methods[json.dumps(message["id"])] = (str(method), session)
        if not self.connection_id:
            if method != acp.INITIALIZE:
                raise LinkDown("a Streamable HTTP connection starts with initialize")
            await self._initialize(text)
            return
        headers = {**self._headers, CONNECTION_ID_HEADER: self.connection_id}
        if method is None and "id" in message:  # an answer, to the stream that asked
            session = self._asked_on.pop(json.dumps(message["id"]), None) or None
        if isinstance(session, str) and await self._session_stream(session):
            headers[SESSION_ID_HEADER] = session
        status, body = await self._post(text, headers)
        if status == 404:
            self._drop("the server no longer holds the connection (404)")
            raise LinkDown("the connection is gone (404)")
        if status >= 400:
            raise LinkDown(f"POST answered {status}: {body[:200]}")

    async def _session_stream(self, session: str) -> bool:
        """Whether the session's stream is open (opened now if need be, and answered): a
        server that refuses it knows the session only once an answer establishes it."""
        status = self._opened.get(session)
        if status is None:
            status = self._open_stream(session)
        try:
            return await asyncio.wait_for(asyncio.shield(status), OPEN_TIMEOUT_S) == 200
        except asyncio.TimeoutError as exc:
            raise LinkDown(f"the stream of session {session} did not open") from exc

    async def _initialize(self, text: str) -> None:
        status, body, connection_id = await self._post_initialize(text)
        if status != 200 or not connection_id:
            raise refusal(status, self._url, body[:200])
        self.connection_id = connection_id
        self._inbox.put_nowait(body)
        self._open_stream(CONNECTION_STREAM)

    async def _post(self, text: str, headers: dict[str, str]) -> tuple[int, str]:
        import aiohttp

        try:
            async with self._http.post(
                self._url,
                data=text.encode(),
                headers={**headers, "Content-Type": "application/json"},
                ssl=self._ssl,
            ) as response:
                return response.status, await response.text()
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise LinkDown(self._said(exc)) from exc

    async def _post_initialize(self, text: str) -> tuple[int, str, str | None]:
        import aiohttp

        headers = {
            **self._headers,
            "Content-Type": "application/json",
            "Accept": f"application/json, {SSE}",
        }
        try:
            async with self._http.post(
                self._url, data=text.encode(), headers=headers, ssl=self._ssl
            ) as response:
                body = await response.text()
                return response.status, body, response.headers.get(CONNECTION_ID_HEADER)
        except aiohttp.ClientConnectorCertificateError as exc:
            raise LinkRefused(
                f"the certificate of {shown_url(self._url)} was refused: {exc.certificate_error}"
            ) from exc
        except aiohttp.ClientConnectorDNSError as exc:
            said = f"{shown_url(self._url)}: its host name does not resolve"
            raise NoSuchHost(said) from exc
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise LinkDown(self._said(exc)) from exc

    # -- receiving ----------------------------------------------------------------------

    async def receive(self) -> str | None:
        text = await self._inbox.get()
        if text is not None:
            self._established(text)
        return text

    def _established(self, text: str) -> None:
        """An answer that establishes a session opens that session's stream."""
        if '"result"' not in text:
            return
        message = json_object(text)
        asked = self._methods.pop(json.dumps(message.get("id")), None)
        result = message.get("result")
        if asked is not None and isinstance(result, dict):
            session = result.get("sessionId", asked[1])
            opened = self._opened.get(session) if isinstance(session, str) else None
            if isinstance(session, str) and (opened is None or _refused(opened)):
                self._open_stream(session)

    def _open_stream(self, stream: str, after: str | None = None) -> asyncio.Future[int]:
        """The stream's GET, read from now on; the future is its status once it answers."""
        status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        status.add_done_callback(lambda done: done.exception())  # read: none is left unseen
        self._opened[stream] = status
        self._streams[stream] = asyncio.ensure_future(self._read_stream(stream, after, status))
        return status

    async def _read_stream(
        self, stream: str, after: str | None, status: asyncio.Future[int]
    ) -> None:
        import aiohttp

        headers = {**self._headers, CONNECTION_ID_HEADER: self.connection_id, "Accept": SSE}
        if stream:
            headers[SESSION_ID_HEADER] = stream
        if after is not None:
            headers["Last-Event-ID"] = after
        timeout = aiohttp.ClientTimeout(total=None, sock_read=DEAD_AFTER_S)
        try:
            async with self._http.get(
                self._url, headers=headers, ssl=self._ssl, timeout=timeout
            ) as response:
                status.set_result(response.status)
                if response.status == 404 and stream and not self.resumed:
                    # The server routes this session's messages on the connection's
                    # stream until an answer establishes the session (the Python SDK's).
                    return
                if response.status != 200:
                    self._drop(f"GET answered {response.status}")
                    return
                await self._events(stream, response)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            if not status.done():
                status.set_exception(LinkDown(self._said(exc)))
            self._drop(self._said(exc))
            return
        self._drop("a stream ended")

    async def _events(self, stream: str, response: Any) -> None:
        """Server-sent events, taken as the bytes come (a read a line costs more than an
        event's worth of work): each event's data to the inbox, its id kept as the
        stream's cursor; comments (keepalives) passed over."""
        pending = bytearray()
        async for chunk in response.content.iter_any():
            searched = max(len(pending) - 1, 0)  # a blank line may straddle two chunks
            pending += chunk
            if pending.find(b"\r", searched) >= 0:  # CRLF lines (a last \r waits for its \n)
                pending = bytearray(pending.replace(b"\r\n", b"\n"))
                searched = 0
            whole = pending.rfind(b"\n\n", searched)
            if whole < 0:
                if len(pending) > MAX_EVENT_BYTES:  # a line that never ends: not kept
                    self._drop(f"an event of more than {MAX_MESSAGE_BYTES >> 20} MiB")
                    return
                continue
            # The whole events decoded at once (an event ends on a blank line, so no
            # character is cut in two), the rest kept for the next chunk.
            events = pending[:whole].decode("utf-8", "replace")
            del pending[: whole + 2]
            for event in events.split("\n\n"):
                self._event(stream, event)

    def _event(self, stream: str, event: str) -> None:
        if event.startswith("id: "):  # the shape acpctl serve writes: id, then one data line
            end = event.find("\n")
            if event.startswith("data: ", end + 1) and event.find("\n", end + 1) < 0:
                self._cursors[stream] = event[4:end]
                self._taken(stream, event[end + 7 :])
                return
        event_id: str | None = None
        data: list[str] = []
        for line in event.split("\n"):
            if not line or line.startswith(":"):
                continue  # a keepalive comment
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "id":
                event_id = value
        if data:
            if event_id is not None:
                self._cursors[stream] = event_id
            self._taken(stream, "\n".join(data))

    def _taken(self, stream: str, text: str) -> None:
        """A message from a stream; a request's stream is where its answer goes."""
        if stream and '"id"' in text and '"method"' in text:  # a request, maybe
            message = json_object(text)
            if "method" in message and "id" in message:
                self._asked_on[json.dumps(message["id"])] = stream
        self._inbox.put_nowait(text)

    def _said(self, exc: BaseException) -> str:
        """What went wrong, without the URL's credentials or query."""
        return (str(exc) or type(exc).__name__).replace(self._url, shown_url(self._url))

    def _drop(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self.close_reason = reason
        self._inbox.put_nowait(None)

    def took(self, cursor: str) -> None:
        """Each stream's position is its SSE event ids (the same cursors), kept as read."""

    def peer_certificate(self) -> dict[str, Any] | None:
        return None  # verified per request by the HTTP client; not kept

    def resume_point(self) -> ResumePoint | None:
        if not self.connection_id:
            return None
        streams = [stream for stream, status in self._opened.items() if _answered_200(status)]
        return ResumePoint(self.connection_id, dict(self._cursors), streams)

    async def close(self, leaving: bool) -> None:
        self._closed = True
        for task in self._streams.values():
            task.cancel()
        if leaving and self.connection_id:
            headers = {**self._headers, CONNECTION_ID_HEADER: self.connection_id}
            with contextlib.suppress(Exception):
                async with self._http.delete(self._url, headers=headers, ssl=self._ssl):
                    pass


def _answered_200(status: asyncio.Future[int]) -> bool:
    return status.done() and status.exception() is None and status.result() == 200


def _refused(status: asyncio.Future[int]) -> bool:
    """The stream's GET was answered, with something else than 200."""
    return status.done() and status.exception() is None and status.result() != 200


async def open_streamable(
    http: Any,
    url: str,
    token: str | None,
    context: ssl.SSLContext | None,
    resume_from: ResumePoint | None,
) -> StreamableTransport:
    """A new connection (opened by the initialize the link sends first), or the streams
    of a held one resumed after their last event ids."""
    transport = StreamableTransport(http, url, token, context)
    if resume_from is None:
        return transport
    transport.connection_id = resume_from.connection_id
    transport.resumed = True
    transport._cursors = dict(resume_from.cursors)
    answered = [
        transport._open_stream(stream, resume_from.cursors.get(stream, NOTHING_YET))
        for stream in resume_from.streams or [CONNECTION_STREAM]
    ]
    try:
        statuses = await asyncio.wait_for(asyncio.gather(*answered), OPEN_TIMEOUT_S)
    except (LinkDown, asyncio.TimeoutError) as exc:
        await transport.close(leaving=False)
        raise LinkDown(str(exc) or "no answer to the resumed streams") from exc
    if any(status in (404, 409) for status in statuses):
        await transport.close(leaving=False)
        raise ResumeRefused("the server no longer holds the connection")
    if any(status != 200 for status in statuses):
        await transport.close(leaving=False)
        raise LinkDown(f"the resumed streams answered {statuses}")
    return transport
