"""Devices paired with the session host (a phone's browser, say), and the one-time codes
that pair them.

`acpctl host pair` asks the running host for a pairing code. The code is random, good
for PAIR_CODE_TTL_S and for one use, and goes in the pairing URL's fragment: a browser
sends no fragment to any server or proxy. The page exchanges the code (POST /pair) for two
secrets, and the host needs both:
- the credential, which the host sets as an HttpOnly, SameSite=Strict cookie (Secure under
  TLS): the page's script never sees it, and no other site can send it;
- the key, which the page keeps in its origin's IndexedDB and presents with each
  connection (a WebSocket subprotocol, or a header). Browsers keep a cookie for a host on
  every port, but an origin's storage for that origin alone: a server on another port of
  the same machine gets the cookie, never the key, so what it took is not enough.
The file keeps each device's name, role, when it was paired and last seen, and SHA-256
digests of its two secrets, never the secrets (0600, in the config directory). A revoked
device's secrets match nothing from then on; the host also ends the device's live
connections. Pairing is all or nothing: a device whose record could not be written, or
whose answer did not reach its page, is not paired, and its code still works."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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
    # hex SHA-256 of the key its page holds; none in a file from before keys: such a
    # device matches nothing, and pairs again
    key: str = ""
    # Its page's Web Push subscription (host/push.py): the push service's address and the
    # keys its pushes are encrypted to; None when it has none.
    push: dict[str, Any] | None = None


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
                hint=f"first: acpctl host revoke {name!r}; or choose another --name",
            )
        if len(self.by_name) >= MAX_DEVICES:
            raise AcpctlError(f"{MAX_DEVICES} devices are paired: revoke one first")
        code = secrets.token_urlsafe(CODE_BYTES)
        self._codes.append(_Code(_digest(code), role, name, now + PAIR_CODE_TTL_S))
        return code, name

    def redeem(self, code: str) -> tuple[Device, str, str] | None:
        """The device a valid code pairs (written to the file), its credential and its
        key; None for a code that is wrong, used or lapsed. Every outstanding code is
        compared. AcpctlError when the file cannot be written: then nothing changed."""
        now = time.monotonic()
        presented = _digest(code)
        found = None
        for waiting in self._codes:
            if hmac.compare_digest(presented, waiting.digest) and waiting.expires > now:
                found = waiting
        if found is None:
            return None
        credential = secrets.token_urlsafe(CREDENTIAL_BYTES)
        key = secrets.token_urlsafe(CREDENTIAL_BYTES)
        device = Device(
            found.name, found.role, _digest(credential), time.time(), None, _digest(key)
        )
        self.by_name[device.name] = device
        try:
            self._write()
        except OSError as exc:
            del self.by_name[device.name]
            raise AcpctlError(
                f"the device {device.name!r} is not paired: {self.path} cannot be written "
                f"({exc.strerror or exc}); the code still works once that is mended"
            ) from exc
        self._codes.remove(found)
        return device, credential, key

    def unpair(self, device: Device, code: str) -> None:
        """A device just paired whose answer never reached its page: not paired, and its
        code good again for the rest of its time."""
        if self.by_name.get(device.name) is device:
            del self.by_name[device.name]
            with contextlib.suppress(OSError):
                self._write()
            self._codes.append(
                _Code(_digest(code), device.role, device.name, time.monotonic() + PAIR_CODE_TTL_S)
            )

    # -- the paired devices -------------------------------------------------------------

    def device_of(self, credential: str, key: str) -> Device | None:
        """The device whose credential and key these are (each compared, in constant
        time): the cookie alone, taken by another server of this machine, is not one."""
        presented, holding = _digest(credential), _digest(key)
        found = None
        for device in self.by_name.values():
            same_key = hmac.compare_digest(holding, device.key or "-")
            if hmac.compare_digest(presented, device.digest) and same_key:
                found = device
        return found

    def seen(self, device: Device) -> None:
        """The device came in now: kept, and written at most every SEEN_WRITE_EVERY_S (a
        file that cannot be written then, a full disk, is tried again the next time)."""
        device.last_seen = time.time()
        if time.monotonic() - self._written_seen.get(device.name, -SEEN_WRITE_EVERY_S) >= (
            SEEN_WRITE_EVERY_S
        ):
            with contextlib.suppress(OSError):
                self._write()
                self._written_seen[device.name] = time.monotonic()

    def revoke(self, name: str) -> Device:
        """The device named `name`, unpaired; AcpctlError when there is none."""
        device = self.by_name.pop(name, None)
        if device is None:
            known = ", ".join(sorted(self.by_name)) or "none"
            raise AcpctlError(f"no device named {name!r} (paired: {known})")
        self._write()
        return device

    def listed(self) -> list[dict[str, object]]:
        """The devices as `acpctl host devices` shows them: no digest."""
        return [
            {
                "name": d.name,
                "role": d.role,
                "paired": d.paired,
                "lastSeen": d.last_seen,
                "push": d.push is not None,
            }
            for d in sorted(self.by_name.values(), key=lambda d: d.paired)
        ]

    def subscribe(self, name: str, push: dict[str, Any] | None) -> None:
        """The device's Web Push subscription set (None: dropped), and written. AcpctlError
        when the file cannot be written: then nothing changed."""
        device = self.by_name.get(name)
        if device is None or device.push == push:
            return
        before, device.push = device.push, push
        try:
            self._write()
        except OSError as exc:
            device.push = before
            raise AcpctlError(f"{self.path} cannot be written ({exc.strerror or exc})") from exc

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
