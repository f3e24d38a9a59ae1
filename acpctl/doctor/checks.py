"""The doctor's checks. Each returns findings: ok, warning or problem, with a one-line fix."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from acpctl import config, paths, processes
from acpctl import protocol as acp
from acpctl.agents import discovery, runtimes
from acpctl.agents.discovery import ResolvedAgent
from acpctl.doctor import endpoints, probe, signatures
from acpctl.doctor.findings import Finding, ok
from acpctl.editors import clients, install
from acpctl.errors import UsageError
from acpctl.runner import incidents, runlog
from acpctl.runner.backends.pi.child import rpc_argv
from acpctl.runner.runs import live_runs, orphans
from acpctl.store import verify
from acpctl.store.index import SessionIndex
from acpctl.store.sessions import SessionStore

MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"  # what a desktop launch gets
SLOW_INITIALIZE_S = 10.0
LOW_DISK_BYTES = 1 << 30
LOG_FILES_SCANNED = 20


# -- 1. install ---------------------------------------------------------------------------


def check_install() -> list[Finding]:
    findings = []
    on_path = shutil.which("acpctl")
    if on_path:
        findings.append(ok("install", f"acpctl is on PATH: {on_path}"))
    else:
        findings.append(
            Finding(
                "install",
                "warning",
                "acpctl is not on PATH",
                "install it with `pipx install acp-ctl` (or `uv tool install "
                "acp-ctl`) so shells and editors find it",
            )
        )
    version = sys.version_info
    if version < (3, 10):
        findings.append(
            Finding(
                "install",
                "problem",
                f"Python {version.major}.{version.minor} is too old",
                "use Python 3.10 or newer",
            )
        )
    else:
        findings.append(ok("install", f"Python {sys.version.split()[0]}"))
    return findings


def check_runtimes() -> list[Finding]:
    """The runtimes npm and PyPI agents need; none is required by acpctl itself."""
    findings = []
    for tool in runtimes.TOOLS:
        found = discovery.which(tool)
        if found:
            detail = f" {runtimes.node_version()}" if tool == "node" else ""
            findings.append(ok("runtimes", f"{tool}{detail}: {found}"))
        elif tool == "uv":
            findings.append(
                ok("runtimes", "uv not found (PyPI agents then install with venv and pip)")
            )
        else:
            findings.append(
                Finding(
                    "runtimes",
                    "warning",
                    f"{tool} not found: npm agents (claude, codex, gemini...) cannot be "
                    "installed or run",
                    "install Node.js (it brings npm and npx): https://nodejs.org/",
                )
            )
    return findings


# -- 2. config ----------------------------------------------------------------------------


def check_config() -> tuple[list[Finding], config.Config | None]:
    try:
        cfg = config.load()
    except UsageError as exc:
        return [Finding("config", "problem", exc.message, "fix the file by hand")], None
    findings = [
        ok(
            "config",
            f"{cfg.path} parses" if cfg.path.exists() else f"no {cfg.path} yet (defaults apply)",
        )
    ]
    if cfg.default_agent and cfg.default_agent not in discovery.known_names(cfg):
        findings.append(
            Finding(
                "config",
                "problem",
                f"default_agent {cfg.default_agent!r} is not a known agent",
                "acpctl agents default NAME, with a name from `acpctl agents list`",
            )
        )
    return findings, cfg


# -- 3. agents ----------------------------------------------------------------------------


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


def check_engines(agent: ResolvedAgent) -> list[Finding]:
    """An npm agent whose package.json rules out this machine's node will not start."""
    problem = runtimes.engines_problem(agent.argv[0]) if agent.argv else None
    if problem is None:
        return []
    return [Finding(f"agent {agent.name}", "problem", problem.explain(), problem.fix(agent.name))]


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


def _probe_findings(agent: ResolvedAgent, result: probe.ProbeResult) -> list[Finding]:
    check = f"agent {agent.name}"
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
    caps = result.result.get("agentCapabilities") or {}
    session_caps = caps.get("sessionCapabilities") or {}
    served = [
        k for k in ("list", "resume", "close", "delete") if isinstance(session_caps.get(k), dict)
    ]
    if caps.get("loadSession"):
        served.insert(0, "load")
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
                "see `acpctl logs --agent " + agent.name + "`",
                evidence,
            )
        )
    return findings


async def _probe_all(
    agents: list[ResolvedAgent],
    timeout: float,
) -> list[probe.ProbeResult | BaseException]:
    jobs = []
    for agent in agents:
        assert agent.argv is not None
        if agent.kind == "pi-rpc":  # started as the backend starts it: in RPC mode
            jobs.append(probe.probe_pi_rpc(rpc_argv(agent.argv), agent.env, timeout))
        else:
            jobs.append(probe.probe_acp(agent.argv, agent.env, timeout))
    return await asyncio.gather(*jobs, return_exceptions=True)


def check_agents(cfg: config.Config, only: str | None, timeout: float) -> list[Finding]:
    if only:
        agents = [discovery.resolve(cfg, only)]
    else:
        agents = [a for a in discovery.all_agents(cfg) if a.found or a.source == "config"]
    findings: list[Finding] = []
    login_path = _login_path()
    runnable = []
    for agent in agents:
        check = f"agent {agent.name}"
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
        runnable.append(agent)
    # Probes run concurrently, each under its own timeout, beside the endpoint checks.
    with ThreadPoolExecutor(max_workers=1) as pool:
        reachable = pool.submit(endpoints.check_endpoints, runnable)
        results = asyncio.run(_probe_all(runnable, timeout))
    for agent, result in zip(runnable, results, strict=True):
        engines = check_engines(agent)
        if isinstance(result, BaseException):
            findings += [
                *engines,
                Finding(f"agent {agent.name}", "problem", f"probe failed: {result}"),
            ]
            continue
        for finding in engines if result.answered else ():
            finding.status = "warning"  # unsupported, yet it starts: say so, not more
            finding.message += " (it starts anyway, unsupported)"
        findings += [*engines, *_probe_findings(agent, result)]
    return findings + reachable.result()


# -- 4. editors ---------------------------------------------------------------------------


def check_editors(cfg: config.Config) -> list[Finding]:

    findings = []
    ours = Path(clients.launcher()[0]).resolve()
    known = set(discovery.known_names(cfg))
    for client in clients.FILE_CLIENTS.values():
        for path in client.detected():
            if not path.exists():
                continue
            check = f"editor {client.name}"
            try:
                entries = install.existing_entries(path, client.container)
            except UsageError as exc:
                findings.append(
                    Finding(
                        check,
                        "problem",
                        exc.message,
                        "fix the file; acpctl will not edit it until it parses",
                    )
                )
                continue
            mine = {k: v for k, v in entries.items() if client.is_ours(v)}
            if not mine:
                findings.append(ok(check, f"{path}: parses, no acpctl entries"))
            seen: dict[str, str] = {}
            for key, value in mine.items():
                argv = client.entry_argv(value)
                agent = clients.agent_of(argv) or "(default)"
                command = Path(str(argv[0]))
                if not command.exists():
                    findings.append(
                        Finding(
                            check,
                            "problem",
                            f"{key}: {command} does not exist "
                            "(acpctl moved or its virtualenv was removed)",
                            f"acpctl install {client.name} --agent {agent}",
                        )
                    )
                elif command.resolve() != ours and command.name.startswith("acpctl"):
                    findings.append(
                        Finding(
                            check,
                            "warning",
                            f"{key}: runs {command}, not this acpctl ({ours})",
                            f"acpctl install {client.name} --agent {agent}",
                        )
                    )
                elif agent not in known and agent != "(default)":
                    findings.append(
                        Finding(
                            check,
                            "problem",
                            f"{key}: unknown agent {agent!r}",
                            f"acpctl agents add {agent} -- COMMAND, or "
                            f"acpctl uninstall {client.name} --agent {agent}",
                        )
                    )
                else:
                    findings.append(ok(check, f"{key} -> {agent}"))
                env = value.get("env") if isinstance(value, dict) else None
                if isinstance(env, dict) and env:
                    findings.append(_env_in_entry(check, client.name, key, path, env))
                if agent in seen:
                    findings.append(
                        Finding(
                            check,
                            "warning",
                            f"{key} and {seen[agent]} both run agent {agent}",
                            f"remove one of them from {path}",
                        )
                    )
                seen[agent] = key
    return findings


_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", re.IGNORECASE)


def _env_in_entry(check: str, client: str, key: str, path: Path, env: dict[str, Any]) -> Finding:
    """An env that an earlier acpctl wrote into an editor entry: the editor's file is no
    place for it (names only are shown)."""
    secrets = sorted(name for name in env if _SECRET_NAME.search(name))
    what = f"secrets ({', '.join(secrets)})" if secrets else f"env ({', '.join(sorted(env))})"
    return Finding(
        check,
        "problem" if secrets else "warning",
        f"{key} in {path} carries {what}: acpctl reads an agent's env from config.toml, "
        "and the editor's file (and its backups) may end up in a dotfile repository",
        f"acpctl install {client} (rewrites acpctl's entries without env); remove old "
        f"backups beside {path.name}",
    )


# -- 5. storage ---------------------------------------------------------------------------


def check_storage() -> list[Finding]:

    root = paths.sessions_dir()
    if not root.exists():
        return [ok("storage", f"{root} does not exist yet (created with the first session)")]
    findings = []
    mode = root.stat().st_mode & 0o777
    if mode != paths.PRIVATE_DIR_MODE:
        findings.append(
            Finding(
                "storage",
                "problem",
                f"{root} has mode {mode:o}: others can read your conversations",
                f"chmod 700 {root}",
            )
        )
    exposed = [
        f"{entry.name}/{problem}"
        for entry in sorted(root.iterdir())
        if entry.is_dir() and not entry.is_symlink()
        for problem, _, _ in verify.mode_problems(entry)
    ]
    if exposed:
        findings.append(
            Finding(
                "storage",
                "problem",
                f"{len(exposed)} file(s) or directories in {root} are not private",
                "acpctl sessions verify --repair",
                exposed[:5],
            )
        )
    if not os.access(root, os.W_OK):
        findings.append(
            Finding(
                "storage",
                "problem",
                f"{root} is not writable",
                f"fix its owner or mode (chown/chmod) {root}",
            )
        )
    free = shutil.disk_usage(root).free
    if free < LOW_DISK_BYTES:
        findings.append(
            Finding(
                "storage",
                "warning",
                f"only {free >> 20} MiB free for history",
                "free disk space, or `acpctl sessions prune --older-than 30d`",
            )
        )
    drift = SessionIndex(SessionStore(root)).drift()
    stale = [d for d in drift if "missing" not in d]
    if stale:
        findings.append(
            Finding(
                "storage",
                "warning",
                f"the session index differs from the "
                f"files in {len(stale)} place(s) (it refreshes on the next "
                "listing)",
                "acpctl sessions verify --repair",
                stale[:5],
            )
        )
    if not findings:
        findings.append(ok("storage", f"{root}: private, writable, {free >> 30} GiB free"))
    return findings


# -- 6. processes -------------------------------------------------------------------------


def check_processes(fix: bool, confirm: Any) -> list[Finding]:

    runs = live_runs()
    findings = [
        ok(
            "processes",
            f"{len(runs)} live acpctl run(s)"
            + (": " + ", ".join(f"{r['pid']} ({r['agent']})" for r in runs) if runs else ""),
        )
    ]
    lost = orphans()
    if not lost:
        return findings
    evidence = []
    for process in lost:
        with_name = process.name() if process.is_running() else "?"
        evidence.append(f"pid {process.pid}: {with_name}")
    if fix and confirm(f"end {len(lost)} orphaned agent process(es)?"):
        for process in lost:
            processes.end_tree(process.pid)
        findings.append(
            Finding(
                "processes",
                "ok",
                f"ended {len(lost)} orphaned agent process(es)",
                evidence=evidence,
            )
        )
    else:
        findings.append(
            Finding(
                "processes",
                "problem",
                f"{len(lost)} agent process(es) outlived the acpctl run that started them",
                "acpctl doctor --fix",
                evidence,
            )
        )
    return findings


# -- 7. logs ------------------------------------------------------------------------------


def zed_logs() -> list[Path]:
    home = clients.home()
    candidates = [
        home / "Library" / "Logs" / "Zed" / "Zed.log",
        Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
        / "zed"
        / "logs"
        / "Zed.log",
    ]
    return [p for p in candidates if p.is_file()]


def _log_lines(path: Path, zed: bool) -> Iterable[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                if zed and "agent stderr:" not in line and "agent_servers" not in line:
                    continue
                yield number, line.rstrip("\n")
    except OSError:
        return


def check_incidents() -> list[Finding]:
    """What the protocol showed in recent runs: each agent's failed requests and the
    prompts it left silent, diagnosed from the errors and what its own log said."""
    logs = runlog.run_logs()
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for log in logs[-LOG_FILES_SCANNED:]:
        records = incidents.read(incidents.path_for(log))
        by_agent.setdefault(runlog.agent_of(log), []).extend(records)
    findings = []
    for agent, records in by_agent.items():
        failed = [r for r in records if r["kind"] == "error"]
        silent = [r for r in records if r["kind"] == "silent_turn_end"]
        if not failed and not silent:
            continue
        found = signatures.diagnose(signatures.run_evidence(records, []))
        fix = found[0].fix if found else f"see `acpctl logs --agent {agent}`"
        diagnosis = f"; {found[0].diagnosis}" if found else ""
        if failed:
            last = failed[-1]
            prompts = sum(r.get("method") == acp.SESSION_PROMPT for r in failed)
            what = f"{prompts} prompt(s)" if prompts == len(failed) else f"{len(failed)} request(s)"
            message = f"{what} to {agent} failed in recent runs; the last: {last.get('method')}"
            evidence = [incidents.describe(r) for r in failed[-3:]]
        else:
            ended = ", ".join(sorted({str(r.get("stopReason")) for r in silent}))
            longest = max(
                (r.get("seconds", 0) for r in records if r["kind"] == "silence"), default=0
            )
            message = (
                f"{len(silent)} prompt(s) to {agent} went silent for {longest}+ s in recent "
                f"runs (ended: {ended})"
            )
            evidence = [incidents.describe(r) for r in records if r["kind"] != "error"][-3:]
        findings.append(Finding(f"agent {agent}", "warning", message + diagnosis, fix, evidence))
    return findings


def check_logs() -> list[Finding]:
    logs = sorted(paths.logs_dir().glob("*.log*"), key=lambda p: p.stat().st_mtime, reverse=True)[
        :LOG_FILES_SCANNED
    ]
    hits: dict[str, list[str]] = {}
    for path, zed in [*((p, False) for p in logs), *((p, True) for p in zed_logs())]:
        for number, line in _log_lines(path, zed):
            matched = signatures.match(line)
            if matched:
                hits.setdefault(matched.id, []).append(f"{path}:{number}: {line[:200]}")
    if not hits:
        scanned = len(logs) + len(zed_logs())
        return [ok("logs", f"no known failure in {scanned} log file(s)")]
    findings = []
    by_id = {s.id: s for s in signatures.SIGNATURES}
    for signature_id, lines in hits.items():
        signature = by_id[signature_id]
        findings.append(
            Finding(
                "logs",
                "warning",
                f"{signature.diagnosis} ({len(lines)} line(s))",
                signature.fix,
                lines[-3:],
            )
        )
    return findings
