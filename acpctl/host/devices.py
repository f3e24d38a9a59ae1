"""Devices paired with the session host (a phone's browser, say), and the one-time codes
that pair them.

`acpctl serve --pair` asks the running host for a pairing code. The code is random, good
for PAIR_CODE_TTL_S and for one use, and goes in the pairing URL's fragment: a browser
sends no fragment to any server or proxy. The page exchanges the code (POST /pair) for a
device credential, which the host sets as an HttpOnly, SameSite=Strict cookie (Secure
under TLS). The page's script never sees the credential, and no other site can send it.
The file keeps each device's name, role, when it was paired and last seen, and a SHA-256
digest of its credential, never the credential itself (0600, in the config directory).
A revoked device's credential matches nothing from then on; the host also ends the
device's live connections."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from acpctl import paths
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.files import atomic_write, read_regular

PAIR_CODE_TTL_S = 300.0
MAX_CODES = 16  # pairing codes outstanding at once: past it, the oldest lapses
MAX_DEVICES = 256
CREDENTIAL_BYTES = 32
CODE_BYTES = 16
MAX_NAME = 64
SEEN_WRITE_EVERY_S = 60.0  # a device's last-seen time reaches the file at most this often


@dataclass
class Device:
    name: str
    role: str
    digest: str  # hex SHA-256 of the credential
    paired: float  # epoch seconds
    last_seen: float | None = None


@dataclass
class _Code:
    digest: str
    role: str
    name: str
    expires: float  # monotonic


def checked_name(name: str) -> str:
    """A device name as `--name` or `--revoke` gives it: what `--devices` shows."""
    if not name or len(name) > MAX_NAME or not name.isprintable() or name != name.strip():
        raise AcpctlError(
            f"a device name is 1 to {MAX_NAME} printable characters, without spaces around"
        )
    return name


def _digest(secret: str) -> str:
    # surrogateescape: a cookie that is not UTF-8 is a wrong credential, not an error
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


class Devices:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.host_devices()
        self.by_name: dict[str, Device] = self._read()
        self._codes: list[_Code] = []
        self._written_seen: dict[str, float] = {}

    # -- pairing ----------------------------------------------------------------------

    def pairing_code(self, role: str, name: str | None) -> tuple[str, str]:
        """A new one-time code that pairs a device of `role` named `name` (else the next
        free "device N"): the code, and the name the device will have."""
        if role not in (acp.CONTROLLER, acp.OBSERVER):
            raise AcpctlError(f"no device role {role!r}")
        now = time.monotonic()
        self._codes = [c for c in self._codes if c.expires > now][-(MAX_CODES - 1) :]
        if name is None:
            taken = set(self.by_name) | {c.name for c in self._codes}
            name = next(
                f"device {n}" for n in range(1, MAX_DEVICES + 2) if f"device {n}" not in taken
            )
        name = checked_name(name)
        if name in self.by_name or any(c.name == name for c in self._codes):
            raise AcpctlError(
                f"a device named {name!r} is paired already (or waits to be)",
                hint=f"first: acpctl serve --revoke {name!r}; or choose another --name",
            )
        if len(self.by_name) >= MAX_DEVICES:
            raise AcpctlError(f"{MAX_DEVICES} devices are paired: revoke one first")
        code = secrets.token_urlsafe(CODE_BYTES)
        self._codes.append(_Code(_digest(code), role, name, now + PAIR_CODE_TTL_S))
        return code, name

    def redeem(self, code: str) -> tuple[Device, str] | None:
        """The device a valid code pairs (written to the file) and its credential; None for
        a code that is wrong, used or lapsed. Every outstanding code is compared."""
        now = time.monotonic()
        presented = _digest(code)
        found = None
        for waiting in self._codes:
            if hmac.compare_digest(presented, waiting.digest) and waiting.expires > now:
                found = waiting
        if found is None:
            return None
        self._codes.remove(found)
        credential = secrets.token_urlsafe(CREDENTIAL_BYTES)
        device = Device(found.name, found.role, _digest(credential), time.time())
        self.by_name[device.name] = device
        self._write()
        return device, credential

    # -- the paired devices -------------------------------------------------------------

    def device_of(self, credential: str) -> Device | None:
        """The device whose credential this is (each compared, in constant time)."""
        presented = _digest(credential)
        found = None
        for device in self.by_name.values():
            if hmac.compare_digest(presented, device.digest):
                found = device
        return found

    def seen(self, device: Device) -> None:
        """The device came in now: kept, and written at most every SEEN_WRITE_EVERY_S."""
        device.last_seen = time.time()
        if time.monotonic() - self._written_seen.get(device.name, -SEEN_WRITE_EVERY_S) >= (
            SEEN_WRITE_EVERY_S
        ):
            self._written_seen[device.name] = time.monotonic()
            self._write()

    def revoke(self, name: str) -> Device:
        """The device named `name`, unpaired; AcpctlError when there is none."""
        device = self.by_name.pop(name, None)
        if device is None:
            known = ", ".join(sorted(self.by_name)) or "none"
            raise AcpctlError(f"no device named {name!r} (paired: {known})")
        self._write()
        return device

    def listed(self) -> list[dict[str, object]]:
        """The devices as `acpctl serve --devices` shows them: no digest."""
        return [
            {"name": d.name, "role": d.role, "paired": d.paired, "lastSeen": d.last_seen}
            for d in sorted(self.by_name.values(), key=lambda d: d.paired)
        ]

    # -- the file -----------------------------------------------------------------------

    def _read(self) -> dict[str, Device]:
        data = read_regular(self.path)
        if data is None:
            if self.path.exists() or self.path.is_symlink():
                raise AcpctlError(f"{self.path} is not a regular file")
            return {}
        if self.path.stat().st_mode & 0o077:
            raise AcpctlError(f"{self.path} can be read by other users; `chmod 600 {self.path}`")
        try:
            stored = json.loads(data)
            devices = [Device(**entry) for entry in stored["devices"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise AcpctlError(
                f"{self.path} is not a devices file ({exc})",
                hint="remove it: every device then pairs again",
            ) from exc
        return {device.name: device for device in devices}

    def _write(self) -> None:
        paths.ensure_private_dir(self.path.parent)
        document = {"devices": [asdict(device) for device in self.by_name.values()]}
        atomic_write(self.path, (json.dumps(document, indent=2) + "\n").encode())
