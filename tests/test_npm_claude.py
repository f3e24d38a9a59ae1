"""Issue 4 (and 5, 14): a real npm agent, claude-agent-acp, behind acpctl, talking to a
local stand-in for the model API: the release the tests pinned first (the last of the
`@zed-industries` package) and the current one (`@agentclientprotocol`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from acp import text_block

from tests.acp_peer import connect, initialized
from tests.conftest import run_cli
from tests.model_stub import ModelStub
from tests.npm_agents import claude_on_the_stand_in

pytestmark = [pytest.mark.e2e, pytest.mark.npm]


RELEASES = ("@zed-industries/claude-agent-acp", "@agentclientprotocol/claude-agent-acp")


@pytest.fixture(params=RELEASES, ids=("0.23.1", "current"))
def claude(home: Path, request: pytest.FixtureRequest) -> Iterator[ModelStub]:
    with claude_on_the_stand_in(home, request.param, "Hello from the stand-in model.") as stub:
        yield stub


def test_claude_agent_acp_through_acpctl(claude: ModelStub, home: Path, tmp_path: Path) -> None:
    async def first() -> str:
        async with connect("--agent", "claude") as (conn, _, client):
            response = await initialized(conn)
            assert "claude" in (response.agent_info.name or "").lower()
            assert response.agent_capabilities.load_session is True
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            result = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("Say hello")]), 120
            )
            assert result.stop_reason == "end_turn"
            # The current release appends a notice about the stand-in's address.
            assert client.text(sid).startswith("Hello from the stand-in model.")
            return str(sid)

    sid = asyncio.run(first())
    assert any("Say hello" in str(r.get("messages")) for r in claude.requests)
    claude.default_reply = "Second answer."

    async def second() -> None:
        async with connect("--agent", "claude") as (conn, _, client):
            await initialized(conn)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert client.text(sid).count("Hello from the stand-in model.") == 1  # replayed once
            result = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("Again")]), 120
            )
            assert result.stop_reason == "end_turn"
            assert "Second answer." in client.text(sid)

    asyncio.run(second())
    listed = run_cli("sessions", "list", "--json")
    assert sid in listed.stdout


@pytest.mark.parametrize("claude", [RELEASES[1]], indirect=True, ids=["current"])
def test_claude_fork_state_queueing_and_list_through_acpctl(
    claude: ModelStub, home: Path, tmp_path: Path
) -> None:
    """Issue 14 with the current claude-agent-acp: what it does directly also works
    through acpctl."""

    async def scenario() -> None:
        async with connect("--agent", "claude") as (conn, _, client):
            response = await initialized(conn)
            assert response.agent_capabilities.session_capabilities.fork is not None
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = new.session_id
            modes = [mode.id for mode in new.modes.available_modes]
            assert "plan" in modes and new.modes.current_mode_id != "plan"
            await conn.set_session_mode(session_id=sid, mode_id="plan")
            again = await conn.resume_session(cwd=str(tmp_path), session_id=sid)
            assert again.modes.current_mode_id == "plan"
            await conn.set_session_mode(session_id=sid, mode_id=new.modes.current_mode_id)
            # claude-agent-acp queues prompts itself: both are relayed, both end.
            first, second = await asyncio.wait_for(
                asyncio.gather(
                    conn.prompt(session_id=sid, prompt=[text_block("one")]),
                    conn.prompt(session_id=sid, prompt=[text_block("two")]),
                ),
                120,
            )
            assert first.stop_reason == second.stop_reason == "end_turn"
            fork = await conn.fork_session(cwd=str(tmp_path), session_id=sid)
            assert fork.session_id != sid
            result = await asyncio.wait_for(
                conn.prompt(session_id=fork.session_id, prompt=[text_block("in the fork")]), 120
            )
            assert result.stop_reason == "end_turn"
            assert client.text(fork.session_id).startswith("Hello from the stand-in model.")
            listed = await conn.list_sessions(cwd=str(tmp_path))
            ids = [info.session_id for info in listed.sessions]
            assert sid in ids and fork.session_id in ids
            assert len(ids) == len(set(ids))  # claude's own list merged without duplicates

    asyncio.run(scenario())


def test_claude_agent_acp_writes_its_project_from_a_sandbox(
    home: Path, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issues 44 and 51: claude-agent-acp in its bubblewrap sandbox, on the stand-in on
    127.0.0.1 (the network stays on), as a user has it: its HOME and the project outside
    /tmp (the sandbox's /tmp is its own), its state directories the catalog's, in its own
    home, with nothing else made writable. The Write tool writes in the project, and a
    shell command writing outside it is refused by the file system, whatever claude's own
    permissions said."""
    from acpctl import sandbox

    problem = sandbox.engine_problem()
    if problem is not None:
        pytest.skip(f"no sandbox here: {problem}")
    from tests.model_stub import text, tool_use

    stand_in = contextlib.ExitStack()
    claude = stand_in.enter_context(
        claude_on_the_stand_in(outside_tmp, RELEASES[1], "Hello from the stand-in.")
    )
    config = home / "config" / "config.toml"
    config.write_text(config.read_text() + "sandbox = true\n")
    project = outside_tmp / "project"
    project.mkdir()
    monkeypatch.chdir(project)  # an editor starts run --acp in the project: the first root
    target = project / "hello.txt"
    escaped = outside_tmp / "escaped.txt"  # outside the project: the sandbox refuses it
    claude.script_turns_only = True
    claude.script = [
        [text("Writing."), tool_use("Write", {"file_path": str(target), "content": "hi\n"})],
        [tool_use("Bash", {"command": f"echo x > {escaped}"}, "toolu_2")],
        [text("Done.")],
    ]

    async def scenario() -> None:
        async with connect("--agent", "claude") as (conn, _, client):
            await initialized(conn)
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            sid = session.session_id
            # claude's auto mode asks its classifier (not stood in) and blocks: ask the user.
            await conn.set_session_mode(session_id=sid, mode_id="default")
            client.default_answer = "allow_once"
            result = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("write hello.txt")]), 120
            )
            assert result.stop_reason == "end_turn"
            assert "Done." in client.text(sid)

    with stand_in:
        asyncio.run(scenario())
    assert target.read_text() == "hi\n"
    assert not escaped.exists()
    results = [
        block
        for request in claude.requests
        for message in request.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result" and block.get("tool_use_id") == "toolu_2"
    ]
    assert results and "Read-only file system" in str(results[-1]), results


def test_claude_s_load_and_resume_match_direct_through_acpctl(home: Path, tmp_path: Path) -> None:
    """Issue 54, 4 and 5 (N5, N6), at the current pin: a session's load and resume, on a
    connection of their own, to claude-agent-acp direct and through acpctl. The answers
    have the same fields, as the SDK reads them (claude's sessionId beyond the schema is
    kept too, tests/test_server.py); the replayed user message has a messageId both ways;
    a resume is followed by the agent's commands both ways."""
    import os
    from typing import Any, cast

    import acp

    from tests.acp_peer import RecordingClient
    from tests.npm_agents import package_command

    command = package_command(RELEASES[1])

    def direct(client: RecordingClient, env: dict[str, str]) -> Any:
        return acp.spawn_agent_process(
            cast(Any, client),
            *command,
            env={**os.environ, **env},
            transport_kwargs={"stderr": asyncio.subprocess.DEVNULL},
            use_unstable_protocol=True,
        )

    async def flow(way: str, env: dict[str, str]) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        @contextlib.asynccontextmanager
        async def opened() -> Any:
            client = RecordingClient()
            if way == "direct":
                async with direct(client, env) as (conn, _):
                    yield conn, client
            else:
                async with connect("--agent", "claude") as (conn, _, _client):
                    yield conn, _client

        async with opened() as (conn, client):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block("hello")]), 120)
        async with opened() as (conn, client):
            await initialized(conn)
            loaded = await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            seen["load"] = sorted(loaded.model_dump(by_alias=True, exclude_none=True))
            users = [u for u in client.updates[sid] if u.session_update == "user_message_chunk"]
            seen["user message ids"] = bool(users) and all(u.message_id for u in users)
        async with opened() as (conn, client):
            await initialized(conn)
            resumed = await conn.resume_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            seen["resume"] = sorted(resumed.model_dump(by_alias=True, exclude_none=True))
            await client.until(lambda: "available_commands_update" in client.kinds(sid))
            seen["commands after resume"] = True
        return seen

    with claude_on_the_stand_in(home, RELEASES[1], "Hello from the stand-in model."):
        from acpctl.config import load

        env = dict(load().agents["claude"].env)
        through = asyncio.run(flow("acpctl", env))
        direct_seen = asyncio.run(flow("direct", env))
    assert through == direct_seen, (through, direct_seen)
    assert through["user message ids"] is True
