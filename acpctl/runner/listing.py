"""session/list, as acpctl serves it: the sessions of its store for this agent (one open
here as it is now), then those of the agent's own list that acpctl has no history of, with
the agent's own titles where both know a session."""

from __future__ import annotations

import asyncio
import dataclasses

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner import served
from acpctl.runner.context import Connection
from acpctl.store.sessions import valid_session_id

AGENT_LIST_PAGES = 20
AGENT_LIST_TIMEOUT_S = 10.0


async def list_sessions(conn: Connection, params: JsonObject) -> JsonObject:
    cwd = params.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise RpcError(acp.INVALID_PARAMS, "cwd must be a string")
    archived = params.get("archived")  # the unstable filter: passed on to the agent
    if archived is not None and not isinstance(archived, bool):
        raise RpcError(acp.INVALID_PARAMS, "archived must be true or false")
    stored = [
        # A session open here is listed as it is now, not as its last commit left it.
        live.meta if (live := conn.sessions.get(meta.id)) is not None else meta
        for meta in served.stored_sessions(conn.store, conn.recorder.agent_name, cwd)
        if not archived  # acpctl archives nothing: the archived are the agent's alone
    ]
    known = {meta.id for meta in stored} | {
        meta.agent_session_id for meta in stored if meta.agent_session_id
    }
    agents = await _agent_sessions(conn, cwd, archived)
    theirs = [info for info in agents if info["sessionId"] not in known]
    # The agent's own title for a session both know wins over acpctl's, which may be
    # only a guess from the first prompt (opencode names its sessions itself).
    titles = {
        info["sessionId"]: info["title"]
        for info in agents
        if info["sessionId"] in known and isinstance(info.get("title"), str) and info["title"]
    }
    if titles:
        stored = [
            dataclasses.replace(meta, title=titles[agent_id])
            if (agent_id := meta.agent_session_id or meta.id) in titles
            else meta
            for meta in stored
        ]
    return jsonrpc.result(None, served.list_page(stored, theirs, params.get("cursor")))


async def _agent_sessions(
    conn: Connection, cwd: str | None, archived: bool | None = None
) -> list[JsonObject]:
    """The agent's own session/list, every page (bounded); [] when it has none."""
    if not conn.handshake.agent_can("list"):
        return []
    try:
        await conn.ensure_agent()
    except RpcError:
        return []
    found: list[JsonObject] = []
    cursor = None
    for _ in range(AGENT_LIST_PAGES):
        query: JsonObject = {"cwd": cwd} if cwd else {}
        if archived is not None:
            query["archived"] = archived
        if cursor:
            query["cursor"] = cursor
        try:
            response = await asyncio.wait_for(
                conn.backend.call(acp.SESSION_LIST, query), AGENT_LIST_TIMEOUT_S
            )
        except asyncio.TimeoutError:
            conn.log.warning("the agent's session/list did not answer; listing acpctl's")
            break
        result = response.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("sessions"), list):
            conn.log.info("the agent's session/list failed: %s", response.get("error"))
            break
        found += [
            info
            for info in result["sessions"]
            if isinstance(info, dict)
            and valid_session_id(info.get("sessionId"))
            and isinstance(info.get("cwd"), str)
        ]
        cursor = result.get("nextCursor")
        if not isinstance(cursor, str):
            break
    return found
