"""The doctor's checks: editors' settings: acpctl's entries there, and what they run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from acpctl import config
from acpctl.agents import discovery
from acpctl.doctor.findings import Finding, ok
from acpctl.editors import clients, install
from acpctl.errors import UsageError


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
