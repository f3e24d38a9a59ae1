"""The doctor's checks: how a device reaches the host's page from off the desk (docs/web.md,
"Off the LAN"): a TCP listener, the public URL devices use ([serve] page_url) and that the
host answers to that name, TLS (the host's own, or a proxy's) so that the device's cookie
is Secure and the page may push, and the push key's permissions."""

from __future__ import annotations

import asyncio
import stat
from typing import Any
from urllib.parse import urlsplit

from acpctl import paths
from acpctl.config import Config, is_loopback_name
from acpctl.doctor.findings import Finding, ok
from acpctl.remote.host_socket import read_status

START = "acpctl host start --replace --listen 127.0.0.1:8765"


def check_reach(cfg: Config) -> list[Finding]:
    status = asyncio.run(read_status())
    listening: list[dict[str, Any]] = list(status.get("listening", [])) if status else []
    remembered = cfg.serve.listener
    if not listening and remembered is None:
        return [ok("reach", f"the page is off: no TCP listener (to pair a phone: {START})")]
    findings = []
    if not listening:
        findings.append(
            ok(
                "reach",
                f"config.toml keeps the listener {remembered.listen}: the host's next start has it",
            )
            if remembered is not None
            else ok("reach", "no TCP listener")
        )
        secure = remembered is not None and bool(remembered.tls_cert or remembered.behind_tls_proxy)
        loopback = remembered is not None and is_loopback_name(remembered.listen)
        hosts: set[str] = set(remembered.allow_hosts) if remembered else set()
    else:
        (listener,) = listening[:1]
        secure = bool(listener.get("tls") or listener.get("behindTlsProxy"))
        loopback = bool(listener.get("loopback"))
        hosts = set(listener.get("hosts") or [])
        how = "TLS" if listener.get("tls") else "behind a TLS proxy" if secure else "no TLS"
        findings.append(ok("reach", f"the page listens at {listener.get('address')} ({how})"))
    findings += _public_url(cfg.serve.page_url, secure, loopback, hosts)
    if not loopback and not secure:
        findings.append(
            Finding(
                "reach",
                "problem",
                "the page is served without TLS on an address other devices reach: the "
                "device cookie goes in the clear, and a phone's browser will not push to it",
                "give --tls-cert/--tls-key, or put a TLS proxy in front (--behind-tls-proxy: "
                "docs/web.md, Off the LAN)",
            )
        )
    elif secure:
        findings.append(ok("reach", "the device cookie is Secure (__Host-acpctl-device)"))
    return findings + _push_key()


def _public_url(
    page_url: str | None, secure: bool, loopback: bool, hosts: set[str]
) -> list[Finding]:
    if page_url is None:
        if loopback:
            return [
                ok(
                    "reach",
                    "no public URL ([serve] page_url): devices reach the page on this "
                    "machine only, or through a forward or proxy you name with --public-url",
                )
            ]
        return [ok("reach", "no public URL ([serve] page_url): devices use the listener's")]
    parts = urlsplit(page_url)
    found = []
    if parts.scheme != "https":
        found.append(
            Finding(
                "reach",
                "warning",
                f"the public URL {page_url} is not https: a phone installs no web app and "
                "gets no push from it",
                "serve it over TLS (tailscale serve, Cloudflare Tunnel, a proxy: docs/web.md)",
            )
        )
    elif not secure:
        found.append(
            Finding(
                "reach",
                "problem",
                f"the public URL {page_url} is https, but the host neither has TLS nor runs "
                "--behind-tls-proxy: its cookie is not Secure and the page will not pair",
                "restart it with --behind-tls-proxy (the proxy terminates TLS)",
            )
        )
    name = (parts.netloc or "").lower()
    if name and not is_loopback_name(name) and name not in hosts:
        found.append(
            Finding(
                "reach",
                "problem",
                f"the host does not answer to {name}, the public URL's name: it refuses "
                "requests for names it was not told (DNS rebinding)",
                f"restart it with --allow-host {name}",
            )
        )
    if not found:
        found.append(ok("reach", f"devices reach the page at {page_url}"))
    return found


def _push_key() -> list[Finding]:
    key = paths.host_push_key()
    if not key.exists():
        return []
    mode = stat.S_IMODE(key.stat().st_mode)
    if mode & 0o077:
        return [
            Finding(
                "reach",
                "problem",
                f"{key} (the host's push signing key) has mode {mode:o}",
                f"chmod 600 {key}",
            )
        ]
    return [ok("reach", f"{key} is private (0600)")]
