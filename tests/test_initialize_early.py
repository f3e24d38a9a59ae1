"""Issue 16: `run --acp` relays the editor's initialize to the agent, and the answer back,
while its server is still being imported (runner/initialize.py). Whatever is not the
ordinary case is left to the server, which gets every byte read so far and the initialize
already sent: the agent is never asked twice, and the editor gets what it would have got."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TEST_AGENTS, run_cli, write_executable
from tests.raw_peer import raw_editor

pytestmark = pytest.mark.e2e

RELAYED_EARLY = "initialize relayed before the server started"


def run_log(home: Path) -> str:
    return "".join(path.read_text() for path in (home / "state" / "logs").glob("*.log"))


def initializes(log: Path) -> list[dict[str, Any]]:
    """The initialize requests the agent read."""
    messages = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [m for m in messages if m.get("method") == "initialize"]


def instant_agent(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A shell script that answers initialize at once and notes what it reads in a log;
    returns the script and the log."""
    log = tmp_path / f"{name}.log"
    answer = {
        "jsonrpc": "2.0",
        "id": 1,  # acpctl's first request to an agent
        "result": {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": name}},
    }
    agent = write_executable(
        tmp_path / f"{name}.sh",
        f"#!/bin/sh\nread line\necho \"$line\" >> {log}\necho '{json.dumps(answer)}'\n"
        f"exec cat >> {log}\n",
    )
    return agent, log


def test_a_fast_agent_is_answered_before_the_server_is_up(home: Path, tmp_path: Path) -> None:
    agent, log = instant_agent(tmp_path, "sh")
    assert run_cli("agents", "add", "fast", "--", str(agent)).returncode == 0

    async def scenario() -> None:
        async with raw_editor("--agent", "fast") as editor:
            response = await editor.call("initialize", {"protocolVersion": 7, "x": [1]})
            result = response["result"]
            assert result["agentInfo"] == {"name": "sh"} and result["protocolVersion"] == 1
            assert result["agentCapabilities"]["loadSession"] is True
            assert set(result["agentCapabilities"]["sessionCapabilities"]) >= {"list", "fork"}
            listed = await editor.call("session/list", {})  # the server took over
            assert listed["result"] == {"sessions": []}

    asyncio.run(scenario())
    assert RELAYED_EARLY in run_log(home)
    assert [m["params"] for m in initializes(log)] == [{"protocolVersion": 1, "x": [1]}]
    asyncio.run(scenario())  # spawned from the hint this time
    assert len(initializes(log)) == 2


def test_a_stale_hint_is_ended_unasked_and_the_right_agent_answers(
    home: Path, tmp_path: Path
) -> None:
    """The agent spawned last under a name is started before acpctl has resolved the
    name, but asked nothing until it has: when the configuration changed meanwhile, the
    right agent answers, and the stale one is ended unasked."""
    first, first_log = instant_agent(tmp_path, "first")
    second, second_log = instant_agent(tmp_path, "second")

    async def answered_by() -> str:
        async with raw_editor("--agent", "a") as editor:
            response = await editor.call("initialize", {"protocolVersion": 1})
            return str(response["result"]["agentInfo"]["name"])

    assert run_cli("agents", "add", "a", "--", str(first)).returncode == 0
    assert asyncio.run(answered_by()) == "first"
    assert run_cli("agents", "add", "a", "--", str(second)).returncode == 0
    assert asyncio.run(answered_by()) == "second"  # the hint was the first
    assert len(initializes(second_log)) == 1
    assert len(initializes(first_log)) == 1  # from the first run only


@pytest.mark.parametrize("script", ["banner", "error", "notify", "slow"])
def test_anything_else_is_left_to_the_server(home: Path, tmp_path: Path, script: str) -> None:
    log = tmp_path / "read.log"
    assert (
        run_cli(
            "agents",
            "add",
            script,
            "--env",
            f"SCRIPT={script}",
            "--env",
            f"LOG={log}",
            "--",
            sys.executable,
            str(TEST_AGENTS / "scripted_initialize.py"),
        ).returncode
        == 0
    )

    async def scenario() -> None:
        async with raw_editor("--agent", script) as editor:
            response = await editor.call("initialize", {"protocolVersion": 1})
            if script == "error":
                assert response["error"]["message"] == "no"
            else:
                assert response["result"]["agentInfo"]["name"] == f"scripted-{script}"
                assert response["result"]["agentCapabilities"]["loadSession"] is True
            # The server is up and serving (a stopping one would not log the banner).
            assert "result" in await editor.call("session/list", {})
            if script == "notify":  # relayed, before the answer it came before
                hello = [m for m in editor.messages if m.get("method") == "_scripted/hello"]
                assert hello and editor.messages.index(hello[0]) < editor.messages.index(response)

    asyncio.run(scenario())
    assert len(initializes(log)) == 1  # never asked twice, whoever answered
    if script == "banner":
        assert "Welcome to the scripted agent!" in run_log(home)
    if script in ("error", "notify", "slow"):
        assert RELAYED_EARLY not in run_log(home)


def test_an_initialize_json_cannot_carry_is_the_servers_to_refuse(
    home: Path, tmp_path: Path
) -> None:
    agent, log = instant_agent(tmp_path, "sh")
    assert run_cli("agents", "add", "fast", "--", str(agent)).returncode == 0

    async def scenario() -> None:
        async with raw_editor("--agent", "fast") as editor:
            editor.write(
                b'{"jsonrpc":"2.0","id":99,"method":"initialize","params":{"protocolVersion":1,'
                b'"x":1e999}}\n'
            )
            refused = await editor.wait_for(lambda m: m.get("id") == 99)
            assert "out of range" in refused["error"]["message"]
            assert "result" in await editor.call("initialize", {"protocolVersion": 1})

    asyncio.run(scenario())
    assert len(initializes(log)) == 1  # only the second reached the agent


def test_other_first_messages_and_pipelined_ones_go_to_the_server(home: Path) -> None:
    async def scenario() -> None:
        async with raw_editor("--agent", "demo") as editor:
            early = await editor.call("session/new", {"cwd": "/tmp", "mcpServers": []})
            assert "initialize must be called first" in early["error"]["message"]
            assert "result" in await editor.call("initialize", {"protocolVersion": 1})
        async with raw_editor("--agent", "demo") as editor:
            # initialize and session/new in one write: the second is the server's
            editor.write(
                b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
                b'{"jsonrpc":"2.0","id":2,"method":"session/new",'
                b'"params":{"cwd":"/tmp","mcpServers":[]}}\n'
            )
            new = await editor.wait_for(lambda m: m.get("id") == 2 and "method" not in m)
            assert new["result"]["sessionId"]

    asyncio.run(scenario())
