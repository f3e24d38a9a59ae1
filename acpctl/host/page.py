"""The host's page (the files in acpctl/host/web/), served at PAIR_PATH and under ASSETS
behind the door's Host check, with a Content-Security-Policy that allows no inline script
and nothing from another origin.

POST PAIR_PATH exchanges a one-time pairing code (host/devices.py) for the device's
cookie and key. It takes JSON only, since a form on another site cannot send JSON without asking
first. It takes it from the page's own origin only, and every wrong code counts as a
failed authentication. docs/web.md says what each measure stops."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from aiohttp import hdrs, web

from acpctl.errors import AcpctlError
from acpctl.host.door import Door

PAIR_PATH = "/pair"
ASSETS = "/assets/"
WEB = Path(__file__).parent / "web"
PAGES = {"/": "index.html", PAIR_PATH: "pair.html"}
CONTENT_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
}
MAX_PAIR_BODY = 4096
DEVICE_COOKIE_AGE_S = 400 * 24 * 3600  # browsers keep a cookie at most 400 days
# Nothing runs but the host's own scripts, nothing loads from elsewhere, nothing frames it.
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PRIVATE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def add_routes(app: web.Application, door: Door, log: logging.Logger) -> None:
    app.router.add_get("/", lambda request: _file(door, request))
    app.router.add_get(PAIR_PATH, lambda request: _file(door, request))
    app.router.add_get(ASSETS + "{name}", lambda request: _file(door, request))
    app.router.add_post(PAIR_PATH, lambda request: _pair(door, log, request))


def _refuse(status: int, why: str) -> web.Response:
    refused = web.json_response({"error": why}, status=status)
    refused.force_close()
    return refused


async def _file(door: Door, request: web.Request) -> web.StreamResponse:
    """One of the page's own files, by name: nothing else."""
    refused = door.host_refusal(request)
    if refused is not None:
        refused.force_close()
        return refused
    name = PAGES.get(request.path) or request.path.removeprefix(ASSETS)
    path = WEB / name
    if "/" in name or name.startswith(".") or path.suffix not in CONTENT_TYPES:
        return _refuse(404, "no such page")
    if not path.is_file():
        return _refuse(404, "no such page")
    return web.Response(
        body=path.read_bytes(),
        content_type=CONTENT_TYPES[path.suffix],
        charset="utf-8",
        headers={"Content-Security-Policy": PAGE_POLICY, **PRIVATE_HEADERS},
    )


async def _pair(door: Door, log: logging.Logger, request: web.Request) -> web.StreamResponse:
    """A one-time code exchanged for the device's two secrets (host/devices.py): the cookie
    (HttpOnly: the page's script never holds it; SameSite=Strict: no other site's request
    carries it) and the key, in the answer, which the page keeps in its origin's storage.
    All or nothing: a device whose answer could not be recorded or sent is not paired."""
    refused = door.host_refusal(request)
    if refused is None and request.headers.get(hdrs.ORIGIN) != door.page_origin(request):
        refused = _refuse(403, "pairing is done from the host's own page")
    elif refused is None and request.content_type != "application/json":
        refused = _refuse(415, "Content-Type must be application/json")
    elif refused is None and (request.content_length or 0) > MAX_PAIR_BODY:
        refused = _refuse(413, "a pairing request is a few bytes")
    if refused is not None:
        refused.force_close()
        return refused
    code = None
    try:
        body = await asyncio.wait_for(request.content.read(MAX_PAIR_BODY), door.body_timeout_s)
        sent = json.loads(body)
        code = sent.get("code") if isinstance(sent, dict) else None
    except (asyncio.TimeoutError, ValueError, RecursionError):
        pass
    try:
        redeemed = door.devices.redeem(code) if door.devices and isinstance(code, str) else None
    except AcpctlError as exc:  # its record cannot be written (a full disk): not paired
        log.warning("session host: %s", exc.message)
        return _refuse(507, exc.message)
    if redeemed is None:
        refused = door.failed(request) or _refuse(
            403, "this pairing code is wrong, used or expired (a new one: acpctl serve --pair)"
        )
        refused.force_close()
        log.info("refused a pairing from %s: %d", request.remote, refused.status)
        return refused
    assert door.devices is not None and isinstance(code, str)
    device, credential, key = redeemed
    response = web.json_response({"name": device.name, "role": device.role, "key": key})
    response.headers.update(PRIVATE_HEADERS)
    response.set_cookie(
        door.cookie,
        credential,
        max_age=DEVICE_COOKIE_AGE_S,
        path="/",
        secure=door.secure,
        httponly=True,
        samesite="Strict",
    )
    try:
        await response.prepare(request)
        await response.write_eof()
    except (ConnectionError, RuntimeError) as exc:  # the page went before it had both
        door.devices.unpair(device, code)
        log.info(
            "session host: device %r not paired: its answer was not sent (%s)", device.name, exc
        )
        return response
    log.info("session host: device %r paired (%s)", device.name, device.role)
    return response
