"""A loopback HTTP server for the registry tests: serves what a test puts in `routes`
(path -> body), with an ETag per body that makes a repeated conditional GET a 304."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RegistryServer:
    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.routes: dict[str, bytes] = {}
        self.requests: list[tuple[str, int]] = []  # (path, status answered)

    def url(self, path: str) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}{path}"


@contextmanager
def serve() -> Iterator[RegistryServer]:
    state: RegistryServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = state.routes.get(self.path)
            if body is None:
                self._answer(404, b"not found")
                return
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            if self.headers.get("If-None-Match") == etag:
                self._answer(304, b"", etag)
                return
            self._answer(200, body, etag)

        def do_HEAD(self) -> None:
            self.do_GET()  # _answer leaves the body out

        def _answer(self, status: int, body: bytes, etag: str | None = None) -> None:
            state.requests.append((self.path, status))
            self.send_response(status)
            if etag:
                self.send_header("ETag", etag)
            if status != 304:
                self.send_header("Content-Length", str(len(body)))
                kind = "text/html" if self.path.endswith("/") else "application/octet-stream"
                self.send_header("Content-Type", kind)
            self.end_headers()
            if status != 304 and self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = RegistryServer(server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
