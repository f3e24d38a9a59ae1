"""Can the agents reach their model API? For each agent whose endpoint is known (the
catalog's default, or a base-URL variable in its env), open a TCP connection to the host,
or to the proxy HTTPS_PROXY / HTTP_PROXY names unless NO_PROXY exempts the host, within a
few seconds. Nothing is sent: no credentials, no prompt. An agent that cannot reach its
API says nothing while it retries (claude-agent-acp for minutes; tests/corpus)."""

from __future__ import annotations

import os
import socket
import time
import urllib.parse
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from acpctl.agents.discovery import ResolvedAgent
from acpctl.doctor.findings import Finding

CONNECT_TIMEOUT_S = 3.0
# Variables that move a model API, whichever agent reads them.
BASE_URL_VARIABLES = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")


@dataclass(frozen=True)
class Endpoint:
    url: str  # scheme://host:port, never a path or credentials
    source: str  # what set it, for the message
    host: str
    port: int
    proxy: str | None  # connected to instead of the host
    proxy_variable: str | None  # the variable that named the proxy


def endpoints_of(agent: ResolvedAgent, environ: Mapping[str, str]) -> list[Endpoint]:
    if agent.source == "builtin":  # the demo agent echoes: it has no model to reach
        return []
    env = {**environ, **agent.env}
    found: list[Endpoint] = []
    default = agent.entry.endpoint if agent.entry else None
    for variable in BASE_URL_VARIABLES:
        value = env.get(variable)
        if not value:
            continue
        where = "config.toml" if variable in agent.env else "your environment"
        endpoint = _endpoint(value, f"{variable} in {where}", env)
        if endpoint is not None:
            found.append(endpoint)
        if default and default[0] == variable:
            default = None
    if default:
        endpoint = _endpoint(default[1], f"{agent.name}'s default endpoint", env)
        if endpoint is not None:
            found.append(endpoint)
    return found


def _endpoint(value: str, source: str, env: Mapping[str, str]) -> Endpoint | None:
    parsed = urllib.parse.urlsplit(value)
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return None
    host = parsed.hostname
    url = f"{parsed.scheme}://{host}:{port}"
    proxy, variable = _proxy(parsed.scheme, host, env)
    return Endpoint(url, source, host, port, proxy, variable)


def _proxy(scheme: str, host: str, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    no_proxy = env.get("NO_PROXY") or env.get("no_proxy") or ""
    if _exempt(host, no_proxy):
        return None, None
    for variable in (f"{scheme}_proxy".upper(), f"{scheme}_proxy", "ALL_PROXY", "all_proxy"):
        if env.get(variable):
            return env[variable], variable
    return None, None


def _exempt(host: str, no_proxy: str) -> bool:
    """NO_PROXY as curl and most HTTP clients read it: `*`, hosts and domain suffixes."""
    for entry in no_proxy.replace(" ", "").split(","):
        name = entry.rsplit(":", 1)[0] if entry.count(":") == 1 else entry
        name = name.lstrip(".").lower()
        if entry == "*" or (name and (host == name or host.endswith("." + name))):
            return True
    return False


def check_endpoints(agents: list[ResolvedAgent]) -> list[Finding]:
    wanted = [(a, e) for a in agents if a.found for e in endpoints_of(a, os.environ)]
    if not wanted:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(wanted))) as pool:
        outcomes = list(pool.map(lambda pair: _connect(pair[1]), wanted))
    findings = []
    for (agent, endpoint), failure in zip(wanted, outcomes, strict=True):
        check = f"agent {agent.name}"
        proxied = ""
        if endpoint.proxy:
            proxied = f" through the proxy {_safe(endpoint.proxy)} ({endpoint.proxy_variable})"
        if isinstance(failure, float):
            message = f"its model API {endpoint.url}{proxied} accepts connections ({failure:.2f}s)"
            findings.append(Finding(check, "ok", f"{message}; {endpoint.source}"))
            continue
        findings.append(
            Finding(
                check,
                "problem",
                f"its model API {endpoint.url}{proxied} {failure} ({endpoint.source}); "
                "an agent may retry it for minutes without a word",
                "check the network, the URL and the proxy settings (HTTPS_PROXY, NO_PROXY) "
                "of the environment the editor starts agents in",
            )
        )
    return findings


def _connect(endpoint: Endpoint) -> float | str:
    """Seconds a connection took, or what went wrong."""
    host, port = endpoint.host, endpoint.port
    if endpoint.proxy:
        proxy = urllib.parse.urlsplit(endpoint.proxy)
        try:
            host, port = proxy.hostname or "", proxy.port or 80
        except ValueError:
            return "has a proxy URL that does not parse"
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return time.monotonic() - started
    except socket.gaierror:
        return f"cannot be reached: {host} does not resolve"
    except TimeoutError:
        return f"cannot be reached: no answer from {host}:{port} within {CONNECT_TIMEOUT_S:g} s"
    except ConnectionRefusedError:
        return f"cannot be reached: {host}:{port} refused the connection"
    except OSError as exc:
        return f"cannot be reached: {exc.strerror or exc}"


def _safe(url: str) -> str:
    """A proxy URL without its credentials."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.username or parsed.password:
        netloc = parsed.hostname or ""
        with_port = f"{netloc}:{parsed.port}" if parsed.port else netloc
        return urllib.parse.urlunsplit((parsed.scheme, with_port, "", "", ""))
    return url
