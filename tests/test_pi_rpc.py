"""Issue 6: pi (npm, pinned) as a full ACP agent through acpctl's pi-rpc backend, against a
local stand-in for the model API."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from acp import RequestError, text_block

from tests.acp_peer import connect, initialized
from tests.conftest import run_cli, write_executable
from tests.model_stub import ModelStub, pi_on_stub, text, thinking, tool_use, write_pi_models
from tests.npm_agents import npm_bin

pytestmark = [pytest.mark.e2e, pytest.mark.npm]


@pytest.fixture
def pi(home: Path) -> Iterator[ModelStub]:
    binary = npm_bin("pi")
    with ModelStub(default_reply="Hi from pi's model.") as stub:
        pi_home = home / "pi-home"
        (pi_home / ".pi" / "agent" / "prompts").mkdir(parents=True)
        (pi_home / ".pi" / "agent" / "prompts" / "review.md").write_text(
            "---\ndescription: Review the code\n---\nReview $ARGUMENTS carefully.\n"
        )
        write_pi_models(pi_home / ".pi" / "agent", stub.url, "stub-model", "stub-large")
        assert (
            run_cli(
                "agents",
                "add",
                "pi",
                "--kind",
                "pi-rpc",
                "--env",
                f"HOME={pi_home}",
                "--",
                *pi_on_stub(binary, "stub-model"),
            ).returncode
            == 0
        )
        yield stub


@pytest.fixture
def work(tmp_path: Path) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    (directory / "notes.txt").write_text("hello\n")
    return directory


async def new_session(conn: Any, cwd: Path) -> str:
    await initialized(conn)
    return str((await conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id)


def prompt(conn: Any, sid: str, words: str) -> Coroutine[Any, Any, Any]:
    return asyncio.wait_for(conn.prompt(session_id=sid, prompt=[text_block(words)]), 60)


def pi_children(pid: int) -> list[psutil.Process]:
    """The pi processes of a run (pi renames its process title, so match by parent)."""
    children = list(psutil.Process(pid).children())
    assert children
    return children


def test_streaming_text_and_thinking(pi: ModelStub, home: Path, work: Path) -> None:
    pi.script = [[thinking("Weighing it up."), text("The answer is 42.")]]

    async def scenario() -> None:
        async with connect("--agent", "pi") as (conn, _, client):
            response = await initialized(conn)
            assert response.agent_capabilities.prompt_capabilities.embedded_context is True
            sid = await new_session(conn, work)
            result = await prompt(conn, sid, "What is the answer?")
            assert result.stop_reason == "end_turn"
            assert client.text(sid, "agent_thought_chunk") == "Weighing it up."
            assert client.text(sid) == "The answer is 42."
            chunks = [u for u in client.updates[sid] if u.session_update == "agent_message_chunk"]
            assert len(chunks) > 1  # streamed, not sent whole

    asyncio.run(scenario())
    assert "What is the answer?" in json.dumps(pi.requests[0]["messages"])
    sessions = [
        p
        for p in (home / "data" / "sessions").iterdir()
        if p.is_dir() and not p.name.startswith(".")
    ]
    assert len(sessions) == 1 and list((sessions[0] / "pi").glob("*.jsonl"))  # pi's own file


@pytest.mark.parametrize("answer,expected", [("yes", "hello world\n"), ("no", "hello\n")])
def test_edit_with_diff_and_permission(
    pi: ModelStub, work: Path, answer: str, expected: str
) -> None:
    target = str(work / "notes.txt")
    pi.script = [
        [
            text("Editing."),
            tool_use("edit", {"path": target, "oldText": "hello", "newText": "hello world"}),
        ],
        [text("Finished.")],
    ]

    async def scenario() -> None:
        async with connect("--agent", "pi") as (conn, _, client):
            sid = await new_session(conn, work)
            client.answers = {sid: answer}
            result = await prompt(conn, sid, "edit the notes")
            assert result.stop_reason == "end_turn"
            ((asked_session, tool),) = client.permission_requests
            assert asked_session == sid and tool.kind == "edit"
            assert tool.content[0].old_text == "hello\n"
            assert tool.content[0].new_text == "hello world\n"
            calls = [u for u in client.updates[sid] if u.session_update == "tool_call"]
            assert calls[0].content[0].path == target and calls[0].locations[0].path == target
            final = [u for u in client.updates[sid] if u.session_update == "tool_call_update"][-1]
            assert final.status == ("completed" if answer == "yes" else "failed")

    asyncio.run(scenario())
    assert (work / "notes.txt").read_text() == expected


def test_cancel_mid_stream_keeps_the_session(pi: ModelStub, work: Path) -> None:
    pi.script = [[text(" ".join(["word"] * 60))]]
    pi.delay = 0.05

    async def scenario() -> None:
        async with connect("--agent", "pi") as (conn, _, client):
            sid = await new_session(conn, work)
            turn = asyncio.create_task(prompt(conn, sid, "talk a lot"))
            await client.streaming(sid, 3)
            await conn.cancel(session_id=sid)
            assert (await turn).stop_reason == "cancelled"
            assert client.text(sid).count("word") < 60
            pi.delay = 0
            again = await prompt(conn, sid, "are you there?")
            assert again.stop_reason == "end_turn"
            assert client.text(sid).endswith("Hi from pi's model.")

    asyncio.run(scenario())


def test_load_and_resume_in_a_new_process(pi: ModelStub, work: Path) -> None:
    async def first() -> str:
        async with connect("--agent", "pi") as (conn, _, _):
            sid = await new_session(conn, work)
            await prompt(conn, sid, "remember the word banana")
            return sid

    sid = asyncio.run(first())
    pi.default_reply = "You said banana."

    async def second() -> None:
        async with connect("--agent", "pi") as (conn, _, client):
            await initialized(conn)
            response = await conn.load_session(cwd=str(work), session_id=sid, mcp_servers=[])
            assert not (response and response.field_meta)  # pi's context was restored
            assert client.text(sid) == "Hi from pi's model."  # replayed from the store
            await prompt(conn, sid, "what word?")
        async with connect("--agent", "pi") as (conn, _, client):
            await initialized(conn)
            await conn.resume_session(cwd=str(work), session_id=sid, mcp_servers=[])
            assert client.updates[sid] == []
            await prompt(conn, sid, "and again?")
            with pytest.raises(RequestError) as unknown:
                await conn.load_session(cwd=str(work), session_id="no-such", mcp_servers=[])
            assert unknown.value.code == -32002

    asyncio.run(second())
    # pi went on in its own session file: the model saw the first prompt both times.
    assert all("banana" in json.dumps(r["messages"]) for r in pi.requests[1:])


def test_crash_mid_turn_then_restart_on_the_same_file(pi: ModelStub, work: Path) -> None:
    pi.script = [[text("first answer")], [text(" ".join(["slow"] * 100))]]

    async def scenario() -> None:
        async with connect("--agent", "pi") as (conn, process, client):
            sid = await new_session(conn, work)
            await prompt(conn, sid, "the first question")
            pi.delay = 0.05
            turn = asyncio.create_task(prompt(conn, sid, "a long one"))
            await client.until(lambda: client.text(sid).count("slow") >= 3)
            for child in pi_children(process.pid):
                child.send_signal(signal.SIGKILL)
            with pytest.raises(RequestError) as crashed:
                await turn
            assert "pi exited" in str(crashed.value)
            pi.delay = 0
            again = await prompt(conn, sid, "after the crash")
            assert again.stop_reason == "end_turn"

    asyncio.run(scenario())
    assert "the first question" in json.dumps(pi.requests[-1]["messages"])


def test_bad_cwd_and_failed_handshake(pi: ModelStub, home: Path, tmp_path: Path) -> None:
    broken = write_executable(
        tmp_path / "not-pi", "#!/bin/sh\necho 'pi: broken install' >&2\nexit 7\n"
    )
    assert run_cli("agents", "add", "broken", "--kind", "pi-rpc", "--", str(broken)).returncode == 0

    async def scenario() -> None:
        async with connect("--agent", "pi") as (conn, _, _):
            await initialized(conn)
            with pytest.raises(RequestError) as relative:
                await conn.new_session(cwd="relative/dir", mcp_servers=[])
            assert relative.value.code == -32602
            with pytest.raises(RequestError) as missing:
                await conn.new_session(cwd=str(tmp_path / "nowhere"), mcp_servers=[])
            assert missing.value.code == -32602
        async with connect("--agent", "broken") as (conn, _, _):
            await initialized(conn)
            with pytest.raises(RequestError) as failed:
                await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            assert "broken install" in json.dumps(failed.value.data)

    asyncio.run(scenario())
    assert not [
        p
        for p in (home / "data" / "sessions").glob("*")
        if p.is_dir() and not p.name.startswith(".")
    ]


def test_doctor_probes_pi_with_get_state(pi: ModelStub) -> None:
    result = run_cli("doctor", "--json", "--agent", "pi", timeout=120)
    findings = [f for f in json.loads(result.stdout) if f["check"] == "agent pi"]
    assert any("answers get_state" in f["message"] and f["status"] == "ok" for f in findings)


def test_model_error_becomes_a_jsonrpc_error_with_pis_message(pi: ModelStub, work: Path) -> None:
    async def scenario() -> None:
        async with connect("--agent", "pi") as (conn, _, _):
            sid = await new_session(conn, work)
            pi.fail_with = (400, "temperature must be between 0 and 1")
            with pytest.raises(RequestError) as failed:
                await prompt(conn, sid, "this will fail")
            assert "temperature must be between 0 and 1" in str(failed.value)
            again = await prompt(conn, sid, "and now?")  # the session stays usable
            assert again.stop_reason == "end_turn"

    asyncio.run(scenario())


def test_turn_settles_after_compaction_and_retry(pi: ModelStub, work: Path) -> None:
    """pi answers a context overflow by compacting and retrying: several runs end before
    the turn does, and the answer arrives once, after them."""

    async def scenario() -> None:
        async with connect("--agent", "pi") as (conn, _, client):
            sid = await new_session(conn, work)
            pi.fail_with = (400, "prompt is too long: 300000 tokens > 200000 maximum")
            result = await prompt(conn, sid, "a big question")
            assert result.stop_reason == "end_turn"
            assert "compaction" in client.text(sid, "agent_thought_chunk")
            assert client.text(sid) == "Hi from pi's model."

    asyncio.run(scenario())


def test_model_thinking_commands_usage_and_title_as_pi_acp_offers(
    pi: ModelStub, work: Path
) -> None:
    """Issue 14: pi's model and thinking level are ACP config options, its prompt
    templates are available commands, each turn reports the context used, and the session
    gets a title."""

    async def scenario() -> None:
        async with connect("--agent", "pi") as (conn, _, client):
            await initialized(conn)
            new = await conn.new_session(cwd=str(work), mcp_servers=[])
            sid = new.session_id
            options = {option.id: option for option in new.config_options}
            assert options["model"].current_value == "stub/stub-model"
            assert {o.value for o in options["model"].options} >= {
                "stub/stub-model",
                "stub/stub-large",
            }
            assert options["thought_level"].category == "thought_level"
            await client.until(lambda: "available_commands_update" in client.kinds(sid))
            (commands,) = [
                u for u in client.updates[sid] if u.session_update == "available_commands_update"
            ]
            assert "review" in {command.name for command in commands.available_commands}
            changed = await conn.set_config_option(
                config_id="thought_level", session_id=sid, value="high"
            )
            levels = {option.id: option.current_value for option in changed.config_options}
            assert levels["thought_level"] == "high"
            await conn.set_config_option(config_id="model", session_id=sid, value="stub/stub-large")
            result = await prompt(conn, sid, "What is the answer?")
            assert result.stop_reason == "end_turn"
            await client.until(lambda: "usage_update" in client.kinds(sid))
            usage = [u for u in client.updates[sid] if u.session_update == "usage_update"][-1]
            assert usage.used > 0 and usage.size > usage.used
            titles = [
                u.title for u in client.updates[sid] if u.session_update == "session_info_update"
            ]
            assert titles[0] == "What is the answer?"

    asyncio.run(scenario())
    assert pi.requests[-1]["model"] == "stub-large"


def test_the_hosts_spare_starts_pi_ahead_and_its_session_reads_the_context_afresh(
    pi: ModelStub, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28, 7: the editor's first thread does not wait for pi's start: the session
    host's spare holds a pi started in the last session's cwd, and session/new there takes
    it. The session starts afresh in it (pi's new_session), so a context file written after
    pi started is in the first turn's system prompt; a session/new elsewhere starts its own."""
    from acpctl import protocol as acp_names
    from acpctl.remote.host_socket import read_status
    from acpctl.store.index import SessionIndex
    from acpctl.store.sessions import SessionStore
    from tests.conftest import run
    from tests.test_host import serving, unix_client

    async def spare_pi() -> dict[str, Any]:
        while True:
            status = await read_status()
            agents = status["agents"] if status else []
            if agents and agents[0]["spare"] and agents[0]["agentPid"]:
                return dict(agents[0])
            await asyncio.sleep(0.1)

    async def new_thread(client: Any, cwd: Path) -> str:
        await client.request(acp_names.INITIALIZE, {"protocolVersion": 1})
        created = await client.request(acp_names.SESSION_NEW, {"cwd": str(cwd), "mcpServers": []})
        assert "result" in created, created
        return str(created["result"]["sessionId"])

    def children(host_pid: int) -> set[int]:
        return {child.pid for child in psutil.Process(host_pid).children()}

    async def scenario(host_pid: int) -> None:
        async with unix_client("pi") as first:
            await new_thread(first, work)
        warm = (await spare_pi())["agentPid"]
        started_ahead = children(host_pid)
        assert warm in started_ahead
        # Its directory waits in the store, but is no session (yet) in a listing.
        listed = SessionIndex(SessionStore()).query()
        assert len(listed) == 1 and all(s.problem is None for s in listed)
        (work / "AGENTS.md").write_text("Answer in haiku. MARK-WRITTEN-AFTER-PI-STARTED\n")
        async with unix_client("pi") as editor:
            session = await new_thread(editor, work)
            assert children(host_pid) == started_ahead  # no pi started for it
            answer = await editor.request(
                acp_names.SESSION_PROMPT,
                {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]},
            )
            assert answer["result"]["stopReason"] == "end_turn", answer
            assert "MARK-WRITTEN-AFTER-PI-STARTED" in json.dumps(pi.requests[-1])
            elsewhere = work / "elsewhere"
            elsewhere.mkdir()
            async with unix_client("pi") as other:
                await new_thread(other, elsewhere)  # no pi ahead for it: one of its own
                assert len(children(host_pid)) == len(started_ahead) + 1

    with serving(monkeypatch, "--idle-stop", "0.5", "--spare-for", "60") as (process, _, _):
        run(scenario(process.pid), timeout=120)


def test_pi_in_its_sandbox_writes_the_project_and_keeps_its_session_file(
    pi: ModelStub, home: Path, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issues 44 and 51: every pi process acpctl starts runs in the agent's sandbox, in the
    session's directory: an edit in the project works, a shell write outside it meets a
    read-only file system, and pi's own session file (kept in acpctl's store, which the
    sandbox hides) is still written where acpctl resumes it from. As a user has it: pi's
    HOME and the project outside /tmp, and pi's state (~/.pi) the catalog's, in its own
    home, with nothing else made writable (pi failed with EROFS on its settings' lock)."""
    from acpctl import sandbox

    problem = sandbox.engine_problem()
    if problem is not None:
        pytest.skip(f"no sandbox here: {problem}")
    pi_home = outside_tmp / "pi-home"
    write_pi_models(pi_home / ".pi" / "agent", pi.url, "stub-model")
    command = pi_on_stub(npm_bin("pi"), "stub-model")
    env = ("--env", f"HOME={pi_home}")
    added = run_cli("agents", "add", "pi", "--kind", "pi-rpc", "--sandbox", *env, "--", *command)
    assert added.returncode == 0, added.stderr
    work = outside_tmp / "work"
    work.mkdir()
    (work / "notes.txt").write_text("hello\n")
    monkeypatch.chdir(work)  # the editor's project: the sandbox's first root
    escaped = outside_tmp / "escaped.txt"
    target = str(work / "notes.txt")
    pi.script = [
        [tool_use("edit", {"path": target, "oldText": "hello", "newText": "hello world"})],
        [tool_use("bash", {"command": f"echo x > {escaped}; pwd"}, "toolu_2")],
        [text("Finished.")],
    ]

    async def scenario() -> str:
        async with connect("--agent", "pi") as (conn, _, client):
            sid = await new_session(conn, work)
            client.default_answer = "allow_once"
            result = await prompt(conn, sid, "edit, then write outside")
            assert result.stop_reason == "end_turn"
            return sid

    sid = asyncio.run(scenario())
    assert (work / "notes.txt").read_text() == "hello world\n"
    assert not escaped.exists()
    said = json.dumps(pi.requests[-1]["messages"])
    assert "Read-only file system" in said and str(work) in said  # pwd: the session's cwd
    assert list((home / "data" / "sessions" / sid / "pi").glob("*.jsonl"))
