"""What `acpctl run` sets on a session before its first prompt: a mode, a model, config
options (from what the session reports it offers), and MCP servers from a file."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from acpctl import protocol as acp
from acpctl.errors import UsageError

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]


def _choices(option: dict[str, Any]) -> list[dict[str, Any]]:
    """A select option's values, flattened out of their groups."""
    found = []
    for item in option.get("options") or []:
        if isinstance(item, dict) and isinstance(item.get("options"), list):
            found += [o for o in item["options"] if isinstance(o, dict)]
        elif isinstance(item, dict):
            found.append(item)
    return found


def _pick(wanted: str, offered: list[tuple[str, str]], what: str) -> str:
    """The id among (id, name) pairs that `wanted` names (an id, else a name ignoring
    case); a UsageError listing them when none does."""
    for key, _ in offered:
        if key == wanted:
            return key
    for key, name in offered:
        if name.lower() == wanted.lower():
            return key
    valid = ", ".join(key for key, _ in offered) or "none"
    raise UsageError(f"{what} {wanted!r} is not offered by this session; valid: {valid}")


def _option(options: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    return next((o for o in options if o.get("id") == key), None) or next(
        (o for o in options if str(o.get("name", "")).lower() == key.lower()), None
    )


async def apply(
    request: Request,
    session_id: str,
    offered: dict[str, Any],
    mode: str | None,
    model: str | None,
    config: list[tuple[str, str]],
) -> None:
    """Set the session's mode, model and config options. `offered`: the session/new (or
    resume, or fork) result, which lists the session's modes, models and options."""
    options = [o for o in offered.get("configOptions") or [] if isinstance(o, dict)]
    by_category = {o.get("category"): o for o in options if o.get("category")}
    wanted = list(config)
    if mode is not None:
        modes = (offered.get("modes") or {}).get("availableModes") or []
        if modes or "mode" not in by_category:
            choices = [(str(m.get("id")), str(m.get("name", ""))) for m in modes]
            mode_id = _pick(mode, choices, "mode")
            await request(acp.SESSION_SET_MODE, {"sessionId": session_id, "modeId": mode_id})
        else:
            wanted.insert(0, (str(by_category["mode"]["id"]), mode))
    if model is not None:
        if "model" in by_category:
            wanted.insert(0, (str(by_category["model"]["id"]), model))
        else:
            models = (offered.get("models") or {}).get("availableModels") or []
            choices = [(str(m.get("modelId")), str(m.get("name", ""))) for m in models]
            model_id = _pick(model, choices, "model")
            await request(acp.SESSION_SET_MODEL, {"sessionId": session_id, "modelId": model_id})
    for key, value in wanted:
        option = _option(options, key)
        if option is None:
            valid = ", ".join(str(o.get("id")) for o in options) or "none"
            raise UsageError(f"config option {key!r} is not offered here; valid: {valid}")
        choices = [(str(c.get("value")), str(c.get("name", ""))) for c in _choices(option)]
        chosen = _pick(value, choices, f"value for {option.get('id')}")
        params = {"sessionId": session_id, "configId": option["id"], "value": chosen}
        result = await request(acp.SESSION_SET_CONFIG_OPTION, params)
        if isinstance(result, dict) and isinstance(result.get("configOptions"), list):
            options = [o for o in result["configOptions"] if isinstance(o, dict)]


def config_pairs(values: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        key, sep, chosen = value.partition("=")
        if not sep or not key or not chosen:
            raise UsageError(f"--config takes KEY=VALUE, not {value!r}")
        pairs.append((key.strip(), chosen.strip()))
    return pairs


def mcp_servers(path: Path) -> list[dict[str, Any]]:
    """MCP servers for session/new, from a file in Claude's `.mcp.json` shape
    (`{"mcpServers": {name: {command, args, env} | {type, url, headers}}}`) or Zed's
    settings shape (`{"context_servers": {name: {command: {path, args, env}} | ...}}`)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--mcp-config {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UsageError(f"--mcp-config {path} is not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise UsageError(f"--mcp-config {path}: expected an object with mcpServers")
    servers = document.get("mcpServers", document.get("context_servers"))
    if not isinstance(servers, dict):
        raise UsageError(f"--mcp-config {path}: no mcpServers (or context_servers) object")
    return [_server(path, name, entry) for name, entry in servers.items()]


def _server(path: Path, name: str, entry: Any) -> dict[str, Any]:
    where = f"--mcp-config {path}: server {name!r}"
    if not isinstance(entry, dict):
        raise UsageError(f"{where} is not an object")
    command = entry.get("command")
    if isinstance(command, dict):  # Zed: {"command": {"path", "args", "env"}}
        entry = {**command, "command": command.get("path")}
        command = entry["command"]
    if isinstance(command, str) and command:
        args, env = entry.get("args") or [], entry.get("env") or {}
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise UsageError(f"{where}: args must be a list of strings")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise UsageError(f"{where}: env must map names to strings")
        variables = [{"name": key, "value": value} for key, value in env.items()]
        return {"name": name, "command": command, "args": args, "env": variables}
    url = entry.get("url")
    if isinstance(url, str) and url:
        kind = entry.get("type", "http")
        if kind not in ("http", "sse"):
            raise UsageError(f"{where}: type must be http or sse, not {kind!r}")
        headers = entry.get("headers") or {}
        if not isinstance(headers, dict):
            raise UsageError(f"{where}: headers must be an object")
        pairs = [{"name": key, "value": str(value)} for key, value in headers.items()]
        return {"type": kind, "name": name, "url": url, "headers": pairs}
    raise UsageError(f"{where} has neither a command nor a url")
