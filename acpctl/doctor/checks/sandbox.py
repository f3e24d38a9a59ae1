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
        policy = sandbox.policy(settings, os.getcwd(), agent.state_dirs)
        findings.append(
            ok(
                "sandbox",
                f"{name} runs in a sandbox; started here it {policy.describe()}",
            )
        )
    return findings
