"""The doctor's checks for remote agents (config.toml's `url` or `ssh`): a live probe, as
the link connects (reachable, token accepted, which acpctl and agent answer, the
certificate and when it expires), and what the last run's log says of the link (when it
dropped and came back, and why)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from typing import Any

from acpctl import __version__, jsonrpc
from acpctl import protocol as acp
from acpctl.agents.discovery import ResolvedAgent
from acpctl.config import Remote
from acpctl.doctor.findings import Finding, ok
from acpctl.remote.relay import make_dial, open_http
from acpctl.remote.transport import LinkDown, LinkRefused, Transport
from acpctl.runner import runlog

CERTIFICATE_WARN_DAYS = 14
DROPPED = re.compile(r"the link to .+ dropped: (?P<why>.+); trying again$")
BACK = re.compile(r"the link to .+ is back after (?P<took>[\d.]+) s")
GAVE_UP = re.compile(r"the link to .+ is down since .+; waiting requests fail")


def check_remotes(agents: list[ResolvedAgent], timeout: float) -> list[Finding]:
    findings: list[Finding] = []
    for agent in agents:
        assert agent.remote is not None
        findings += _token_file(agent.name, agent.remote)
        findings += asyncio.run(_probe(agent.name, agent.remote, timeout))
        findings += _link_log(agent.name)
    return findings


def _token_file(name: str, remote: Remote) -> list[Finding]:
    """A token another user of this machine can read is that user's too."""
    if remote.token_file is None:
        return []
    path = os.path.expanduser(remote.token_file)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return []  # the probe says it cannot be read
    if not mode & 0o077:
        return []
    return [
        Finding(
            f"agent {name}",
            "problem",
            f"its token file {path} can be read by other users (mode {mode & 0o777:o})",
            f"chmod 600 {path}",
        )
    ]


async def _probe(name: str, remote: Remote, timeout: float) -> list[Finding]:
    check = f"agent {name}"
    http = await open_http(remote)
    try:
        try:
            transport = await asyncio.wait_for(make_dial(remote, http)(None), timeout)
        except LinkRefused as exc:
            return [Finding(check, "problem", str(exc), _fix_for(remote, str(exc), name))]
        except (LinkDown, OSError, asyncio.TimeoutError) as exc:
            return [
                Finding(
                    check,
                    "problem",
                    f"cannot reach {remote.address}: {exc or 'no answer'}",
                    _fix_for(remote),
                )
            ]
        try:
            return await _initialized(check, remote, transport, timeout)
        finally:
            await transport.close(leaving=True)
    finally:
        if http is not None:
            await http.close()


async def _initialized(
    check: str, remote: Remote, transport: Transport, timeout: float
) -> list[Finding]:
    request = jsonrpc.request(
        "doctor",
        acp.INITIALIZE,
        {
            "protocolVersion": acp.PROTOCOL_VERSION,
            "clientCapabilities": {},
            "clientInfo": {"name": "acpctl-doctor", "version": __version__},
        },
    )
    try:
        await transport.send(json.dumps(request))
        answer = await asyncio.wait_for(_answer(transport), timeout)
    except (LinkDown, asyncio.TimeoutError) as exc:
        return [Finding(check, "problem", f"{remote.address} did not answer initialize: {exc}")]
    if answer is None or "result" not in answer:
        said = answer.get("error") if answer else "the connection closed"
        return [Finding(check, "problem", f"{remote.address} refused initialize: {said}")]
    result = answer["result"]
    info = result.get("agentInfo") if isinstance(result.get("agentInfo"), dict) else {}
    meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
    host_version = meta.get(acp.HOST_VERSION_META) or transport.remote_version
    there = f", acpctl {host_version} there" if host_version else ""
    agent = f"{info.get('name', 'an agent')} {info.get('version', '')}".strip()
    door = ", token accepted" if remote.url else ""  # over ssh, ssh's own keys are the door
    findings = [ok(check, f"{remote.address} answers: {agent}{there}{door}")]
    if host_version and host_version != __version__:
        findings.append(
            Finding(
                check,
                "warning",
                f"the remote runs acpctl {host_version}, this machine {__version__}",
                "upgrade the older one (pipx upgrade acp-ctl)",
            )
        )
    expiry = _certificate_expiry(transport)
    if expiry is not None:
        days = (expiry - time.time()) / 86400
        when = time.strftime("%Y-%m-%d", time.gmtime(expiry))
        if days < CERTIFICATE_WARN_DAYS:
            findings.append(
                Finding(check, "warning", f"its certificate expires on {when}", "renew it")
            )
        else:
            findings.append(ok(check, f"certificate verified, valid until {when}"))
    return findings


async def _answer(transport: Transport) -> dict[str, Any] | None:
    while (text := await transport.receive()) is not None:
        try:
            message = json.loads(text)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("id") == "doctor" and "method" not in message:
            return message
    return None


def _certificate_expiry(transport: Transport) -> float | None:
    import ssl

    certificate = transport.peer_certificate()
    if certificate is None or "notAfter" not in certificate:
        return None
    return float(ssl.cert_time_to_seconds(certificate["notAfter"]))


def _fix_for(remote: Remote, said: str = "", name: str = "NAME") -> str:
    if remote.ssh is not None:
        return f"try `ssh {remote.ssh}` by hand; acpctl runs ssh with BatchMode=yes"
    if "certificate" in said:  # a self-signed one, most often: trust it by its CA file
        trusted = f"the ca_file {remote.ca_file}" if remote.ca_file else "the system's CAs"
        return (
            f"the host's certificate is not one {trusted} trusts: for a self-signed or "
            f"private CA's certificate, `acpctl agents add {name} --url {remote.url} "
            "--ca-file CA.pem` (the certificate itself, for a self-signed one)"
        )
    return "check the URL, the token_file, and that acpctl host start --listen runs there"


def _link_log(name: str) -> list[Finding]:
    """The last run's account of the link."""
    logs = [log for log in runlog.run_logs() if runlog.agent_of(log) == name]
    if not logs:
        return []
    drops, backs, gave_up, last_why = 0, [], False, ""
    try:
        lines = logs[-1].read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        if (dropped := DROPPED.search(line)) is not None:
            drops += 1
            last_why = f"{line[:19]}: {dropped['why']}"
        elif (back := BACK.search(line)) is not None:
            backs.append(float(back["took"]))
        elif GAVE_UP.search(line):
            gave_up = True
    if not drops:
        return []
    check = f"agent {name}"
    summary = f"the link dropped {drops} time(s) in its last run; the last at {last_why}"
    if backs:
        summary += f"; back each time within {max(backs):.1f} s"
    if gave_up or len(backs) < drops:
        return [
            Finding(
                check,
                "warning",
                summary + ("; it stayed down past the outage limit" if gave_up else ""),
                f"`acpctl logs --agent {name}` has each drop and return",
            )
        ]
    return [ok(check, summary)]
