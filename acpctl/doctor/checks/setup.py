"""The doctor's checks: the install, its runtimes and config.toml."""

from __future__ import annotations

import shutil
import sys

from acpctl import config
from acpctl.agents import discovery, runtimes
from acpctl.doctor.findings import Finding, ok
from acpctl.errors import UsageError


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
