"""Web Push: a question that has waited reaches a paired device whose page is closed.

The page's service worker subscribes at a push service (the browser's: Google's, Mozilla's,
Apple's) and the page hands the host that subscription: the push service's address (its
endpoint) and the keys a push is encrypted to. The host keeps it beside the device
(host/devices.py, 0600) and, when a question has waited `on_waiting_after_s`, POSTs one
push to each subscribed device's endpoint: signed with the host's VAPID key (made once,
0600), its payload encrypted as RFC 8291 says (aes128gcm), so the push service reads
nothing but the endpoint. With `push_agent_text = false` the payload says only which agent
waits, and the worker fetches the question from the host over an authenticated request.

pywebpush does the VAPID signature and the encryption. The host POSTs to an address a
device supplied, so only https endpoints on public addresses are used (a private or
loopback one only when config.toml allows its network): checked for a literal address, and
for a name at each connection by the resolver, so a name cannot turn private after the
check. A push service that says the subscription is gone (404, 410) has it dropped."""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from acpctl import paths
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.files import atomic_write, read_regular
from acpctl.host.devices import Devices
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.clients import Client

MAX_ENDPOINT = 2048  # characters: push services' addresses are a few hundred
MAX_KEY = 256  # a subscription's keys: 65 and 16 bytes, base64url
PUSH_TTL_S = 3600  # a push service keeps an undelivered push this long (the phone is off)
SEND_TIMEOUT_S = 10.0
GONE = (404, 410)  # the push service no longer has the subscription


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class VapidKey:
    """The host's VAPID key pair, made at the first use and kept (0600): the push service
    accepts pushes to a subscription only when signed by the key it was made for."""

    def __init__(self, path: Path | None = None) -> None:
        from py_vapid import Vapid02

        self.path = path or paths.host_push_key()
        pem = read_regular(self.path)
        if pem is None:
            made = Vapid02()
            made.generate_keys()
            paths.ensure_private_dir(self.path.parent)
            atomic_write(self.path, made.private_pem())
            pem = made.private_pem()
        elif self.path.stat().st_mode & 0o077:
            raise AcpctlError(f"{self.path} can be read by other users; `chmod 600 {self.path}`")
        self.vapid = Vapid02.from_pem(pem)

    @property
    def public(self) -> str:
        """The public key as a page's pushManager.subscribe() takes it (applicationServerKey:
        an uncompressed P-256 point, base64url)."""
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        point = self.vapid.public_key.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
        return _b64url(point)


def checked_subscription(sent: Any, allowed: tuple[str, ...]) -> JsonObject:
    """A page's PushSubscription (its toJSON()) as the host keeps it, or AcpctlError saying
    what is wrong: an https endpoint, not at a literal address outside `allowed`, and its
    two keys."""
    if not isinstance(sent, dict):
        raise AcpctlError("a push subscription is an object")
    endpoint = sent.get("endpoint")
    keys = sent.get("keys")
    if not isinstance(endpoint, str) or not 0 < len(endpoint) <= MAX_ENDPOINT:
        raise AcpctlError("a push subscription needs its endpoint")
    refused = endpoint_problem(endpoint, allowed)
    if refused is not None:
        raise AcpctlError(refused)
    if not isinstance(keys, dict) or not all(
        isinstance(keys.get(k), str) and 0 < len(keys[k]) <= MAX_KEY for k in ("p256dh", "auth")
    ):
        raise AcpctlError("a push subscription needs its keys p256dh and auth")
    return {"endpoint": endpoint, "keys": {"p256dh": keys["p256dh"], "auth": keys["auth"]}}


def endpoint_problem(endpoint: str, allowed: tuple[str, ...]) -> str | None:
    """Why the host will not POST to `endpoint`, or None: not https, or a literal address
    that is not public (a name's addresses are checked as it connects: PublicResolver)."""
    parts = urlsplit(endpoint)
    if parts.scheme != "https" or not parts.hostname:
        return f"a push endpoint must be an https:// address, not {endpoint[:80]!r}"
    try:
        address = ipaddress.ip_address(parts.hostname)
    except ValueError:
        return None
    if not reachable_address(address, allowed):
        return (
            f"a push endpoint at {address} is not a public address "
            "(a test's stand-in: [serve] push_allow_addresses)"
        )
    return None


def reachable_address(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, allowed: tuple[str, ...]
) -> bool:
    """Whether the host may POST to `address`: a public one, or one in `allowed`."""
    return address.is_global or any(address in ipaddress.ip_network(n) for n in allowed)


class PublicResolver(AbstractResolver):
    """aiohttp's resolver, less the addresses a push may not go to: a name that resolves
    to loopback or a private network (now, or after the subscription was checked) is not
    connected to."""

    def __init__(self, allowed: tuple[str, ...]) -> None:
        self._resolver = DefaultResolver()
        self._allowed = allowed

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._resolver.resolve(host, port, family)
        public = [
            entry
            for entry in found
            if reachable_address(ipaddress.ip_address(entry["host"]), self._allowed)
        ]
        if not public:
            raise OSError(f"{host} resolves to no public address: no push is sent there")
        return public

    async def close(self) -> None:
        await self._resolver.close()


@dataclass
class Pusher:
    """Sends the pushes: one per subscribed device, each on its own."""

    devices: Devices
    contact: str  # the VAPID `sub` claim: who the push service may write to
    allowed: tuple[str, ...]  # private networks an endpoint may be in ([serve])
    log: logging.Logger
    _key: VapidKey | None = None

    @property
    def key(self) -> VapidKey:
        """The VAPID key, made at the first push or subscription (not at every start)."""
        if self._key is None:
            self._key = VapidKey()
        return self._key

    def push_key(self, client: Client | None, params: Any) -> JsonObject:
        """What a device's page subscribes with (the VAPID public key), and whether this
        device has a subscription."""
        device = self.devices.by_name.get(client.device) if client and client.device else None
        if device is None:
            raise RpcError(acp.NOT_AUTHORISED, "pushes go to paired devices only")
        return {"publicKey": self.key.public, "subscribed": device.push is not None}

    def push_subscribe(self, client: Client | None, params: Any) -> JsonObject:
        """The device's subscription kept beside it (or dropped, with null). A controller
        device's only: an observer answers nothing."""
        if client is None or client.device is None or client.device not in self.devices.by_name:
            raise RpcError(acp.NOT_AUTHORISED, "pushes go to paired devices only")
        if not client.may_control:
            raise RpcError(acp.NOT_AUTHORISED, "an observer device is not asked questions")
        sent = params.get("subscription") if isinstance(params, dict) else None
        try:
            kept = None if sent is None else checked_subscription(sent, self.allowed)
            self.devices.subscribe(client.device, kept)
        except AcpctlError as exc:
            raise RpcError(acp.INVALID_PARAMS, exc.message) from exc
        self.log.info("device %r %s pushes", client.device, "gets" if kept else "gets no")
        return {"subscribed": kept is not None}

    def subscribed(self) -> list[str]:
        return [name for name, device in self.devices.by_name.items() if device.push]

    async def send(self, payload: JsonObject) -> dict[str, int | str]:
        """`payload` pushed to every subscribed device: what each push service answered
        (its status, or why nothing was sent)."""
        results: dict[str, int | str] = {}
        names = self.subscribed()
        if not names:
            return results
        connector = aiohttp.TCPConnector(resolver=PublicResolver(self.allowed))
        async with aiohttp.ClientSession(connector=connector) as http:
            for name in names:
                results[name] = await self._send_one(http, name, payload)
        return results

    async def _send_one(
        self, http: aiohttp.ClientSession, name: str, payload: JsonObject
    ) -> int | str:
        from pywebpush import WebPushException, webpush_async

        device = self.devices.by_name.get(name)
        subscription = device.push if device is not None else None
        if not subscription:
            return "unsubscribed meanwhile"
        refused = endpoint_problem(subscription["endpoint"], self.allowed)
        if refused is not None:
            self.log.warning("push to %s not sent: %s", name, refused)
            return refused
        try:
            response = await webpush_async(
                subscription,
                json.dumps(payload),
                vapid_private_key=self.key.vapid,
                vapid_claims={"sub": self.contact},
                ttl=PUSH_TTL_S,
                timeout=SEND_TIMEOUT_S,
                aiohttp_session=http,
                headers={"Urgency": "high"},
            )
            status = response.status if isinstance(response, aiohttp.ClientResponse) else 0
        except WebPushException as exc:
            status = exc.status_code or 0
            if status not in GONE:
                self.log.warning("push to %s refused by its push service: %s", name, exc)
                return status or str(exc)
        except (OSError, aiohttp.ClientError, TimeoutError) as exc:
            self.log.warning("push to %s not sent: %s", name, exc)
            return str(exc) or type(exc).__name__
        if status in GONE:
            self.log.info("push: %s's subscription is gone at its push service: dropped", name)
            self.devices.subscribe(name, None)
        else:
            self.log.info("push to %s: %s", name, status)
        return status
