"""Downloads from the network, bounded: only https (http to this machine alone), an
overall deadline, a size limit, and one line for every way one fails. The registry's
document and agents' archives both come through here."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.client import HTTPMessage, HTTPResponse
from typing import IO

from acpctl import __version__
from acpctl.agents.limits import DEFAULT_LIMITS, RATE_WINDOW_S
from acpctl.config import is_loopback
from acpctl.errors import AcpctlError

CHUNK = 1 << 16
# One read may wait this long for a byte (the overall deadline bounds them all).
READ_TIMEOUT_S = 30.0


def check_url(url: str) -> None:
    """https anywhere, http only to a loopback address; anything else (file://, ftp://)
    is refused: a registry's URL must not read this machine's files."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return
    raise AcpctlError(f"{url}: only https URLs (and http to this machine) are fetched; refused")


class Response:
    """An open download: its headers, and its body read within the deadline and limit."""

    def __init__(
        self,
        url: str,
        stream: HTTPResponse,
        headers: dict[str, str],
        deadline: float,
        min_rate: int,
        rate_window_s: float,
    ) -> None:
        self.url = url
        self.headers = headers
        self._stream = stream
        self._deadline = deadline
        self._min_rate = min_rate  # bytes a second over each rate window (0: none)
        self._rate_window_s = rate_window_s

    @property
    def length(self) -> int | None:
        return int(self.headers.get("content-length") or 0) or None

    def chunks(self, limit: int) -> Iterator[bytes]:
        """The body, a chunk at a time; AcpctlError past `limit` bytes, the deadline, or
        below the minimum rate over a window (checked after every read, each of which
        waits at most READ_TIMEOUT_S)."""
        total = 0
        window_start, window_bytes = time.monotonic(), 0
        while True:
            now = time.monotonic()
            if now > self._deadline:
                raise AcpctlError(f"{self.url}: the download took too long; stopped")
            if now - window_start >= self._rate_window_s:
                rate = window_bytes / (now - window_start)
                if rate < self._min_rate:
                    raise AcpctlError(
                        f"{self.url} sent {rate:.0f} bytes a second over {now - window_start:.0f}"
                        f" s, below the minimum of {self._min_rate} (--min-rate); stopped"
                    )
                window_start, window_bytes = now, 0
            try:
                # read1: what one receive brings; read(n) would wait for all n bytes,
                # which a trickling server never sends within any deadline
                chunk = self._stream.read1(CHUNK)
            except OSError as exc:  # a timed-out read, a reset connection
                raise AcpctlError(f"downloading {self.url}: {exc}") from None
            if not chunk:
                return
            total += len(chunk)
            window_bytes += len(chunk)
            if total > limit:
                raise AcpctlError(f"{self.url} sent more than {limit >> 20} MiB; stopped")
            yield chunk

    def read(self, limit: int) -> bytes:
        return b"".join(self.chunks(limit))


def open_url(
    url: str,
    timeout: float,
    headers: dict[str, str] | None = None,
    min_rate: int = DEFAULT_LIMITS.min_rate,
    rate_window_s: float = RATE_WINDOW_S,
) -> Response:
    """Open `url` (check_url's rules) with `timeout` seconds for the whole download, and
    `min_rate` bytes a second at least over each `rate_window_s`.
    Raises urllib.error.HTTPError for an HTTP error status (the caller decides what a 304
    or a 404 means) and AcpctlError for everything else that fails."""
    check_url(url)
    request = urllib.request.Request(url, headers={"User-Agent": f"acpctl/{__version__}"})
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    deadline = time.monotonic() + timeout
    try:
        stream = urllib.request.build_opener(_NoDowngrade).open(
            request, timeout=min(READ_TIMEOUT_S, timeout)
        )
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AcpctlError(f"cannot reach {url} ({reason}); offline?") from None
    headers_seen = {k.lower(): v for k, v in stream.headers.items()}
    return Response(url, stream, headers_seen, deadline, min_rate, rate_window_s)


class _NoDowngrade(urllib.request.HTTPRedirectHandler):
    """Redirects follow the same rules as the URL itself: never to file://, nor from
    https to http elsewhere."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        check_url(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)
