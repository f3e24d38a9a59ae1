"""Issue 43, 10 against the agent it was seen with: codex-acp (npm, pinned) answers
session/set_mode and writes a config_option_update, mostly in that order (it writes the
update from a task of its own, so not always); through acpctl the editor got the update
first. What codex-acp wrote is copied to a file as it writes it (tests/agents/
stdout_tee.py), and the editor must get the answers and updates in that order. codex-acp
runs here without its model: an API key from the environment is all session/new and
set_mode need (the key is never used: no prompt is sent)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from acpctl import protocol as acp
from tests.conftest import TEST_AGENTS, run_cli
from tests.npm_agents import package_command
from tests.raw_peer import RawEditor, raw_editor

pytestmark = [pytest.mark.e2e, pytest.mark.npm]


def codex_on_no_model(home: Path) -> tuple[list[str], dict[str, str]]:
    """codex-acp's command (the pinned release), and the environment it runs in with a
    home of its own and no model: an API key is all that sign-in, session/new and set_mode
    need (no prompt is sent, so its address is never reached)."""
    codex_home = home / "codex-home"
    codex_home.mkdir()
    env = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "HOME": str(codex_home),
        "CODEX_HOME": str(codex_home),
    }
    return package_command("@agentclientprotocol/codex-acp"), env


def test_codex_acps_update_after_set_modes_result_reaches_the_editor_after_it(
    home: Path, tmp_path: Path
) -> None:
    command, env = codex_on_no_model(home)
    args = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    written = tmp_path / "written.jsonl"
    tee = [sys.executable, str(TEST_AGENTS / "stdout_tee.py"), str(written), *command]
    assert run_cli("agents", "add", "codex", *args, "--", *tee).returncode == 0

    async def scenario() -> None:
        async with raw_editor("--agent", "codex", cwd=str(tmp_path)) as editor:
            init = await editor.call(acp.INITIALIZE, {"protocolVersion": 1})
            # An API key from the environment: "openai-api-key" before 2.x, "api-key" now.
            methods = [m["id"] for m in init["result"]["authMethods"]]
            method = next(m for m in methods if m.endswith("api-key"))
            signed = await editor.call(acp.AUTHENTICATE, {"methodId": method})
            assert "result" in signed, signed
            new = await editor.call(acp.SESSION_NEW, {"cwd": str(tmp_path), "mcpServers": []})
            session = new["result"]["sessionId"]
            modes = [m["id"] for m in new["result"]["modes"]["availableModes"]]
            after_new = len(editor.messages)
            for mode in (modes * 4)[1:11]:
                answer = await editor.call(
                    acp.SESSION_SET_MODE, {"sessionId": session, "modeId": mode}
                )
                assert "result" in answer, answer
            await editor.wait_for(lambda _: order(editor.messages[after_new:]).count("U") >= 10)
            got = order(editor.messages[after_new:])
            lines = [json.loads(line) for line in written.read_text().splitlines()]
            (new_answered,) = [
                i for i, m in enumerate(lines) if "sessionId" in (m.get("result") or {})
            ]
            assert order(lines[new_answered + 1 :]) == got
            assert got.count("R") == 10

    asyncio.run(scenario())


def order(messages: list[Any]) -> list[str]:
    """R for an answer, U for a config_option_update: the order to keep."""
    kinds = []
    for message in messages:
        if "method" not in message:
            kinds.append("R")
        elif message["params"]["update"].get("sessionUpdate") == acp.CONFIG_OPTION_UPDATE:
            kinds.append("U")
    return kinds


async def _conversation(editor: RawEditor, cwd: str) -> dict[str, Any]:
    """What codex-acp answers and says, as an editor sees it, for: initialize, its API-key
    sign-in, session/new, and two set_modes (the ids taken out; the updates of the whole
    conversation as a count of each kind, since codex writes them from tasks of its own:
    its commands come some time after session/new)."""
    init = await editor.call(acp.INITIALIZE, {"protocolVersion": 1})
    methods = [m["id"] for m in init["result"]["authMethods"]]
    signed = await editor.call(
        acp.AUTHENTICATE, {"methodId": next(m for m in methods if m.endswith("api-key"))}
    )
    new = await editor.call(acp.SESSION_NEW, {"cwd": cwd, "mcpServers": []})
    session = new["result"]["sessionId"]
    modes = [m["id"] for m in new["result"]["modes"]["availableModes"]]
    after_new = len(editor.messages)
    set_modes = []
    for mode in modes[1:3]:
        answer = await editor.call(acp.SESSION_SET_MODE, {"sessionId": session, "modeId": mode})
        set_modes.append(answer.get("result"))
    await editor.wait_for(lambda _: order(editor.messages[after_new:]).count("U") >= 2)
    await editor.wait_for(
        lambda _: any(
            m.get("method") == acp.SESSION_UPDATE
            and m["params"]["update"]["sessionUpdate"] == acp.AVAILABLE_COMMANDS_UPDATE
            for m in editor.messages
        )
    )
    kinds: dict[str, int] = {}
    for message in editor.messages:
        if message.get("method") == acp.SESSION_UPDATE:
            kind = message["params"]["update"]["sessionUpdate"]
            kinds[kind] = kinds.get(kind, 0) + 1
    result = {k: v for k, v in new["result"].items() if k != "sessionId"}
    return {
        "authMethods": init["result"]["authMethods"],
        "authenticate": signed.get("result"),
        "session/new": result,
        "set_mode": set_modes,
        "updates": kinds,
    }


def test_codex_acp_direct_and_through_acpctl_and_the_host_relay_the_same(
    home: Path, tmp_path: Path, way: str
) -> None:
    """Issue 54, 5: codex-acp at its pin, direct and through acpctl (and the host): the
    same sign-in methods, session/new answer, set_mode answers and updates. A newer pin
    that sends something acpctl drops or changes fails here (move the pin in
    tests/npm/package.json, as docs/relay.md says)."""
    command, env = codex_on_no_model(home)
    args = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    assert run_cli("agents", "add", "codex", *args, "--", *command).returncode == 0

    async def direct() -> dict[str, Any]:
        import os

        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, **env},
            cwd=str(tmp_path),
        )
        editor = RawEditor(process)
        try:
            return await _conversation(editor, str(tmp_path))
        finally:
            process.kill()
            await process.wait()

    async def through() -> dict[str, Any]:
        async with raw_editor("--agent", "codex", cwd=str(tmp_path)) as editor:
            return await _conversation(editor, str(tmp_path))

    assert asyncio.run(through()) == asyncio.run(direct())
