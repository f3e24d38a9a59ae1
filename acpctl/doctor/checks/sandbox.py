"""The doctor's checks: agents in a sandbox (docs/sandbox.md): whether its engine,
bubblewrap, can start one here, and each sandboxed agent's policy, as it would be for an
agent started in this directory."""

from __future__ import annotations

import os

from acpctl import sandbox
from acpctl.agents import discovery
from acpctl.config import Config
from acpctl.doctor.findings import Finding, ok
from acpctl.errors import AcpctlError


def check_sandbox(cfg: Config) -> list[Finding]:
    names = [name for name, settings in cfg.sandbox.items() if settings is not None]
    if cfg.sandbox_default is not None:
        names = [a.name for a in discovery.all_agents(cfg) if a.found and a.remote is None]
        names = [name for name in names if cfg.sandbox_for(name) is not None]
    if not names:
        return [ok("sandbox", "no agent runs in a sandbox (acpctl agents sandbox NAME on)")]
    problem = sandbox.engine_problem()
    if problem is not None:
        said = ", ".join(names)
        return [Finding("sandbox", "problem", f"{said} cannot start: {problem}", problem)]
    findings = [ok("sandbox", "bubblewrap starts sandboxes here")]
    for name in names:
        settings = cfg.sandbox_for(name)
        assert settings is not None
        try:
            agent = discovery.resolve(cfg, name)
        except AcpctlError as exc:
            findings.append(Finding("sandbox", "warning", f"{name}: {exc.message}"))
            continue
        needs = (agent.state_dirs, agent.sandbox_env, agent.env.get("HOME"))
        try:
            policy = sandbox.policy(settings, os.getcwd(), *needs)
            findings.append(
                ok("sandbox", f"{name} runs in a sandbox; started here it {policy.describe()}")
            )
        except sandbox.RootRefused as exc:
            findings.append(Finding("sandbox", "warning", f"{name}: {exc.message}", exc.hint or ""))
            policy = sandbox.policy(settings, None, *needs)
        configured = sandbox.policy(settings, None, *needs).roots
        if configured:
            roots = ", ".join(map(str, configured))
            findings.append(ok("sandbox", f"{name}: remote clients' sessions may open {roots}"))
        else:
            findings.append(
                ok(
                    "sandbox",
                    f"{name}: remote clients (WebSocket, HTTP, the page) can open no session: "
                    "their roots come from config.toml alone (sandbox_roots), and none is named",
                )
            )
        withheld = policy.withheld(agent.env)
        if withheld:
            findings.append(
                ok(
                    "sandbox",
                    f"{name}: withheld from its environment: {', '.join(withheld)} "
                    "(sandbox_env lets one through)",
                )
            )
    in_tmp = sandbox.home_in_tmp()
    if in_tmp is not None:
        findings.append(Finding("sandbox", "warning", in_tmp))
    return findings
