"""The doctor's checks: the session host (`acpctl serve`): its socket and its directory's
permissions, whether a host answers on it and runs this acpctl, where it listens (a
non-loopback address without TLS), and the tokens file's permissions."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from acpctl import __version__, paths
from acpctl.doctor.findings import Finding, ok
from acpctl.remote.host_socket import read_status


def check_host() -> list[Finding]:
    findings = _tokens()
    socket = paths.host_socket()
    if not socket.exists() and not socket.is_symlink():
        return [ok("host", "no session host is running (acpctl host start)"), *findings]
    findings += _modes(socket)
    status = asyncio.run(read_status())
    if status is None:
        findings.append(
            Finding(
                "host",
                "warning",
                f"{socket} is left from a session host that is gone; nothing answers on it",
                "the next `acpctl host start` replaces it",
            )
        )
        return findings
    agents = status.get("agents", [])
    findings.append(
        ok(
            "host",
            f"a session host (pid {status.get('pid')}) answers on {socket}: "
            f"{len(agents)} agent(s), "
            f"{sum(len(a.get('sessions', [])) for a in agents)} open session(s)",
        )
    )
    if status.get("version") != __version__:
        findings.append(
            Finding(
                "host",
                "warning",
                f"the session host runs acpctl {status.get('version')}, this is {__version__}",
                f"restart it: systemctl --user restart acpctl, or kill {status.get('pid')} "
                "(run --acp starts one again when the config asks for the host)",
            )
        )
    for listener in status.get("listening", []):
        if not listener.get("loopback") and not listener.get("tls"):
            findings.append(
                Finding(
                    "host",
                    "warning",
                    f"the host listens on {listener.get('address')} without TLS "
                    "(--behind-tls-proxy)",
                    "make sure the proxy in front terminates TLS, or give --tls-cert/--tls-key",
                )
            )
        else:
            findings.append(ok("host", f"listening on {listener.get('address')}"))
    return findings


def _modes(socket: Path) -> list[Finding]:
    found = []
    for path, wanted in ((socket.parent, paths.PRIVATE_DIR_MODE), (socket, 0o600)):
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            found.append(
                Finding(
                    "host",
                    "problem",
                    f"{path} has mode {mode:o}: other users can reach your agents",
                    f"chmod {wanted:o} {path}",
                )
            )
    return found


def _tokens() -> list[Finding]:
    tokens = paths.host_tokens()
    if not tokens.exists():
        return []
    mode = stat.S_IMODE(tokens.stat().st_mode)
    if mode & 0o077:
        return [
            Finding(
                "host",
                "problem",
                f"{tokens} has mode {mode:o}: other users can read the host's tokens",
                f"chmod 600 {tokens}",
            )
        ]
    return [ok("host", f"{tokens} is private (0600)")]
