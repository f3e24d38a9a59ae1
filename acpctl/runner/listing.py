"""session/list, as acpctl serves it: the sessions of its store for this agent (one open
here as it is now), then those of the agent's own list that acpctl has no history of, with
the agent's own titles where both know a session, and its word on which are archived."""

from __future__ import annotations

import asyncio
import dataclasses

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner import served
from acpctl.runner.context import Connection
from acpctl.store.sessions import SessionMeta, valid_session_id

AGENT_LIST_PAGES = 20
AGENT_LIST_TIMEOUT_S = 10.0


# The unstable `archived` filter of session/list (a string in the schema, open to values
# to come). Archiving is the agent's own state (session/archive is relayed): what it
# reports archived decides where acpctl's own sessions go, too.
ARCHIVE_FILTERS = ("exclude", "include", "only")


async def list_sessions(conn: Connection, params: JsonObject) -> JsonObject:
    cwd = params.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise RpcError(acp.INVALID_PARAMS, "cwd must be a string")
    archived = params.get("archived")
    if archived is not None and archived not in ARCHIVE_FILTERS:
        # The schema has an agent refuse a value it does not know, not take it as exclude.
        raise RpcError(acp.INVALID_PARAMS, f"archived must be one of {', '.join(ARCHIVE_FILTERS)}")
    stored = [
        # A session open here is listed as it is now, not as its last commit left it.
        live.meta if (live := conn.sessions.get(meta.id)) is not None else meta
        for meta in served.stored_sessions(conn.store, conn.recorder.agent_name, cwd)
    ]
    agents = await _agent_sessions(conn, cwd, archived)
    stored, put_away = _by_archive_state(stored, agents, archived)
    if archived in (None, "exclude") and conn.handshake.agent_can("archive"):
        # The agent's default list leaves its archived out: which of ours those are.
        hidden = {info["sessionId"] for info in await _agent_sessions(conn, cwd, "only")}
        stored = [meta for meta in stored if _agent_id(meta) not in hidden]
    known = {meta.id for meta in stored} | {
        meta.agent_session_id for meta in stored if meta.agent_session_id
    }
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
            if (agent_id := _agent_id(meta)) in titles
            else meta
            for meta in stored
        ]
    # An agent that archives says of every session listed whether it is archived.
    archive_state = put_away if conn.handshake.agent_can("archive") else None
    page = served.list_page(stored, theirs, params.get("cursor"), archive_state)
    return jsonrpc.result(None, page)


def _agent_id(meta: SessionMeta) -> str:
    return meta.agent_session_id or meta.id


def _by_archive_state(
    stored: list[SessionMeta], agents: list[JsonObject], archived: str | None
) -> tuple[list[SessionMeta], set[str]]:
    """acpctl's sessions the filter keeps, by what the agent's answer to it reported
    (`only`: those it listed; else all), and which of them it reported archived."""
    listed = {info["sessionId"]: info.get("archived") is True for info in agents}
    if archived == "only":
        stored = [meta for meta in stored if _agent_id(meta) in listed]
        return stored, {meta.id for meta in stored}
    return stored, {meta.id for meta in stored if listed.get(_agent_id(meta))}


async def _agent_sessions(
    conn: Connection, cwd: str | None, archived: str | None = None
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
