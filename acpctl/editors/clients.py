"""Where each ACP client keeps its agents, and the shape of the entry acpctl writes.

Clients whose configuration is a JSON(C) file (Zed, JetBrains, VS Code's ACP Client, acpx)
are edited; those whose configuration is code (Neovim, Emacs, Toad) get a snippet to paste.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acpctl.agents.discovery import ResolvedAgent


def home() -> Path:
    return Path(os.environ.get("HOME") or Path.home())


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or home() / ".config")


def _appdata() -> Path:
    return Path(os.environ.get("APPDATA") or home() / "AppData" / "Roaming")


def launcher() -> list[str]:
    """The absolute command line of the running acpctl, for editors to launch."""
    script = Path(sys.argv[0])
    if script.name in ("acpctl", "acpctl.exe") and script.exists():
        return [str(script.resolve())]
    beside = Path(sys.executable).parent / "acpctl"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("acpctl")
    if found:
        return [str(Path(found).resolve())]
    return [sys.executable, "-m", "acpctl"]


def run_args(agent: str) -> list[str]:
    return ["run", "--acp", "--agent", agent]


def display_name(agent: ResolvedAgent) -> str:
    return f"{agent.title} (acpctl)"


def is_acpctl_command(argv: list[Any]) -> bool:
    """Whether a command line launches `acpctl run --acp` (ours to update or remove)."""
    if not argv or not all(isinstance(a, str) for a in argv):
        return False
    name = Path(argv[0]).name
    rest = argv[1:]
    if name.startswith("python") and rest[:2] == ["-m", "acpctl"]:
        rest = rest[2:]
    elif name not in ("acpctl", "acpctl.exe"):
        return False
    return rest[:2] == ["run", "--acp"]


def agent_of(argv: list[Any]) -> str | None:
    for flag, value in itertools.pairwise(argv):
        if flag in ("--agent", "-a") and isinstance(value, str):
            return value
    return None


@dataclass(frozen=True)
class FileClient:
    """A client configured by a JSON or JSONC file."""

    name: str
    title: str
    container: tuple[str, ...]
    paths: Callable[[], list[Path]]  # candidate files, most specific first
    entry_key: Callable[[ResolvedAgent], str]
    entry_value: Callable[[ResolvedAgent, list[str]], dict[str, Any]]
    entry_argv: Callable[[Any], list[Any]]

    def detected(self) -> list[Path]:
        """Settings files that exist, or whose directory exists (the client is there)."""
        return [p for p in self.paths() if p.exists() or p.parent.is_dir()]

    def is_ours(self, value: Any) -> bool:
        return isinstance(value, dict) and is_acpctl_command(self.entry_argv(value))


def _command_args(value: Any) -> list[Any]:
    command = value.get("command") if isinstance(value, dict) else None
    args = value.get("args") if isinstance(value, dict) else None
    return [command, *(args if isinstance(args, list) else [])]


def _zed_paths() -> list[Path]:
    if sys.platform == "win32":
        return [_appdata() / "Zed" / "settings.json"]
    candidates = []
    flatpak = home() / ".var" / "app" / "dev.zed.Zed" / "config" / "zed"
    if flatpak.is_dir():
        candidates.append(flatpak / "settings.json")
    candidates.append(_config_home() / "zed" / "settings.json")
    return candidates


def _vscode_paths() -> list[Path]:
    if sys.platform == "darwin":
        base = home() / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = _appdata()
    else:
        base = _config_home()
    return [
        base / flavour / "User" / "settings.json"
        for flavour in ("Code", "Code - Insiders", "VSCodium", "Cursor")
    ]


ZED = FileClient(
    name="zed",
    title="Zed",
    container=("agent_servers",),
    paths=_zed_paths,
    entry_key=display_name,
    # No "env": `run --acp` reads the agent's env from config.toml. In the editor's file it
    # would leave secrets where dotfile repositories pick them up, and the editor would
    # apply it to acpctl itself (a HOME there moves acpctl's own config).
    entry_value=lambda agent, cmd: {
        "type": "custom",
        "command": cmd[0],
        "args": [*cmd[1:], *run_args(agent.name)],
    },
    entry_argv=_command_args,
)
JETBRAINS = FileClient(
    name="jetbrains",
    title="JetBrains AI Assistant",
    container=("agent_servers",),
    paths=lambda: [home() / ".jetbrains" / "acp.json"],
    entry_key=display_name,
    entry_value=lambda agent, cmd: {"command": cmd[0], "args": [*cmd[1:], *run_args(agent.name)]},
    entry_argv=_command_args,
)
VSCODE = FileClient(
    name="vscode",
    title="VS Code ACP Client",
    container=("acp.agents",),
    paths=_vscode_paths,
    entry_key=display_name,
    entry_value=lambda agent, cmd: {"command": cmd[0], "args": [*cmd[1:], *run_args(agent.name)]},
    entry_argv=_command_args,
)
ACPX = FileClient(
    name="acpx",
    title="acpx",
    container=("agents",),
    paths=lambda: [home() / ".acpx" / "config.json"],
    entry_key=lambda agent: f"acpctl-{agent.name}",
    entry_value=lambda agent, cmd: {"argv": [*cmd, *run_args(agent.name)]},
    entry_argv=lambda value: value.get("argv") if isinstance(value.get("argv"), list) else [],
)
FILE_CLIENTS = {c.name: c for c in (ZED, JETBRAINS, VSCODE, ACPX)}


def _lua_string(value: str) -> str:
    return json.dumps(value)


def nvim_snippet(agents: list[ResolvedAgent], cmd: list[str]) -> str:
    blocks = ['-- CodeCompanion.nvim: in require("codecompanion").setup({ adapters = { acp = {']
    for agent in agents:
        argv = ", ".join(_lua_string(a) for a in [*cmd, *run_args(agent.name)])
        key = "acpctl_" + agent.name.replace("-", "_")
        blocks.append(
            f"  {key} = function()\n"
            f'    return require("codecompanion.adapters").extend("claude_code", {{\n'
            f"      name = {_lua_string(key)},\n"
            f"      formatted_name = {_lua_string(display_name(agent))},\n"
            f"      commands = {{ default = {{ {argv} }} }},\n"
            f"    }})\n  end,"
        )
    blocks.append('-- } } })\n\n-- avante.nvim: in require("avante").setup({ acp_providers = {')
    for agent in agents:
        args = ", ".join(_lua_string(a) for a in [*cmd[1:], *run_args(agent.name)])
        blocks.append(
            f"  [{_lua_string('acpctl-' + agent.name)}] = {{ command = {_lua_string(cmd[0])}, "
            f'args = {{ {args} }},\n    env = {{ HOME = os.getenv("HOME"), '
            f'PATH = os.getenv("PATH") }} }},'
        )
    blocks.append("-- } })")
    return "\n".join(blocks) + "\n"


def emacs_snippet(agents: list[ResolvedAgent], cmd: list[str]) -> str:
    parts = [";; agent-shell: add to your init file"]
    for agent in agents:
        params = " ".join(json.dumps(a) for a in [*cmd[1:], *run_args(agent.name)])
        ident = "acpctl-" + agent.name
        parts.append(
            f"(add-to-list 'agent-shell-agent-configs\n"
            f"  (agent-shell-make-agent-config\n"
            f"   :identifier '{ident} :mode-line-name {json.dumps(agent.title)}\n"
            f"   :buffer-name {json.dumps(agent.title)}\n"
            f"   :shell-prompt {json.dumps(agent.title + '> ')} "
            f":shell-prompt-regexp {json.dumps(agent.title + '> ')}\n"
            f"   :client-maker (lambda (buffer)\n"
            f"     (agent-shell--make-acp-client :command {json.dumps(cmd[0])}\n"
            f"       :command-params '({params})\n"
            f"       :environment-variables (agent-shell-make-environment-variables "
            f":inherit-env t)\n"
            f"       :context-buffer buffer))))"
        )
    return "\n".join(parts) + "\n"


def toad_snippet(agents: list[ResolvedAgent], cmd: list[str]) -> str:
    import shlex

    lines = ["# Toad keeps its catalogue in the package; run a custom agent like this:"]
    for agent in agents:
        command = shlex.join([*cmd, *run_args(agent.name)])
        lines.append(f"toad acp {shlex.quote(command)} --title {shlex.quote(agent.title)}")
    return "\n".join(lines) + "\n"


SNIPPET_CLIENTS: dict[str, Callable[[list[ResolvedAgent], list[str]], str]] = {
    "nvim": nvim_snippet,
    "emacs": emacs_snippet,
    "toad": toad_snippet,
}
CLIENT_NAMES = [*FILE_CLIENTS, *SNIPPET_CLIENTS]
