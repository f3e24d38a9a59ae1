"""A session's directories as a client names them (session/new, fork, load, resume): its
cwd, which must be absolute, the additional ones, and, for a sandboxed agent, the check
that they lie in its roots (its binds were fixed when it started)."""

from __future__ import annotations

import os

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.sandbox import Policy


def session_directories(params: JsonObject, sandbox: Policy | None) -> tuple[str, list[str]]:
    """The cwd and the additional directories; an RpcError when the cwd is not absolute,
    or when any of them lies outside the agent's sandbox."""
    cwd = params.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise RpcError(acp.INVALID_PARAMS, "cwd must be an absolute path")
    extra = params.get("additionalDirectories")
    directories = [d for d in extra if isinstance(d, str)] if isinstance(extra, list) else []
    if sandbox is not None:
        outside = sandbox.outside([cwd, *directories])
        if outside:
            raise RpcError(acp.INVALID_PARAMS, sandbox.refusal("the session's", outside))
    return cwd, directories


def attach_params(params: JsonObject) -> JsonObject:
    """What a session is opened again with at the agent (after a restart, say)."""
    attach: JsonObject = {"cwd": params.get("cwd"), "mcpServers": params.get("mcpServers") or []}
    if isinstance(params.get("additionalDirectories"), list):
        attach["additionalDirectories"] = params["additionalDirectories"]
    return attach
