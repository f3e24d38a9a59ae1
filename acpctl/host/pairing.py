"""`acpctl host pair`, `--devices` and `--revoke`: asked of the running host on its unix
socket (host/unix.py; the socket's permissions are the check), as `--rotate-token` is.
Pairing prints the page's address, with its one-time code in the fragment, and a QR code
of it for a phone's camera (segno), in black on white whatever the terminal's theme; with
--qr-png, as an image too."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.devices import checked_name
from acpctl.remote.host_socket import ask_host, read_status

NO_HOST = (
    "no session host runs: start one a device can reach (acpctl host start --listen 127.0.0.1:8765)"
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


# The QR code's colours, set explicitly (256-colour black on white): a camera reads dark
# modules on light, and a terminal's own colours are light on dark as often as not.
QR_COLOURS = "\x1b[38;5;16;48;5;231m"
RESET = "\x1b[0m"
# Two modules a character: the upper one, the lower one (dark: True).
HALF_BLOCKS = {(False, False): " ", (True, False): "▀", (False, True): "▄", (True, True): "█"}


def qr_text(url: str) -> str:
    """The QR code of `url` for a terminal: two rows of modules a line, with its quiet zone,
    black on white in explicit colours."""
    import segno

    rows = [[bool(m) for m in row] for row in segno.make(url, error="m").matrix_iter(border=4)]
    if len(rows) % 2:
        rows.append([False] * len(rows[0]))
    lines = [
        QR_COLOURS + "".join(HALF_BLOCKS[pair] for pair in zip(upper, lower, strict=True)) + RESET
        for upper, lower in zip(rows[::2], rows[1::2], strict=True)
    ]
    return "\n".join(lines) + "\n"


def pair(
    observer: bool, name: str | None, public_url: str | None, qr_png: str | None = None
) -> int:
    """A one-time code from the running host: the address with it, and its QR code (also
    written to `qr_png` as an image)."""
    params: dict[str, Any] = {"role": acp.OBSERVER if observer else acp.CONTROLLER}
    if name is not None:
        params["name"] = checked_name(name)
    paired = _asked(acp.HOST_PAIR, params)
    url = str(paired["url"])
    if public_url is not None:  # the address the phone uses: a proxy's, a tailnet's
        url = public_url.rstrip("/") + url[url.index("/pair") :]
    if qr_png is not None:
        import segno

        try:
            segno.make(url, error="m").save(qr_png, kind="png", scale=8, border=4)
        except OSError as exc:
            raise AcpctlError(f"{qr_png}: {exc.strerror or exc}") from exc
    sys.stdout.write(qr_text(url))
    minutes = float(paired["expiresIn"]) / 60
    sys.stdout.write(
        f"\n{url}\n\nOpen it on the device within {minutes:g} minutes, once: it pairs "
        f"{paired['name']!r} as {paired['role']} (to end it: acpctl host revoke "
        f"{paired['name']!r}).\n"
        + (f"The QR code is also in {qr_png}.\n" if qr_png is not None else "")
    )
    return 0


def devices(as_json: bool) -> int:
    listed = _asked(acp.HOST_DEVICES, {})["devices"]
    if as_json:
        sys.stdout.write(json.dumps(listed, indent=2) + "\n")
        return 0
    if not listed:
        sys.stdout.write("no device is paired (to pair one: acpctl host pair)\n")
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
