"""Issue 14 end to end: through `acpctl run --acp`, with the demo agent, an agent written
with the ACP Python SDK, and a raw agent, driven by the SDK's client or a raw editor."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, text_block

from tests.acp_peer import connect, initialized
from tests.conftest import TEST_AGENTS, run, run_cli, write_executable
from tests.raw_peer import raw_editor

pytestmark = pytest.mark.e2e


def add_sdk_agent(tmp_path: Path, name: str = "sdk", **env: str) -> None:
    script = write_executable(
        tmp_path / f"{name}-agent",
        f"#!/bin/sh\nexec {sys.executable} {TEST_AGENTS / 'sdk_agent.py'}\n",
    )
    flags = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    assert run_cli("agents", "add", name, *flags, "--", str(script)).returncode == 0


# == 1. terminal login ==================================================================


def test_unknown_arguments_run_the_agent_on_the_terminal_for_its_login(
    home: Path, tmp_path: Path
) -> None:
    """A terminal-auth method appends its args (claude-agent-acp's `--cli`) to the command
    the editor has: acpctl runs the agent with them, interactively, with the client's env,
    and exits with its status."""
    login = write_executable(
        tmp_path / "login-agent",
        "#!/bin/sh\n"
        'echo "login: $* token=$LOGIN_TOKEN configured=$CONFIGURED"\n'
        "read answer\n"
        'echo "answered $answer"\n'
        "exit 7\n",
    )
    assert (
        run_cli("agents", "add", "loginer", "--env", "CONFIGURED=yes", "--", str(login)).returncode
        == 0
    )
    done = run_cli(
        "run", "--acp", "--agent", "loginer", "--cli", "--verbose",
        input="y\n",
        env={**os.environ, "LOGIN_TOKEN": "from-the-client"},
    )  # fmt: skip
    assert done.returncode == 7, done.stderr
    assert "login: --cli --verbose token=from-the-client configured=yes" in done.stdout
    assert "answered y" in done.stdout
    after_separator = run_cli("run", "--acp", "--agent", "loginer", "--", "--acp", input="n\n")
    assert "login: --acp" in after_separator.stdout
    refused = run_cli("run", "--acp", "--cwd", str(tmp_path))
    assert refused.returncode == 2 and "--cwd does not apply with --acp" in refused.stderr


# == 3. session state ===================================================================


def test_demo_agent_modes_and_options_are_kept_by_acpctl(
    way: str, home: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            new = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = new.session_id
            assert new.modes.current_mode_id == "echo"
            assert new.config_options[0].current_value == "plain"
            await conn.set_session_mode(session_id=sid, mode_id="shout")
            options = await conn.set_config_option(
                config_id="tone", session_id=sid, value="excited"
            )
            assert options.config_options[0].current_value == "excited"
            await conn.prompt(session_id=sid, prompt=[text_block("hi")])
            assert client.text(sid) == "YOU SAID: HI!"
            again = await conn.resume_session(cwd=str(tmp_path), session_id=sid)
            assert again.modes.current_mode_id == "shout"
            assert again.config_options[0].current_value == "excited"

    run(scenario())


def test_a_fresh_agent_session_after_a_crash_gets_the_chosen_state(
    way: str, home: Path, tmp_path: Path
) -> None:
    """The SDK agent can neither resume nor load: after it crashes, acpctl's stand-in
    session is given the mode and option the user chose, and a later load says the context
    was lost but keeps the state."""
    add_sdk_agent(tmp_path)

    async def scenario() -> str:
        async with connect("--agent", "sdk") as (conn, _, client):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=sid, mode_id="code")
            await conn.set_config_option(config_id="effort", session_id=sid, value="high")
            await conn.prompt(session_id=sid, prompt=[text_block("hello")])
            assert client.text(sid) == "sdk[code,high]: hello"
            with pytest.raises(RequestError):
                await conn.prompt(session_id=sid, prompt=[text_block("crash")])
            await conn.prompt(session_id=sid, prompt=[text_block("again")])
            assert client.text(sid).endswith("sdk[code,high]: again")
            return str(sid)

    sid = run(scenario())

    async def later() -> None:
        async with connect("--agent", "sdk") as (conn, _, client):
            await initialized(conn)
            loaded = await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert loaded.modes.current_mode_id == "code"
            if way == "direct":  # a new agent: its session is a fresh one again
                assert loaded.field_meta["acpctl"]["contextRestored"] is False
            else:  # the host's agent holds the session still: the load joins it
                assert loaded.field_meta is None
            await conn.prompt(session_id=sid, prompt=[text_block("later")])
            assert client.text(sid).endswith("sdk[code,high]: later")

    run(later())


# == 2. fork ============================================================================


def test_fork_through_an_agent_that_forks(way: str, home: Path, tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    add_sdk_agent(tmp_path, SDK_AGENT_FORK="1", SDK_AGENT_STATE=str(state))

    async def scenario() -> tuple[str, str]:
        async with connect("--agent", "sdk") as (conn, _, client):
            response = await initialized(conn)
            assert response.agent_capabilities.session_capabilities.fork is not None
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=sid, mode_id="code")
            await conn.prompt(session_id=sid, prompt=[text_block("first")])
            fork = await conn.fork_session(cwd=str(tmp_path), session_id=sid)
            assert fork.session_id != sid and fork.modes.current_mode_id == "code"
            assert fork.field_meta is None  # the agent kept its context
            await conn.prompt(session_id=fork.session_id, prompt=[text_block("second")])
            assert client.text(fork.session_id) == "sdk[code,low]: second"
            return str(sid), str(fork.session_id)

    sid, fork = run(scenario())
    listed = {s["id"]: s for s in json.loads(run_cli("sessions", "list", "--json").stdout)}
    assert listed[fork]["parentId"] == sid
    shown = run_cli("sessions", "show", fork).stdout
    assert "first" in shown and "second" in shown
    assert "second" not in run_cli("sessions", "show", sid).stdout


def test_fork_of_an_agent_that_cannot_is_acpctls_own(way: str, home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("before")])
            fork = await conn.fork_session(cwd=str(tmp_path), session_id=sid)
            assert fork.field_meta["acpctl"]["contextRestored"] is False
            await conn.prompt(session_id=fork.session_id, prompt=[text_block("after")])
            assert client.text(fork.session_id) == "You said: after"
            listed = await conn.list_sessions(cwd=str(tmp_path))
            infos = {info.session_id: info for info in listed.sessions}
            assert infos[fork.session_id].field_meta["acpctl"]["parentId"] == sid

    run(scenario())
    text = run_cli("sessions", "list").stdout
    assert "fork of" in text


# == 4. list and load per agent =========================================================


def test_a_connection_lists_its_agents_sessions_and_the_agents_own(
    way: str, home: Path, tmp_path: Path
) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    # A session the agent made before acpctl was installed.
    (state / "sdk-elsewhere.cwd").write_text(str(tmp_path))
    (state / "sdk-elsewhere.json").write_text(json.dumps(["an old question"]))
    add_sdk_agent(tmp_path, SDK_AGENT_LIST="1", SDK_AGENT_LOAD="1", SDK_AGENT_STATE=str(state))

    async def demo() -> str:
        async with connect() as (conn, _, _):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("demo's")])
            return str(sid)

    demo_sid = run(demo())

    async def sdk() -> None:
        async with connect("--agent", "sdk") as (conn, _, client):
            await initialized(conn)
            own = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await conn.prompt(session_id=own, prompt=[text_block("mine")])
            listed = await conn.list_sessions(cwd=str(tmp_path))
            ids = {info.session_id for info in listed.sessions}
            assert ids == {own, "sdk-elsewhere"}  # not demo's
            with pytest.raises(RequestError, match="belongs to agent 'demo'"):
                await conn.load_session(cwd=str(tmp_path), session_id=demo_sid, mcp_servers=[])
            await conn.load_session(cwd=str(tmp_path), session_id="sdk-elsewhere", mcp_servers=[])
            assert client.text("sdk-elsewhere") == "sdk: an old question"  # the agent's replay
            await conn.prompt(session_id="sdk-elsewhere", prompt=[text_block("a new one")])
            assert client.text("sdk-elsewhere").endswith("sdk: a new one")

    run(sdk())
    shown = run_cli("sessions", "show", "sdk-elsewhere").stdout
    assert "an old question" in shown and "a new one" in shown


# == 5, 6. queueing (test_relay.py) and close during a turn =============================


def test_close_during_a_turn_cancels_it_and_nothing_follows(
    way: str, home: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with raw_editor() as editor:
            sid = await editor.session(str(tmp_path))
            prompt_id = 99
            editor.send(
                {
                    "jsonrpc": "2.0",
                    "id": prompt_id,
                    "method": "session/prompt",
                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "slow"}]},
                }
            )
            await editor.wait_for(lambda m: m.get("method") == "session/update")
            closed = await editor.call("session/close", {"sessionId": sid})
            assert closed["result"] == {}
            answer = await editor.wait_for(lambda m: m.get("id") == prompt_id)
            assert answer["result"]["stopReason"] == "cancelled"
            # A round trip through the agent: what it sent of the closed session before
            # this answer has come by now.
            await editor.call("session/new", {"cwd": "/tmp", "mcpServers": []})
            index = editor.messages.index(closed)
            assert not [m for m in editor.messages[index:] if m.get("method") == "session/update"]

    run(scenario())


# == 7, 8, 9. ids, invalid numbers, protocol version ====================================


def test_ids_numbers_and_versions_on_the_wire(way: str, home: Path, tmp_path: Path) -> None:
    agent = write_executable(
        tmp_path / "hostile",
        f"#!/bin/sh\nexec {sys.executable} {TEST_AGENTS / 'hostile_agent.py'}\n",
    )
    assert run_cli("agents", "add", "hostile", "--", str(agent)).returncode == 0

    async def scenario() -> None:
        async with raw_editor("--agent", "hostile") as editor:
            forms: dict[str, Any] = {
                "elicitation": {"form": {}}
            }  # v2 names them so: the agent may ask it
            init = await editor.call("initialize", {"protocolVersion": 9, "capabilities": forms})
            assert init["result"]["protocolVersion"] == 1
            sid = (await editor.call("session/new", {"cwd": str(tmp_path), "mcpServers": []}))[
                "result"
            ]["sessionId"]
            # A request-scoped elicitation names the editor's request id, not acpctl's.
            editor.send(
                {
                    "jsonrpc": "2.0",
                    "id": "editor-prompt",
                    "method": "session/prompt",
                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "elicit"}]},
                }
            )
            asked = await editor.wait_for(lambda m: m.get("method") == "elicitation/create")
            assert asked["params"]["requestId"] == "editor-prompt"
            editor.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}})
            done = await editor.wait_for(lambda m: m.get("id") == "editor-prompt")
            assert done["result"]["stopReason"] == "end_turn"
            # A number JSON cannot carry once parsed is refused, never relayed as Infinity.
            editor.write(b'{"jsonrpc":"2.0","id":41,"method":"_x/echo","params":{"n":1e999}}\n')
            refused = await editor.wait_for(lambda m: m.get("id") == 41)
            assert (
                refused["error"]["code"] == -32700 and "out of range" in refused["error"]["message"]
            )
            echoed: Any = await editor.call("_x/echo", {"n": 1.5e300})
            assert echoed["result"]["echo"] == {"n": 1.5e300}

    run(scenario())


# == issue 32, 1. subagents ===========================================================


def test_a_subagent_s_traffic_comes_through_and_is_kept(
    way: str, home: Path, tmp_path: Path
) -> None:
    """A scripted agent announces a child session (subagent_update), streams on it and
    asks permission for it: through `run --acp` (and the host) the editor gets all of it,
    its answer reaches the agent, and the child's history is kept, linked to its parent."""
    agent = write_executable(
        tmp_path / "hostile",
        f"#!/bin/sh\nexec {sys.executable} {TEST_AGENTS / 'hostile_agent.py'}\n",
    )
    assert run_cli("agents", "add", "hostile", "--", str(agent)).returncode == 0

    async def scenario() -> tuple[str, str]:
        async with raw_editor("--agent", "hostile") as editor:
            await editor.call("initialize", {"protocolVersion": 1})
            sid = (await editor.call("session/new", {"cwd": str(tmp_path), "mcpServers": []}))[
                "result"
            ]["sessionId"]
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "subagent"}]}
            editor.send({"jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": prompt})
            asked = await editor.wait_for(lambda m: m.get("method") == "session/request_permission")
            child = asked["params"]["sessionId"]
            editor.send(
                {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "yes"}},
                }
            )
            done = await editor.wait_for(lambda m: m.get("id") == "p")
            assert done["result"]["stopReason"] == "end_turn"
            texts = [
                m["params"]["update"].get("content", {}).get("text")
                for m in editor.messages
                if m.get("method") == "session/update" and m["params"]["sessionId"] == child
            ]
            assert texts == ["busy", "yes"], texts
            return sid, child

    parent, child = run(scenario())
    listed = json.loads(run_cli("sessions", "list", "--json").stdout)
    kept = next(s for s in listed if s["id"] == child)
    assert kept["subagentOf"] == parent and kept["title"] == "Helper"


# == issue 43, 12: the smaller breaks, against the TypeScript SDK's agent ================


@pytest.mark.npm
def test_the_smaller_breaks_against_the_typescript_sdks_agent(home: Path) -> None:
    """The TypeScript SDK's agent app (tests/npm/ts_server.mjs --stdio), which checks what
    it is sent against its schema, behind `acpctl run --acp`: the commands said again after
    the resume of an open session; the `archived` filter passed on as the schema has it (a
    string) and acpctl's sessions placed by the agent's archive; a resume's and a delete's
    own fields kept."""
    from tests.npm_agents import NPM_DIR, install

    install()
    command = ("node", str(NPM_DIR / "ts_server.mjs"), "--stdio")
    assert run_cli("agents", "add", "ts", "--", *command).returncode == 0
    commands = "available_commands_update"

    def told(messages: list[Any], session: str) -> int:
        return sum(
            1
            for m in messages
            if m.get("method") == "session/update"
            and m["params"]["sessionId"] == session
            and m["params"]["update"]["sessionUpdate"] == commands
        )

    async def scenario() -> None:
        async with raw_editor("--agent", "ts") as editor:
            session = await editor.session("/tmp")
            await editor.wait_for(lambda m: told(editor.messages, session) == 1)
            opened = {"sessionId": session, "cwd": "/tmp", "mcpServers": []}
            resumed = await editor.call("session/resume", opened)
            assert "result" in resumed, resumed
            await editor.wait_for(lambda m: told(editor.messages, session) == 2)
            assert told(editor.messages[: editor.messages.index(resumed)], session) == 1

            async def listed(archived: str | None) -> list[tuple[str, bool]]:
                params = {} if archived is None else {"archived": archived}
                answer = await editor.call("session/list", params)
                return sorted((s["sessionId"], s["archived"]) for s in answer["result"]["sessions"])

            assert await listed(None) == [(session, False)]
            assert await listed("only") == [("ts-archived", True)]
            archived = await editor.call("session/archive", {"sessionId": session})
            assert archived["result"] == {}, archived
            assert await listed(None) == []
            assert await listed("only") == sorted([(session, True), ("ts-archived", True)])
            assert await listed("include") == await listed("only")
            refused = await editor.call("session/list", {"archived": "someday"})
            assert refused["error"]["code"] == -32602, refused
            closed = await editor.call("session/close", {"sessionId": session})
            assert "result" in closed, closed
            again = await editor.call("session/resume", opened)
            assert again["result"]["_meta"]["ts/warm"] is True, again  # the agent's own
            deleted = await editor.call("session/delete", {"sessionId": session})
            assert deleted["result"] == {"_meta": {"ts/freed": 1}}, deleted

    run(scenario())
