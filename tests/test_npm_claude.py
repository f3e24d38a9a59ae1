"""Issue 4 (and 5): a real npm agent, claude-agent-acp, behind acpctl, talking to a local
stand-in for the model API."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp import text_block

from tests.acp_peer import connect, initialized
from tests.conftest import run_cli
from tests.model_stub import ModelStub
from tests.npm_agents import npm_bin

pytestmark = [pytest.mark.e2e, pytest.mark.npm]


@pytest.fixture
def claude(home: Path) -> ModelStub:
    binary = npm_bin("claude-agent-acp")
    with ModelStub(default_reply="Hello from the stand-in model.") as stub:
        claude_home = home / "claude-home"
        claude_home.mkdir()
        env = {
            "ANTHROPIC_BASE_URL": stub.url,
            "ANTHROPIC_API_KEY": "sk-test",
            "IS_SANDBOX": "1",
            "HOME": str(claude_home),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        args = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
        assert run_cli("agents", "add", "claude", *args, "--", str(binary)).returncode == 0
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
            assert client.text(sid) == "Hello from the stand-in model."
            return str(sid)

    sid = asyncio.run(first())
    assert any("Say hello" in str(r.get("messages")) for r in claude.requests)
    claude.default_reply = "Second answer."

    async def second() -> None:
        async with connect("--agent", "claude") as (conn, _, client):
            await initialized(conn)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert client.text(sid) == "Hello from the stand-in model."  # replayed once
            result = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[text_block("Again")]), 120
            )
            assert result.stop_reason == "end_turn"
            assert client.text(sid).endswith("Second answer.")

    asyncio.run(second())
    listed = run_cli("sessions", "list", "--json")
    assert sid in listed.stdout
