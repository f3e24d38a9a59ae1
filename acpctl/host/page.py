"""The host's page (the files in acpctl/host/web/), served at PAIR_PATH and under ASSETS
behind the door's Host check, with a Content-Security-Policy that allows no inline script
but the page's import map (by its hash) and nothing from another origin. Its assets go
compressed (brotli or gzip, made once at start) under content-hashed names a browser
keeps for good, so a reload moves the page alone; the page and the API are never cached.
The installable web app's manifest and its service worker (web/sw.js, which shows Web
Push notifications: host/push.py) are served at the root.

POST PAIR_PATH exchanges a one-time pairing code (host/devices.py) for the device's
cookie and key. It takes JSON only, since a form on another site cannot send JSON without asking
first. It takes it from the page's own origin only, and every wrong code counts as a
failed authentication. docs/web.md says what each measure stops."""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from aiohttp import hdrs, web

from acpctl.errors import AcpctlError
from acpctl.host.door import Door

PAIR_PATH = "/pair"
ASSETS = "/assets/"
WORKER_PATH = "/sw.js"  # the service worker: at the root, so that its scope is the page
MANIFEST_PATH = "/manifest.webmanifest"
WEB = Path(__file__).parent / "web"
PAGES = {"/": "index.html", PAIR_PATH: "pair.html"}
CONTENT_TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
NOT_SERVED = {"sw.js"}  # served at WORKER_PATH only
MAX_PAIR_BODY = 4096
DEVICE_COOKIE_AGE_S = 400 * 24 * 3600  # browsers keep a cookie at most 400 days
PRIVATE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# An asset under its content-hashed name never changes: kept by the browser for a year.
IMMUTABLE = "public, max-age=31536000, immutable"
# Under its plain name (the worker's imports, the manifest's icons): asked again each time,
# answered 304 while it is the same.
REVALIDATED = "no-cache"
MANIFEST = {
    "name": "acpctl",
    "short_name": "acpctl",
    "description": "What your coding agents ask, answered from here.",
    "start_url": "/",
    "scope": "/",
    "display": "standalone",
    "background_color": "#0d1117",
    "theme_color": "#1f6feb",
}
ICONS = (
    ("icon.svg", "any", "image/svg+xml"),
    ("icon-192.png", "192x192", "image/png"),
    ("icon-512.png", "512x512", "image/png"),
)


def page_policy(script_hashes: tuple[str, ...] = ()) -> str:
    """Nothing runs but the host's own scripts (and the page's import map, by its hash),
    nothing loads from elsewhere, nothing frames it; its worker is its own."""
    hashes = "".join(f" 'sha256-{h}'" for h in script_hashes)
    return (
        f"default-src 'none'; script-src 'self'{hashes}; style-src 'self'; "
        "connect-src 'self'; img-src 'self'; manifest-src 'self'; worker-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


@dataclass
class Encoded:
    """One response body, as sent to a browser that asks for each encoding: compressed
    once (`compress`), at brotli's best, which takes a second for all of the page's files:
    done beside the host's start (Site.ready), not in its way."""

    identity: bytes
    gzip: bytes = b""
    br: bytes = b""

    def compress(self) -> None:
        import brotli

        self.gzip = gzip.compress(self.identity, 9, mtime=0)
        self.br = brotli.compress(self.identity, quality=11)

    def chosen(self, accepted: str) -> tuple[bytes, str | None]:
        """The smallest body the browser accepts, and its Content-Encoding."""
        offered = {part.split(";")[0].strip().lower() for part in accepted.split(",")}
        if "br" in offered and self.br:
            return self.br, "br"
        if "gzip" in offered and self.gzip:
            return self.gzip, "gzip"
        return self.identity, None


@dataclass(frozen=True)
class Asset:
    name: str
    hashed: str  # NAME.HASH.EXT: the name the page uses
    content_type: str
    body: Encoded
    etag: str


class Site:
    """The page's files as served: each asset under its content-hashed name (immutable)
    and its plain name (revalidated), compressed ahead; the pages with the hashed names
    and an import map that maps each module's plain address to its hashed one, so that a
    module imports `./x.js` and gets the version of its own release."""

    def __init__(self, directory: Path = WEB) -> None:
        self.assets: dict[str, Asset] = {}
        for path in sorted(directory.iterdir()):
            if (
                path.suffix not in CONTENT_TYPES
                or path.name in NOT_SERVED
                or path.suffix == ".html"
            ):
                continue
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()[:12]
            hashed = f"{path.stem}.{digest}{path.suffix}"
            self.assets[path.name] = Asset(
                path.name, hashed, CONTENT_TYPES[path.suffix], Encoded(data), f'"{digest}"'
            )
        self.hashed = {asset.hashed: asset for asset in self.assets.values()}
        imports = {
            ASSETS + a.name: ASSETS + a.hashed
            for a in self.assets.values()
            if a.name.endswith(".js")
        }
        import_map = json.dumps({"imports": imports}, separators=(",", ":"))
        map_hash = base64.b64encode(hashlib.sha256(import_map.encode()).digest()).decode()
        self.policy = page_policy((map_hash,))
        self.pages: dict[str, Encoded] = {}
        for address, name in PAGES.items():
            html = (directory / name).read_text()
            for asset in self.assets.values():
                html = html.replace(f'"{ASSETS}{asset.name}"', f'"{ASSETS}{asset.hashed}"')
            first_script = html.index("<script")
            html = (
                html[:first_script]
                + f'<script type="importmap">{import_map}</script>\n'
                + html[first_script:]
            )
            self.pages[address] = Encoded(html.encode())
        self.worker = Encoded((directory / "sw.js").read_bytes())
        self.worker_etag = f'"{hashlib.sha256(self.worker.identity).hexdigest()[:12]}"'
        manifest = {
            **MANIFEST,
            "icons": [
                {"src": ASSETS + self.assets[name].hashed, "sizes": sizes, "type": kind}
                for name, sizes, kind in ICONS
                if name in self.assets
            ],
        }
        self.manifest = Encoded(json.dumps(manifest, indent=1).encode())
        self._compressed: asyncio.Future[None] | None = None

    def bodies(self) -> list[Encoded]:
        return [
            *(asset.body for asset in self.assets.values()),
            *self.pages.values(),
            self.worker,
            self.manifest,
        ]

    def compress(self) -> None:
        for body in self.bodies():
            body.compress()

    def begin(self) -> None:
        """Every body compressed, in a thread: begun at the host's start."""
        if self._compressed is None:
            self._compressed = asyncio.get_running_loop().run_in_executor(None, self.compress)

    async def ready(self) -> None:
        """Until every body is compressed (a request in the host's first second waits)."""
        self.begin()
        assert self._compressed is not None
        await asyncio.shield(self._compressed)


def add_routes(app: web.Application, door: Door, log: logging.Logger) -> None:
    site = Site()
    for address in PAGES:
        app.router.add_get(address, lambda request: _page(door, site, request))
    app.router.add_get(ASSETS + "{name}", lambda request: _asset(door, site, request))
    app.router.add_get(WORKER_PATH, lambda request: _worker(door, site, request))
    app.router.add_get(MANIFEST_PATH, lambda request: _manifest(door, site, request))
    app.router.add_post(PAIR_PATH, lambda request: _pair(door, log, request))

    async def compressing(app: web.Application) -> None:
        site.begin()

    app.on_startup.append(compressing)


def _refuse(status: int, why: str) -> web.Response:
    refused = web.json_response({"error": why}, status=status)
    refused.force_close()
    return refused


def _sent(
    request: web.Request,
    body: Encoded,
    content_type: str,
    headers: dict[str, str],
    etag: str | None = None,
) -> web.Response:
    """`body` in the encoding the browser asks for; 304 when it has this version."""
    if etag is not None and request.headers.get(hdrs.IF_NONE_MATCH) == etag:
        return web.Response(status=304, headers={**headers, "ETag": etag})
    data, encoding = body.chosen(request.headers.get(hdrs.ACCEPT_ENCODING, ""))
    response = web.Response(body=data, content_type=content_type, charset="utf-8", headers=headers)
    response.headers["Vary"] = "Accept-Encoding"
    if encoding is not None:
        response.headers["Content-Encoding"] = encoding
    if etag is not None:
        response.headers["ETag"] = etag
    return response


def _host_refused(door: Door, request: web.Request) -> web.Response | None:
    refused = door.host_refusal(request)
    if refused is not None:
        refused.force_close()
    return refused


async def _page(door: Door, site: Site, request: web.Request) -> web.StreamResponse:
    refused = _host_refused(door, request)
    if refused is not None:
        return refused
    await site.ready()
    headers = {"Content-Security-Policy": site.policy, **PRIVATE_HEADERS}
    return _sent(request, site.pages[request.path], "text/html", headers)


async def _asset(door: Door, site: Site, request: web.Request) -> web.StreamResponse:
    """One of the page's own files, by its hashed name or its plain one: nothing else."""
    refused = _host_refused(door, request)
    if refused is not None:
        return refused
    name = request.match_info["name"]
    asset = site.hashed.get(name)
    cache = IMMUTABLE
    if asset is None:
        asset, cache = site.assets.get(name), REVALIDATED
    if asset is None:
        return _refuse(404, "no such page")
    await site.ready()
    headers = {
        "Content-Security-Policy": site.policy,
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": cache,
    }
    return _sent(request, asset.body, asset.content_type, headers, asset.etag)


async def _worker(door: Door, site: Site, request: web.Request) -> web.StreamResponse:
    """The service worker: revalidated at every check, so that a new release's reaches the
    device at its next visit."""
    refused = _host_refused(door, request)
    if refused is not None:
        return refused
    await site.ready()
    headers = {
        "Content-Security-Policy": site.policy,
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": REVALIDATED,
    }
    return _sent(request, site.worker, "text/javascript", headers, site.worker_etag)


async def _manifest(door: Door, site: Site, request: web.Request) -> web.StreamResponse:
    refused = _host_refused(door, request)
    if refused is not None:
        return refused
    await site.ready()
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": REVALIDATED}
    return _sent(request, site.manifest, "application/manifest+json", headers)


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
            403, "this pairing code is wrong, used or expired (a new one: acpctl host pair)"
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
