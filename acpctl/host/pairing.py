"""`acpctl serve --pair`, `--devices` and `--revoke`: asked of the running host on its unix
socket (host/unix.py; the socket's permissions are the check), as `--rotate-token` is.
Pairing prints the page's address, with its one-time code in the fragment, and a QR code
of it for a phone's camera (segno)."""

from __future__ import annotations

import asyncio
import io
import json
import sys
import time
from typing import Any

from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.devices import checked_name
from acpctl.remote.host_socket import ask_host, read_status

NO_HOST = (
    "no session host runs: start one a device can reach (acpctl serve --listen 127.0.0.1:8765)"
)


def _asked(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The running host's answer; AcpctlError with its reason when there is none."""
    running = asyncio.run(read_status())
    if running is None:
        raise AcpctlError(NO_HOST)
    answer = asyncio.run(ask_host(method, params))
    result = answer.get("result") if isinstance(answer, dict) else None
    if isinstance(result, dict):
        return result
    error = answer.get("error") if isinstance(answer, dict) else None
    said = error.get("message") if isinstance(error, dict) else answer or "no answer"
    raise AcpctlError(f"the session host (pid {running['pid']}) refused: {said}")


def pair(observer: bool, name: str | None, public_url: str | None) -> int:
    """A one-time code from the running host: the address with it, and its QR code."""
    params: dict[str, Any] = {"role": acp.OBSERVER if observer else acp.CONTROLLER}
    if name is not None:
        params["name"] = checked_name(name)
    paired = _asked(acp.HOST_PAIR, params)
    url = str(paired["url"])
    if public_url is not None:  # the address the phone uses: a proxy's, a tailnet's
        url = public_url.rstrip("/") + url[url.index("/pair") :]
    import segno

    drawn = io.StringIO()
    segno.make(url, error="m").terminal(out=drawn, compact=True)
    sys.stdout.write(drawn.getvalue())
    minutes = float(paired["expiresIn"]) / 60
    sys.stdout.write(
        f"\n{url}\n\nOpen it on the device within {minutes:g} minutes, once: it pairs "
        f"{paired['name']!r} as {paired['role']} (to end it: acpctl serve --revoke "
        f"{paired['name']!r}).\n"
    )
    return 0


def devices(as_json: bool) -> int:
    listed = _asked(acp.HOST_DEVICES, {})["devices"]
    if as_json:
        sys.stdout.write(json.dumps(listed, indent=2) + "\n")
        return 0
    if not listed:
        sys.stdout.write("no device is paired (to pair one: acpctl serve --pair)\n")
        return 0
    width = max(len(str(device["name"])) for device in listed)
    for device in listed:
        seen = device.get("lastSeen")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(seen)) if seen else "never"
        sys.stdout.write(f"{device['name']:<{width}}  {device['role']:<10}  last seen {when}\n")
    return 0


def revoke(name: str) -> int:
    revoked = _asked(acp.HOST_REVOKE, {"name": name})
    sys.stderr.write(
        f"acpctl: device {revoked['name']!r} revoked; {revoked['ended']} connection(s) ended\n"
    )
    return 0
