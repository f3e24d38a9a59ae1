"""What the unix socket may ask of the host's TCP side: a token rotated (the new token
from then on, the old one's connections ended), a device paired (a one-time code) or
revoked (its connections ended), the devices listed."""

from __future__ import annotations

import logging

from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.agents import AgentPool
from acpctl.host.devices import PAIR_CODE_TTL_S, Devices
from acpctl.host.door import Door
from acpctl.host.http import ENDPOINT
from acpctl.host.page import PAIR_PATH
from acpctl.host.registry import Connections
from acpctl.host.tokens import ROLES
from acpctl.host.tokens import rotate as rotate_token
from acpctl.jsonrpc import JsonObject


class TcpDoor:
    """The TCP listener's door and its logical connections, as what the unix socket asks
    changes them: a token rotated (the new token from then on, the old one's connections
    ended), a device paired (a one-time code) or revoked (its connections ended)."""

    def __init__(self, pool: AgentPool, log: logging.Logger, devices: Devices) -> None:
        self.door: Door | None = None  # with --listen
        self.connections = Connections(pool, log)
        self.devices = devices
        self.log = log
        self.listening: list[JsonObject] = []  # the TCP listener's address, once it listens

    def pair(self, params: JsonObject) -> JsonObject:
        """A one-time code that pairs a device, and the page's address it goes with."""
        if self.door is None or not self.listening:
            raise AcpctlError(
                "the session host has no TCP listener for a device to reach: restart it "
                "with one (acpctl host start --replace --listen 127.0.0.1:8765)"
            )
        role = params.get("role", acp.CONTROLLER)
        name = params.get("name")
        code, named = self.devices.pairing_code(str(role), name if isinstance(name, str) else None)
        page = page_address(str(self.listening[0]["address"]))
        self.log.info("session host: a pairing code for device %r (%s)", named, role)
        return {
            "name": named,
            "role": role,
            "expiresIn": PAIR_CODE_TTL_S,
            "code": code,
            "url": f"{page}{PAIR_PATH}#{code}",
        }

    def listed(self) -> JsonObject:
        return {"devices": self.devices.listed()}

    def revoke(self, params: JsonObject) -> JsonObject:
        """The device unpaired: its credential refused, its connections ended, now."""
        name = params.get("name")
        device = self.devices.revoke(str(name))
        ended = self.connections.end_device(device.name)
        self.log.info("session host: device %r revoked; %d connection(s) ended", name, ended)
        return {"name": device.name, "ended": ended}

    def rotate(self, params: JsonObject) -> JsonObject:
        role = params.get("role")
        if role not in ROLES:
            raise AcpctlError(f"no token role {role!r}: {' or '.join(ROLES)}")
        tokens = rotate_token(str(role))
        ended = 0
        if self.door is not None:
            self.door.tokens = tokens
            ended = self.connections.end_role(str(role))
        self.log.info(
            "session host: a new %s token; %d connection(s) with the old one ended", role, ended
        )
        return {"role": role, "ended": ended}


def page_address(address: str) -> str:
    """The host's page, from its listener's ACP address (wss://HOST:PORT/acp)."""
    return address.replace("wss://", "https://").replace("ws://", "http://").removesuffix(ENDPOINT)
