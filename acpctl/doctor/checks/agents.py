"""The doctor's checks: each agent: found, startable (shebang, engines), and answering a live
probe."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from acpctl import config, sandbox
from acpctl.agents import discovery, runtimes, signatures
from acpctl.agents.discovery import ResolvedAgent
from acpctl.capabilities import AgentCapabilities
from acpctl.doctor import endpoints, probe
from acpctl.doctor.findings import Finding, ok
from acpctl.runner.backends.pi.child import rpc_argv

MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"  # what a desktop launch gets
SLOW_INITIALIZE_S = 10.0


def _login_path() -> str | None:
    shell = os.environ.get("SHELL")
    if not shell:
        return None
    try:
        result = subprocess.run(
            [shell, "-lc", 'printf %s "$PATH"'],
            capture_output=True,
            text=True,
            timeout=5,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() or None


def _shebang(command: str) -> list[str] | None:
    try:
        with open(command, "rb") as handle:
            first = handle.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode("utf-8", "replace").split()
    if parts and Path(parts[0]).name == "env":
        parts = [p for p in parts[1:] if not p.startswith("-")]
    return parts or None


def check_shebang(agent: ResolvedAgent, login_path: str | None) -> list[Finding]:
    """A script's interpreter must resolve on the PATH an editor launched from the
    desktop sees, not only in a login shell (nvm, Homebrew)."""
    if agent.argv is None:
        return []
    interpreter = _shebang(agent.argv[0])
    if not interpreter:
        return []
    name = interpreter[0]
    check = f"agent {agent.name}"
    path_env = agent.env.get("PATH") or MINIMAL_PATH
    if os.path.isabs(name):
        if os.access(name, os.X_OK):
            return [ok(check, f"interpreter {name} exists")]
        return [
            Finding(
                check,
                "problem",
                f"{agent.argv[0]} needs {name}, which is missing",
                f"install {Path(name).name}, or fix the script's first line",
            )
        ]
    if shutil.which(name, path=path_env):
        return [ok(check, f"interpreter {name} resolves on a desktop PATH")]
    in_login = shutil.which(name, path=login_path) if login_path else None
    in_here = shutil.which(name)
    if in_login or in_here:
        where = in_login or in_here
        return [
            Finding(
                check,
                "warning",
                f"{agent.argv[0]} runs `{name}`, found only on your shell's PATH "
                f"({where}), not on the PATH an editor started from the desktop sees",
                f"acpctl agents add {agent.name} --env PATH={Path(str(where)).parent}:"
                f"{MINIMAL_PATH} -- {' '.join(agent.argv)}",
            )
        ]
    return [
        Finding(
            check,
            "problem",
            f"{agent.argv[0]} needs `{name}`, which is not installed",
            f"install {name} (e.g. Node.js 20+ for `node`)",
        )
    ]


def check_engines(agent: ResolvedAgent, answered: bool = False) -> list[Finding]:
    """An npm agent whose package.json rules out this machine's node may not start.
    `answered`: the probe saw it start and answer here, which settles it: a warning that
    it is unsupported, with nothing to do while it works."""
    problem = runtimes.engines_problem(agent.argv[0]) if agent.argv else None
    if problem is None:
        return []
    check = f"agent {agent.name}"
    if answered:
        return [Finding(check, "warning", f"{problem.explain()}: unsupported, but it answers")]
    older_node = agent.entry.older_node if agent.entry else None
    status = "warning" if older_node == "runs" else "problem"
    said = f"{problem.explain()}: {problem.verdict(older_node)}"
    return [Finding(check, status, said, problem.fix(agent.name))]


def sign_in_methods(agent: ResolvedAgent, methods: list[Any]) -> list[tuple[str, str | None]]:
    """The agent's auth methods by name, each with, for a terminal method, the command
    that runs it through acpctl (what an editor with terminal auth runs)."""
    described: list[tuple[str, str | None]] = []
    for method in methods:
        if not isinstance(method, dict):
            continue
        label, args, command = str(method.get("name") or method.get("id")), method.get("args"), None
        if method.get("type") == "terminal" and isinstance(args, list):
            argv = ["acpctl", "run", "--acp", "--agent", agent.name, "--", *map(str, args)]
            command = shlex.join(argv)
        described.append((label, command))
    return described


def _probe_findings(
    agent: ResolvedAgent, result: probe.ProbeResult, v2: probe.ProbeResult | None = None
) -> list[Finding]:
    """What the probe found; `v2`: the probe that asked for ACP v2, for what it speaks."""
    check = f"agent {agent.name}"
    spoken = probe.speaks(result, v2) if v2 is not None else None
    newer = probe.refused_version(result) if agent.kind == "acp" else None
    if (spoken is not None and not result.answered) or newer is not None:
        said = f"speaks {spoken}" if spoken is not None else f"answered ACP {newer} to 1"
        refusal = (
            f"; run --acp refuses it: acpctl speaks ACP v1; the agent answered {newer}"
            if newer is not None
            else ""
        )
        return [
            Finding(
                check,
                "problem",
                f"{said}: acpctl speaks ACP v1 and cannot relay it{refusal}",
                "use a version of the agent that speaks ACP v1",
            )
        ]
    findings = []
    if result.stdout_garbage:
        findings.append(
            Finding(
                check,
                "problem",
                'prints non-JSON to stdout before answering (editors then hang on "Loading")',
                "stop the banner or shell profile output, or send it to stderr",
                [f"stdout: {line}" for line in result.stdout_garbage[:3]],
            )
        )
    evidence = [f"stderr: {line}" for line in result.stderr_tail[-5:]]
    if result.error:
        found = signatures.diagnose(result.stderr_tail[::-1])
        fix = found[0].fix if found else "run it by hand to see why: " + " ".join(agent.argv or [])
        findings.append(Finding(check, "problem", result.error, fix, evidence))
        return findings
    if agent.kind == "pi-rpc":
        findings.append(ok(check, f"answers get_state in {result.seconds or 0:.2f}s"))
        return findings
    seconds = result.seconds or 0.0
    info = result.result.get("agentInfo") or {}
    name = f"{info.get('name', agent.name)} {info.get('version', '')}".strip()
    if seconds > SLOW_INITIALIZE_S:
        findings.append(
            Finding(
                check,
                "warning",
                f"{name} answers initialize slowly ({seconds:.1f}s; Zed gives up at 30s)",
                "warm its cache (e.g. run it once by hand) or install it "
                "globally instead of through npx",
            )
        )
    else:
        findings.append(ok(check, f"{name} answers initialize in {seconds:.2f}s"))
    if spoken is not None:
        findings.append(ok(check, f"speaks {spoken}"))
    served = AgentCapabilities(result.result).offered()
    findings.append(
        ok(
            check,
            f"its own session support: {', '.join(served) or 'none'} "
            "(acpctl serves list/load/resume from its store either way)",
        )
    )
    methods = sign_in_methods(agent, result.result.get("authMethods") or [])
    named = "; ".join(f"{label} (in a terminal: {cmd})" if cmd else label for label, cmd in methods)
    if methods and not result.auth_required:
        findings.append(ok(check, f"sign-in methods: {named}"))
    if result.auth_required:
        terminal = [cmd for _, cmd in methods if cmd]
        findings.append(
            Finding(
                check,
                "warning",
                f"needs authentication before a session starts (methods: {named or 'none'})",
                f"sign in once: {terminal[0]}"
                if terminal
                else "authenticate from the editor's agent panel, or run the agent's login "
                "command once",
                evidence,
            )
        )
    elif result.session_error:
        findings.append(
            Finding(
                check,
                "warning",
                f"session/new failed: {result.session_error}",
                f"see `acpctl logs {agent.name}`",
                evidence,
            )
        )
    return findings


def confinement(cfg: config.Config, agent: ResolvedAgent) -> probe.Confinement | None:
    """A sandboxed agent is probed in its sandbox, as `run --acp` starts it."""
    settings = cfg.sandbox_for(agent.name)
    if settings is None:
        return None
    return lambda start_dir: sandbox.policy(
        settings, start_dir, agent.state_dirs, agent.sandbox_env, agent.env.get("HOME")
    )


async def _probe_all(
    cfg: config.Config,
    agents: list[ResolvedAgent],
    timeout: float,
) -> list[tuple[probe.ProbeResult, probe.ProbeResult | None] | BaseException]:
    """Each agent's probe, and for an ACP agent a second one that asks for v2."""

    async def both(agent: ResolvedAgent) -> tuple[probe.ProbeResult, probe.ProbeResult | None]:
        assert agent.argv is not None
        confine = confinement(cfg, agent)
        if agent.kind == "pi-rpc":  # started as the backend starts it: in RPC mode
            return await probe.probe_pi_rpc(rpc_argv(agent.argv), agent.env, timeout, confine), None
        return await probe.probe_versions(agent.argv, agent.env, timeout, confine)

    return await asyncio.gather(*map(both, agents), return_exceptions=True)


def check_agents(cfg: config.Config, only: str | None, timeout: float) -> list[Finding]:
    if only:
        agents = [discovery.resolve(cfg, only)]
    else:
        agents = [a for a in discovery.all_agents(cfg) if a.found or a.source == "config"]
    findings: list[Finding] = []
    remote = [agent for agent in agents if agent.remote is not None]
    if remote:
        from acpctl.doctor.checks.remote import check_remotes

        findings += check_remotes(remote, timeout)
    login_path = _login_path()
    runnable = []
    for agent in agents:
        check = f"agent {agent.name}"
        if agent.remote is not None:
            continue
        if not agent.found:
            findings.append(
                Finding(
                    check,
                    "problem",
                    f"not found: {agent.reason}",
                    agent.install or "fix its command in config.toml",
                )
            )
            continue
        findings.extend(check_shebang(agent, login_path))
        if cfg.sandbox_for(agent.name) is not None and sandbox.engine_problem() is not None:
            # It would not start: the sandbox check says why and how to fix it.
            findings.append(Finding(check, "problem", "not probed: its sandbox cannot start"))
            continue
        runnable.append(agent)
    # Probes run concurrently, each under its own timeout, beside the endpoint checks.
    with ThreadPoolExecutor(max_workers=1) as pool:
        reachable = pool.submit(endpoints.check_endpoints, runnable)
        results = asyncio.run(_probe_all(cfg, runnable, timeout))
    for agent, result in zip(runnable, results, strict=True):
        if isinstance(result, BaseException):
            findings += [
                *check_engines(agent),
                Finding(f"agent {agent.name}", "problem", f"probe failed: {result}"),
            ]
            continue
        v1, v2 = result
        findings += [*check_engines(agent, v1.answered), *_probe_findings(agent, v1, v2)]
    return findings + reachable.result()
