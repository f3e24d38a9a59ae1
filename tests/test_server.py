"""The server's logic in-process, against a fake backend: routing, id mapping both ways,
recording, batches, the attach fallbacks, cancellation and shutdown (fast tier)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from tests.fake_backend import FakeAgent, Harness

Scenario = Callable[[Harness], Awaitable[None]]


def run(
    tmp_path: Path, scenario: Scenario, agent: FakeAgent | None = None, history: bool = True
) -> Harness:
    harness: Harness | None = None

    async def main() -> None:
        nonlocal harness
        harness = Harness(tmp_path / "sessions", agent, history)
        await asyncio.wait_for(scenario(harness), 10)

    asyncio.run(main())
    assert harness is not None
    return harness


def events(harness: Harness, session_id: str) -> list[dict[str, Any]]:
    return list(harness.store.iter_events(session_id))


def test_a_connection_that_ends_writes_what_is_due_without_the_commits_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group commit waits for more turns to share it; an ending connection does not:
    with the wait longer than the scenario's 10 s, the shutdown still writes the turn's
    metadata (`acpctl run` in a shell, or an editor closing, would linger for it)."""
    from acpctl.runner import recorder

    monkeypatch.setattr(recorder, "COMMIT_DELAY_S", 3600.0)

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        await h.result(
            acp.SESSION_PROMPT, {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
        )
        await h.server.shutdown()
        assert h.store.read_meta(sid).turns == 1

    run(tmp_path, scenario)


def test_initialize_adds_what_acpctl_serves(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        result = await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        caps = result["agentCapabilities"]
        assert caps["loadSession"] is True
        assert set(caps["sessionCapabilities"]) == {"list", "resume", "close", "delete", "fork"}
        assert result["agentInfo"] == {"name": "fake"}
        assert h.conn.handshake.capabilities.raw == {"sessionCapabilities": {"resume": {}}}
        assert h.conn.handshake.capabilities.offered() == ["resume"]

    run(tmp_path, scenario)


def test_requests_before_initialize_are_refused(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        response = await h.request(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
        assert response["error"]["code"] == acp.INVALID_REQUEST
        assert "initialize" in response["error"]["message"]

    run(tmp_path, scenario)


def test_a_prompt_is_relayed_and_recorded(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        sid = await h.session()
        assert sid == "agent-1"  # the agent's id is kept when it is a safe, new one
        result = await h.result(
            acp.SESSION_PROMPT,
            {"sessionId": sid, "prompt": [{"type": "text", "text": "hello there"}]},
        )
        assert result == {"stopReason": acp.END_TURN}
        update = h.editor.notifications(acp.SESSION_UPDATE)[0]
        assert update["params"]["sessionId"] == sid
        kinds = [e["type"] for e in events(h, sid)]
        assert kinds == ["update", "agent", "turn_end"]  # in the file before the response
        await h.server.shutdown()  # the metadata follows with the group commit, or now
        meta = h.store.read_meta(sid)
        assert (meta.turns, meta.title, meta.last_stop_reason) == (1, "hello there", "end_turn")
        assert h.agent.calls[-1] == (
            acp.SESSION_PROMPT,
            {"sessionId": "agent-1", "prompt": [{"type": "text", "text": "hello there"}]},
        )

    run(tmp_path, scenario)


def test_updates_sent_with_a_new_sessions_answer_reach_the_editor_after_it(
    tmp_path: Path,
) -> None:
    """An agent that announces its commands in the same write as its session/new answer:
    acpctl routes that update before the editor has the answer, and must not relay it
    first (an editor drops updates for a session it does not know)."""
    agent = FakeAgent()
    answer = agent._answer

    async def answer_then_announce(msg_id: int, method: str, params: Any) -> None:
        await answer(msg_id, method, params)
        if method == acp.SESSION_NEW:  # the first session is agent-1
            agent.update(
                "agent-1", {"sessionUpdate": acp.AVAILABLE_COMMANDS_UPDATE, "availableCommands": []}
            )

    agent._answer = answer_then_announce  # type: ignore[method-assign]

    async def scenario(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        h.send(jsonrpc.request(99, acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))
        await h.editor.response(99)
        await asyncio.sleep(0.05)
        kinds = [
            "answer" if m.get("id") == 99 else m["params"]["update"]["sessionUpdate"]
            for m in h.editor.messages
            if m.get("id") == 99 or m.get("method") == acp.SESSION_UPDATE
        ]
        assert kinds == ["answer", acp.AVAILABLE_COMMANDS_UPDATE]

    run(tmp_path, scenario, agent)


def test_unsafe_agent_session_ids_never_become_paths(tmp_path: Path) -> None:
    agent = FakeAgent()

    async def new_session(params: Any) -> dict[str, Any]:
        return {"sessionId": "../../escape"}

    agent.handlers[acp.SESSION_NEW] = new_session

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        assert sid != "../../escape" and "/" not in sid
        assert h.store.exists(sid)
        await h.result(acp.SESSION_PROMPT, {"sessionId": sid, "prompt": []})
        # The agent still gets its own id, and its updates reach the editor under ours.
        assert h.agent.calls[-1][1]["sessionId"] == "../../escape"
        assert h.editor.notifications(acp.SESSION_UPDATE)[0]["params"]["sessionId"] == sid

    run(tmp_path, scenario, agent)
    assert not (tmp_path / "escape").exists()


def test_editor_ids_come_back_and_cancel_requests_are_translated(tmp_path: Path) -> None:
    agent = FakeAgent()
    release = asyncio.Event()

    async def slow(params: Any) -> dict[str, Any]:
        await release.wait()
        return {"echo": params}

    agent.handlers["_x/slow"] = slow

    async def scenario(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        h.send({"jsonrpc": "2.0", "id": "editor-id", "method": "_x/slow", "params": {"a": 1}})
        await asyncio.sleep(0)
        agent_id = h.agent.pending.items()[0][0]
        h.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": "editor-id"}))
        assert h.agent.notifications == [(acp.CANCEL_REQUEST, {"requestId": agent_id})]
        release.set()
        response = await h.editor.response("editor-id")
        assert response == {"jsonrpc": "2.0", "id": "editor-id", "result": {"echo": {"a": 1}}}

    run(tmp_path, scenario, agent)


def test_the_agents_requests_get_acpctl_ids_and_answers_go_back(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        sid = await h.session()
        answered = h.agent.ask(acp.FS_READ_TEXT_FILE, {"sessionId": "agent-1", "path": "/a"})
        forwarded = await h.editor.request(acp.FS_READ_TEXT_FILE)
        assert forwarded["params"]["sessionId"] == sid
        h.send(jsonrpc.result(forwarded["id"], {"content": "text"}))
        answer = await answered
        assert answer["result"] == {"content": "text"}
        assert (forwarded["id"], h.agent.sent[-1]["id"]) == (1, 500)  # each hop its own id
        # The agent's own $/cancel_request reaches the editor under the editor-hop id.
        h.agent.ask(acp.REQUEST_PERMISSION, {"sessionId": "agent-1", "options": []})
        asked = await h.editor.request(acp.REQUEST_PERMISSION)
        agent_id = h.agent.agent_requests.items()[0][0]
        h.agent.events.on_agent_notification(  # type: ignore[union-attr]
            jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": agent_id}), b""
        )
        await h.editor.settled()
        assert h.editor.notifications(acp.CANCEL_REQUEST)[-1]["params"] == {
            "requestId": asked["id"]
        }

    run(tmp_path, scenario)


def test_a_request_for_an_unknown_agent_session_is_refused_to_the_agent(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.session()
        answer = await h.agent.ask(acp.FS_READ_TEXT_FILE, {"sessionId": "nobody"})
        assert answer["error"]["code"] == acp.RESOURCE_NOT_FOUND

    run(tmp_path, scenario)


def test_cancel_settles_open_permission_requests(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        sid = await h.session()
        answered = h.agent.ask(acp.REQUEST_PERMISSION, {"sessionId": "agent-1", "options": []})
        asked = await h.editor.request(acp.REQUEST_PERMISSION)
        h.send(jsonrpc.notification(acp.SESSION_CANCEL, {"sessionId": sid}))
        answer = await answered
        assert answer["result"] == {"outcome": {"outcome": acp.CANCELLED}}
        assert h.agent.notifications[-1] == (acp.SESSION_CANCEL, {"sessionId": "agent-1"})
        await h.editor.settled()
        assert h.editor.notifications(acp.CANCEL_REQUEST)[-1]["params"] == {
            "requestId": asked["id"]
        }
        # The editor's late answer is dropped, not sent to the agent twice.
        h.send(jsonrpc.result(asked["id"], {"outcome": {"outcome": "selected"}}))
        assert len(h.agent.sent) == 1

    run(tmp_path, scenario)


def test_agent_exit_voids_its_requests_and_the_session_resumes(tmp_path: Path) -> None:
    agent = FakeAgent()
    hold = asyncio.Event()

    async def held(params: Any) -> dict[str, Any]:
        await hold.wait()
        return {"stopReason": acp.END_TURN}

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        agent.handlers[acp.SESSION_PROMPT] = held
        h.send(jsonrpc.request("p1", acp.SESSION_PROMPT, {"sessionId": sid, "prompt": []}))
        h.agent.ask(acp.REQUEST_PERMISSION, {"sessionId": "agent-1", "options": []})
        asked = await h.editor.request(acp.REQUEST_PERMISSION)
        h.agent.die()
        failed = await h.editor.response("p1")
        assert "agent exited with status 1" in failed["error"]["message"]
        assert h.editor.notifications(acp.CANCEL_REQUEST)[-1]["params"] == {
            "requestId": asked["id"]
        }
        assert [e["type"] for e in events(h, sid)][-1] == "turn_error"
        agent.handlers[acp.SESSION_PROMPT] = agent.end_turn
        result = await h.result(acp.SESSION_PROMPT, {"sessionId": sid, "prompt": []})
        assert result["stopReason"] == acp.END_TURN
        assert (
            acp.SESSION_RESUME,
            {"cwd": "/tmp", "mcpServers": [], "sessionId": "agent-1"},
        ) in h.agent.calls

    run(tmp_path, scenario, agent)


def test_load_replays_then_falls_back_to_a_fresh_session_with_a_note(tmp_path: Path) -> None:
    async def first(h: Harness) -> None:
        sid = await h.session()
        await h.result(
            acp.SESSION_PROMPT, {"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]}
        )
        await h.server.shutdown()

    run(tmp_path, first)
    sid = "agent-1"
    plain = FakeAgent(capabilities={})  # neither resume nor load

    async def second(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        result = await h.result(
            acp.SESSION_LOAD, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        assert result["_meta"]["acpctl"]["contextRestored"] is False
        replayed = [
            m["params"]["update"]["sessionUpdate"]
            for m in h.editor.notifications(acp.SESSION_UPDATE)
        ]
        assert replayed == [acp.USER_MESSAGE_CHUNK, acp.AGENT_MESSAGE_CHUNK]
        assert [c[0] for c in plain.calls] == [acp.INITIALIZE, acp.SESSION_NEW]
        assert h.store.read_meta(sid).agent_session_id == "agent-1"

    run(tmp_path, second, plain)


def test_load_of_an_unknown_or_unsafe_session(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        missing = await h.request(acp.SESSION_LOAD, {"sessionId": "nope", "cwd": "/tmp"})
        assert missing["error"]["code"] == acp.RESOURCE_NOT_FOUND
        unsafe = await h.request(acp.SESSION_LOAD, {"sessionId": "../etc", "cwd": "/tmp"})
        assert unsafe["error"]["code"] == acp.INVALID_PARAMS

    run(tmp_path, scenario)


def test_list_pages_with_a_cursor(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        for _ in range(103):
            await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
        first = await h.result(acp.SESSION_LIST, {})
        assert len(first["sessions"]) == 100
        rest = await h.result(acp.SESSION_LIST, {"cursor": first["nextCursor"]})
        assert len(rest["sessions"]) == 3 and "nextCursor" not in rest
        bad = await h.request(acp.SESSION_LIST, {"cursor": "garbage"})
        assert bad["error"]["code"] == acp.INVALID_PARAMS
        assert (await h.result(acp.SESSION_LIST, {"cwd": "/elsewhere"}))["sessions"] == []

    run(tmp_path, scenario)


def test_close_and_delete(tmp_path: Path) -> None:
    agent = FakeAgent(capabilities={"sessionCapabilities": {"close": {}}})

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        assert await h.result(acp.SESSION_CLOSE, {"sessionId": sid}) == {}
        assert (acp.SESSION_CLOSE, {"sessionId": "agent-1"}) in h.agent.calls
        prompt = await h.request(acp.SESSION_PROMPT, {"sessionId": sid, "prompt": []})
        assert "load or resume it first" in prompt["error"]["message"]
        assert await h.result(acp.SESSION_DELETE, {"sessionId": sid}) == {}
        assert not h.store.exists(sid)
        assert await h.result(acp.SESSION_DELETE, {"sessionId": "../x"}) == {}

    run(tmp_path, scenario, agent)


def test_batches_are_answered_as_one_array(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        h.send(
            [
                jsonrpc.request(7, acp.SESSION_LIST, {}),
                jsonrpc.notification("_x/nothing", {}),
                {"jsonrpc": "2.0", "id": 8, "method": 5},
            ]
        )
        h.send([])
        for _ in range(20):
            await asyncio.sleep(0)
        arrays = [m for m in h.editor.messages if isinstance(m, list)]
        assert [a["id"] for a in arrays[0]] == [7, 8]
        assert arrays[0][1]["error"]["code"] == acp.INVALID_REQUEST
        assert {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": acp.INVALID_REQUEST, "message": "invalid request: empty batch"},
        } in h.editor.messages

    run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("message", "answer_id"),
    [
        ({"id": 1, "method": "x"}, 1),  # no "jsonrpc"
        ({"jsonrpc": "2.0", "id": [1], "method": "x"}, None),  # an id that cannot be an id
        ({"jsonrpc": "2.0", "id": 2, "method": "x", "params": 3}, 2),
        ({"jsonrpc": "2.0", "id": 3}, 3),  # neither a request nor a response
        ("a string", None),
    ],
)
def test_invalid_messages_get_invalid_request(tmp_path: Path, message: Any, answer_id: Any) -> None:
    async def scenario(h: Harness) -> None:
        h.send(message)
        response = await h.editor.response(answer_id)
        assert response["error"]["code"] == acp.INVALID_REQUEST

    run(tmp_path, scenario)


def test_bad_lines_get_parse_errors_and_serving_goes_on(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        editor = h.editor.channel
        editor.write(b"not json\n\xff\xfe\n" + b"[" * 100_000 + b"\n\n")
        editor.write(json.dumps(jsonrpc.request(1, acp.INITIALIZE, {})).encode() + b"\n")
        editor.close()
        await h.endpoint.serve()
        errors = [m for m in h.editor.messages if m.get("id") is None]
        assert [e["error"]["code"] for e in errors] == [acp.PARSE_ERROR] * 3
        assert "nested too deeply" in errors[2]["error"]["message"]
        assert "result" in await h.editor.response(1)

    run(tmp_path, scenario)


def test_shutdown_answers_running_prompts_cancelled(tmp_path: Path) -> None:
    agent = FakeAgent()

    async def forever(params: Any) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        agent.handlers[acp.SESSION_PROMPT] = forever
        h.send(jsonrpc.request("p", acp.SESSION_PROMPT, {"sessionId": sid, "prompt": []}))
        await asyncio.sleep(0.01)
        await h.server.shutdown()
        answer = await h.editor.response("p")
        assert answer["result"] == {"stopReason": acp.CANCELLED}
        assert events(h, sid)[-1] == {
            **events(h, sid)[-1],
            "type": "turn_end",
            "stopReason": acp.CANCELLED,
        }

    run(tmp_path, scenario, agent)


def test_without_history_nothing_is_written(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        sid = await h.session()
        await h.result(acp.SESSION_PROMPT, {"sessionId": sid, "prompt": []})
        assert not h.store.exists(sid)

    run(tmp_path, scenario, history=False)
    assert not (tmp_path / "sessions").exists()


def test_a_bug_in_a_handler_is_an_internal_error_not_a_crash(tmp_path: Path) -> None:
    agent = FakeAgent()

    async def broken(params: Any) -> dict[str, Any]:
        raise RpcError(acp.INTERNAL_ERROR, "boom")

    working = agent.handlers[acp.INITIALIZE]
    agent.handlers[acp.INITIALIZE] = broken

    async def scenario(h: Harness) -> None:
        response = await h.request(acp.INITIALIZE, {"protocolVersion": 1})
        assert response["error"] == {"code": acp.INTERNAL_ERROR, "message": "boom"}
        agent.handlers[acp.INITIALIZE] = working  # initialized after all: served again
        assert "result" in await h.request(acp.INITIALIZE, {"protocolVersion": 1})

        async def crash(client: Any, params: Any, msg_id: Any) -> JsonObject:
            raise ZeroDivisionError("a bug")

        h.server.handlers[acp.SESSION_LIST] = crash
        crashed = await h.request(acp.SESSION_LIST, {})
        assert crashed["error"]["code"] == acp.INTERNAL_ERROR

    run(tmp_path, scenario, agent)


def test_replay_sends_stored_bytes_or_rewraps_and_only_valid_json(tmp_path: Path) -> None:
    """Issue 16: a load replays stored agent notifications as their own bytes; one stored
    in another shape, or under an older agent id of the session, is wrapped again under
    the session's id; a torn or corrupt line is skipped. The editor side parses every line
    (EditorSide fails on anything that is not JSON)."""
    from acpctl.store.sessions import SessionMeta

    async def scenario(h: Harness) -> None:
        writer = h.store.create(SessionMeta(id="s1", agent="fake", command=[], cwd="/tmp"))

        def chunk(session: str, text: str) -> bytes:
            return json.dumps(
                jsonrpc.notification(
                    acp.SESSION_UPDATE,
                    {
                        "sessionId": session,
                        "update": {
                            "sessionUpdate": acp.AGENT_MESSAGE_CHUNK,
                            "content": {"type": "text", "text": text},
                        },
                    },
                ),
                separators=(",", ":"),
            ).encode()

        writer.agent_message(chunk("s1", "raw"))
        writer.agent_message(chunk("older-agent-id", "rewrapped"))
        writer.write_through(
            b'{"ts": 1, "type": "agent", "message": ' + chunk("s1", "spaced") + b"}\n"
        )
        writer.write_through(b'{"ts":1,"type":"agent","message":{"broken\n')
        writer.update(
            {"sessionUpdate": acp.USER_MESSAGE_CHUNK, "content": {"type": "text", "text": "u"}}
        )
        writer.close()
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        # as recorded: one update a line, not joined (what this test is about)
        as_recorded = {acp.REPLAY_META: acp.REPLAY_AS_RECORDED}
        load = {"sessionId": "s1", "cwd": "/tmp", "mcpServers": [], "_meta": as_recorded}
        await h.result(acp.SESSION_LOAD, load)
        replayed = h.editor.notifications(acp.SESSION_UPDATE)
        assert [n["params"]["sessionId"] for n in replayed] == ["s1"] * 4
        texts = [n["params"]["update"]["content"]["text"] for n in replayed]
        assert texts == ["raw", "rewrapped", "spaced", "u"]

    run(tmp_path, scenario)


def test_a_replay_joins_a_message_s_fragments_and_says_state_as_it_is_now(
    tmp_path: Path,
) -> None:
    """Issue 32, 9: a load answered from the recording replays one update a message, as
    the agent would (its stream's fragments joined: same kind, same messageId or none,
    plain text only), no mode or config option update from the past (the answer says them
    now), and only the newest usage and commands, after the rest."""
    from acpctl.store.sessions import SessionMeta

    def text(kind: str, value: str, **more: Any) -> dict[str, Any]:
        return {"sessionUpdate": kind, "content": {"type": "text", "text": value}, **more}

    async def scenario(h: Harness) -> None:
        writer = h.store.create(SessionMeta(id="s1", agent="fake", command=[], cwd="/tmp"))
        for update in (
            text(acp.USER_MESSAGE_CHUNK, "hi"),
            {"sessionUpdate": acp.USAGE_UPDATE, "used": 1, "size": 9},
            text(acp.AGENT_THOUGHT_CHUNK, "thi"),
            text(acp.AGENT_THOUGHT_CHUNK, "nk"),
            {"sessionUpdate": acp.CURRENT_MODE_UPDATE, "currentModeId": "old"},
            text(acp.AGENT_MESSAGE_CHUNK, "Hel"),
            text(acp.AGENT_MESSAGE_CHUNK, "lo"),
            text(acp.AGENT_MESSAGE_CHUNK, "A", messageId="m2"),
            text(acp.AGENT_MESSAGE_CHUNK, "B", messageId="m2"),
            text(acp.AGENT_MESSAGE_CHUNK, "kept", _meta={"mine": 1}),
            {"sessionUpdate": acp.AVAILABLE_COMMANDS_UPDATE, "availableCommands": []},
            {"sessionUpdate": acp.USAGE_UPDATE, "used": 5, "size": 9},
            {"sessionUpdate": acp.CONFIG_OPTION_UPDATE, "configOptions": []},
        ):
            writer.update(update)
        writer.close()
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        await h.result(acp.SESSION_LOAD, {"sessionId": "s1", "cwd": "/tmp", "mcpServers": []})
        replayed = [n["params"]["update"] for n in h.editor.notifications(acp.SESSION_UPDATE)]
        assert replayed == [
            text(acp.USER_MESSAGE_CHUNK, "hi"),
            text(acp.AGENT_THOUGHT_CHUNK, "think"),
            text(acp.AGENT_MESSAGE_CHUNK, "Hello"),
            text(acp.AGENT_MESSAGE_CHUNK, "AB", messageId="m2"),
            text(acp.AGENT_MESSAGE_CHUNK, "kept", _meta={"mine": 1}),
            {"sessionUpdate": acp.USAGE_UPDATE, "used": 5, "size": 9},
            {"sessionUpdate": acp.AVAILABLE_COMMANDS_UPDATE, "availableCommands": []},
        ]

    run(tmp_path, scenario)


def test_a_resume_of_an_open_session_brings_the_agent_s_commands_again(tmp_path: Path) -> None:
    """Issue 32, 9: the agent says its commands once, when the session begins; a resume
    of the open session (answered without the agent) has them again, after its answer."""

    async def scenario(h: Harness) -> None:
        session = await h.session()
        commands = {
            "sessionUpdate": acp.AVAILABLE_COMMANDS_UPDATE,
            "availableCommands": [{"name": "review", "description": "Review"}],
        }
        h.agent.update(session, commands)
        await h.editor.settled()
        before = len(h.editor.notifications(acp.SESSION_UPDATE))
        params = {"sessionId": session, "cwd": "/tmp", "mcpServers": []}
        answer = await h.request(acp.SESSION_RESUME, params)
        assert "result" in answer, answer
        await h.editor.settled()
        after = h.editor.notifications(acp.SESSION_UPDATE)[before:]
        assert [n["params"]["update"] for n in after] == [commands]
        messages = h.editor.messages
        answered = next(i for i, m in enumerate(messages) if m.get("id") == answer["id"])
        assert messages[-1] == after[0] and len(messages) - 1 > answered  # behind the answer

    run(tmp_path, scenario)


def test_a_cancel_request_for_a_running_prompt_cancels_its_session_turn(tmp_path: Path) -> None:
    """$/cancel_request naming a prompt at the agent becomes session/cancel for its
    session (the agent need not know $/cancel_request); a prompt waiting behind it stays."""
    agent = FakeAgent()
    cancelled = asyncio.Event()
    original_notify = agent.notify

    def notify(method: str, params: Any) -> None:
        original_notify(method, params)
        if method == acp.SESSION_CANCEL:
            cancelled.set()

    async def until_cancelled(params: Any) -> JsonObject:
        if "wait" in json.dumps(params):
            await cancelled.wait()
            return {"stopReason": acp.CANCELLED}
        return {"stopReason": acp.END_TURN}

    agent.notify = notify  # type: ignore[method-assign]
    agent.handlers[acp.SESSION_PROMPT] = until_cancelled

    async def scenario(h: Harness) -> None:
        sid = await h.session()

        def prompt(msg_id: int, text: str) -> None:
            blocks = [{"type": "text", "text": text}]
            h.send(
                jsonrpc.request(msg_id, acp.SESSION_PROMPT, {"sessionId": sid, "prompt": blocks})
            )

        prompt(900, "wait for it")
        prompt(901, "next")
        while not any(method == acp.SESSION_PROMPT for method, _ in agent.calls):
            await asyncio.sleep(0)
        h.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": 900}))
        first = await h.editor.response(900)
        assert first["result"]["stopReason"] == acp.CANCELLED
        assert (await h.editor.response(901))["result"]["stopReason"] == acp.END_TURN
        assert (acp.SESSION_CANCEL, {"sessionId": "agent-1"}) in agent.notifications

    run(tmp_path, scenario, agent)


def test_a_notification_without_params_reaches_the_agent_without_params(tmp_path: Path) -> None:
    """Issue 32, 7: nothing is added to what the editor sent."""

    async def scenario(h: Harness) -> None:
        await h.session()
        h.send({"jsonrpc": "2.0", "method": "_ping"})
        h.send({"jsonrpc": "2.0", "method": "_list", "params": [1, 2]})
        await h.editor.settled()
        assert ("_ping", None) in h.agent.notifications
        assert ("_list", [1, 2]) in h.agent.notifications

    run(tmp_path, scenario)


def test_close_carries_the_editors_meta_and_returns_the_agents_result(tmp_path: Path) -> None:
    """Issue 32, 6."""
    agent = FakeAgent({"sessionCapabilities": {"resume": {}, "close": {}}})

    async def closed(params: Any) -> JsonObject:
        return {"_meta": {"agent": "closed it"}}

    agent.handlers[acp.SESSION_CLOSE] = closed

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        answer = await h.result(acp.SESSION_CLOSE, {"sessionId": sid, "_meta": {"why": "done"}})
        assert answer == {"_meta": {"agent": "closed it"}}
        [(_, sent)] = [call for call in h.agent.calls if call[0] == acp.SESSION_CLOSE]
        assert sent == {"sessionId": "agent-1", "_meta": {"why": "done"}}

    run(tmp_path, scenario, agent)


def test_extension_requests_naming_a_session_acpctl_does_not_know_are_relayed(
    tmp_path: Path,
) -> None:
    """Issue 32, 3: both ways, the id mapped only where acpctl knows it."""
    agent = FakeAgent()

    async def echo(params: Any) -> JsonObject:
        return {"got": params}

    agent.handlers["_vendor/peek"] = echo

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        theirs = await h.result("_vendor/peek", {"sessionId": "elsewhere"})
        assert theirs == {"got": {"sessionId": "elsewhere"}}
        ours = await h.result("_vendor/peek", {"sessionId": sid})
        assert ours == {"got": {"sessionId": "agent-1"}}
        asked = h.agent.ask("_vendor/ask", {"sessionId": "child-7"})
        request = await h.editor.request("_vendor/ask")
        assert request["params"] == {"sessionId": "child-7"}
        h.send({"jsonrpc": "2.0", "id": request["id"], "result": {"ok": True}})
        assert (await asyncio.wait_for(asked, 5))["result"] == {"ok": True}

    run(tmp_path, scenario, agent)


def test_what_the_agent_streams_while_answering_a_fork_reaches_the_editor(
    tmp_path: Path,
) -> None:
    """Issue 32, 2: opencode replays the forked history on the new id before the fork's
    answer names it; those updates are held, then relayed after the answer and recorded."""
    agent = FakeAgent({"sessionCapabilities": {"resume": {}, "fork": {}}})

    async def fork(params: Any) -> JsonObject:
        for text in ("replayed one", "replayed two"):
            agent.update(
                "agent-fork",
                {
                    "sessionUpdate": acp.AGENT_MESSAGE_CHUNK,
                    "content": {"type": "text", "text": text},
                },
            )
        agent.update("somebody-else", {"sessionUpdate": acp.PLAN, "entries": []})
        await agent.batch_end()
        return {"sessionId": "agent-fork"}

    agent.handlers[acp.SESSION_FORK] = fork

    async def scenario(h: Harness) -> None:
        parent = await h.session()
        forked = await h.result(
            acp.SESSION_FORK, {"sessionId": parent, "cwd": "/tmp", "mcpServers": []}
        )
        fork_id = forked["sessionId"]
        await h.editor.settled()
        updates = [
            m["params"]
            for m in h.editor.notifications(acp.SESSION_UPDATE)
            if m["params"]["sessionId"] == fork_id
        ]
        assert [u["update"]["content"]["text"] for u in updates] == ["replayed one", "replayed two"]
        assert not [
            m
            for m in h.editor.notifications(acp.SESSION_UPDATE)
            if m["params"]["sessionId"] == "somebody-else"
        ]
        h.conn.recorder.batch_end()
        stored = [e for e in h.store.iter_replay(fork_id)]
        assert len(stored) == 2

    run(tmp_path, scenario, agent)


def test_session_list_shows_an_open_session_as_it_is_now(tmp_path: Path) -> None:
    """Issue 32, 5: after a turn, the list had turns 0 and the creation time, and no title
    the agent had set."""

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        await h.result(
            acp.SESSION_PROMPT, {"sessionId": sid, "prompt": [{"type": "text", "text": "q"}]}
        )
        h.agent.update("agent-1", {"sessionUpdate": acp.SESSION_INFO_UPDATE, "title": "Agent's"})
        await h.agent.batch_end()
        [entry] = (await h.result(acp.SESSION_LIST, {}))["sessions"]
        assert entry["title"] == "Agent's"
        assert entry["_meta"]["acpctl"]["turns"] == 1
        record = h.conn.sessions.get(sid)
        assert record is not None and entry["updatedAt"] == record.meta.updated

    run(tmp_path, scenario)


def test_session_list_takes_the_agent_s_own_title_over_acpctl_s_guess(tmp_path: Path) -> None:
    """Issue 32, 5: opencode names its sessions itself, in its own session/list; acpctl's
    title from the first prompt gave way to nothing."""
    agent = FakeAgent({"sessionCapabilities": {"resume": {}, "list": {}}})

    async def agent_list(params: Any) -> JsonObject:
        return {"sessions": [{"sessionId": "agent-1", "cwd": "/tmp", "title": "Fix the parser"}]}

    agent.handlers[acp.SESSION_LIST] = agent_list

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        await h.result(
            acp.SESSION_PROMPT,
            {"sessionId": sid, "prompt": [{"type": "text", "text": "the parser fails on x"}]},
        )
        [entry] = (await h.result(acp.SESSION_LIST, {}))["sessions"]
        assert entry["sessionId"] == sid and entry["title"] == "Fix the parser"

    run(tmp_path, scenario, agent)


def test_a_batchs_members_reach_the_agent_in_the_batchs_order(tmp_path: Path) -> None:
    """Issue 32, 8: members that name a session went through a task, the others at once,
    so the agent saw them out of order."""
    agent = FakeAgent()

    async def ok(params: Any) -> JsonObject:
        return {}

    agent.handlers["_vendor/a"] = agent.handlers["_vendor/b"] = ok

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        h.agent.calls.clear()
        h.send(
            [
                jsonrpc.request(10, "_vendor/a", {"sessionId": sid}),
                jsonrpc.request(11, "_vendor/b", {}),
                jsonrpc.request(12, acp.SESSION_PROMPT, {"sessionId": sid, "prompt": []}),
            ]
        )
        for _ in range(50):
            await asyncio.sleep(0)
        [answers] = [m for m in h.editor.messages if isinstance(m, list)]
        assert [a["id"] for a in answers] == [10, 11, 12]
        assert [method for method, _ in h.agent.calls] == [
            "_vendor/a",
            "_vendor/b",
            acp.SESSION_PROMPT,
        ]
        # Issue 43, 11: a notification went at once, ahead of the requests before it.
        h.agent.methods.clear()
        h.send(
            [
                jsonrpc.request(13, "_vendor/a", {"sessionId": sid}),
                jsonrpc.request(14, "_vendor/b", {}),
                jsonrpc.notification("_vendor/note", {"sessionId": sid}),
            ]
        )
        for _ in range(50):
            await asyncio.sleep(0)
        assert h.agent.methods == ["_vendor/a", "_vendor/b", "_vendor/note"]

    run(tmp_path, scenario, agent)


def test_a_subagent_announced_by_an_open_session_is_relayed_both_ways_and_kept(
    tmp_path: Path,
) -> None:
    """Issue 32, 1: the unstable schema's subagent_update announces a child session whose
    events come on the same connection. Its updates reach the editor (they were dropped),
    its permission request too (acpctl answered -32002), the editor's answer reaches the
    agent, and its history is kept as a session of its own, linked to the parent."""

    async def scenario(h: Harness) -> None:
        parent = await h.session()
        announce = {
            "sessionUpdate": acp.SUBAGENT_UPDATE,
            "sessionId": "child-1",
            "title": "Explore the parser",
        }
        h.agent.update(parent, announce)
        chunk = {
            "sessionUpdate": acp.AGENT_MESSAGE_CHUNK,
            "content": {"type": "text", "text": "reading parser.py"},
        }
        h.agent.update("child-1", chunk)
        asked = h.agent.ask(
            acp.REQUEST_PERMISSION,
            {
                "sessionId": "child-1",
                "toolCall": {"toolCallId": "t1", "title": "Read parser.py"},
                "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
            },
        )
        request = await h.editor.request(acp.REQUEST_PERMISSION)
        assert request["params"]["sessionId"] == "child-1"
        answer = {"outcome": {"outcome": "selected", "optionId": "ok"}}
        h.send(jsonrpc.result(request["id"], answer))
        assert (await asyncio.wait_for(asked, 5))["result"] == answer
        updates = [n["params"] for n in h.editor.notifications(acp.SESSION_UPDATE)]
        assert {"sessionId": parent, "update": announce} in updates
        assert {"sessionId": "child-1", "update": chunk} in updates
        h.conn.recorder.batch_end()
        meta = h.store.read_meta("child-1")
        assert meta.subagent_of == parent and meta.title == "Explore the parser"
        stored = [stored.update for stored in h.store.iter_replay("child-1")]
        assert chunk in stored

    run(tmp_path, scenario)


def test_an_agent_that_answers_a_newer_version_fails_the_handshake(tmp_path: Path) -> None:
    """Issue 43, 6: an agent answering `protocolVersion: 2` when asked 1 was relabelled v1,
    with its v2 traffic then relayed as if it were v1's."""

    async def scenario(h: Harness) -> None:
        async def v2(params: Any) -> JsonObject:
            return {"protocolVersion": 2, "capabilities": {}, "info": {"name": "v2-only"}}

        h.agent.handlers[acp.INITIALIZE] = v2
        answer = await h.request(acp.INITIALIZE, {"protocolVersion": 1})
        assert answer["error"]["message"] == "acpctl speaks ACP v1; the agent answered 2"
        assert answer["error"]["data"] == {"agentProtocolVersion": 2}
        # And the connection serves nothing else, not even the list of acpctl's store.
        listed = await h.request(acp.SESSION_LIST, {})
        assert listed["error"]["code"] == acp.INVALID_REQUEST
        assert "initialize failed on this connection" in listed["error"]["message"]

    run(tmp_path, scenario)


def test_a_v2_editors_initialize_reaches_the_agent_in_v1_fields(tmp_path: Path) -> None:
    """Issue 43, 6: a v2 editor's `info` and `capabilities` reached the agent with only the
    version rewritten; they are converted as the SDK's router converts them."""
    seen: list[JsonObject] = []

    async def scenario(h: Harness) -> None:
        async def initialize(params: Any) -> JsonObject:
            seen.append(params)
            return {"protocolVersion": 1, "agentCapabilities": {}}

        h.agent.handlers[acp.INITIALIZE] = initialize
        answer = await h.result(
            acp.INITIALIZE,
            {
                "protocolVersion": 2,
                "info": {"name": "v2-editor", "version": "9"},
                "capabilities": {"elicitation": {"form": {}}, "auth": {"terminal": {}}},
            },
        )
        assert answer["protocolVersion"] == 1
        assert seen == [
            {
                "protocolVersion": 1,
                "clientInfo": {"name": "v2-editor", "version": "9"},
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    "terminal": False,
                    "session": {"configOptions": {"boolean": {}}},
                    "plan": {},
                    "auth": {"terminal": True},
                    "elicitation": {"form": {}},
                },
            }
        ]

    run(tmp_path, scenario)


def test_a_v2_only_agent_refusing_1_is_said_plainly(tmp_path: Path) -> None:
    """Issue 43, 6: a v2-only agent answers -32022 "requested: 1" to an editor that asked
    for 2; the error says why acpctl asked for 1."""

    async def scenario(h: Harness) -> None:
        async def refuse(params: Any) -> JsonObject:
            raise RpcError(
                acp.UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"requested": params["protocolVersion"], "supported": [2]},
            )

        h.agent.handlers[acp.INITIALIZE] = refuse
        answer = await h.request(acp.INITIALIZE, {"protocolVersion": 2, "info": {"name": "e"}})
        error = answer["error"]
        assert error["code"] == acp.UNSUPPORTED_PROTOCOL_VERSION
        assert error["data"] == {"requested": 1, "supported": [2]}
        assert error["message"] == (
            "the agent speaks only ACP 2 and refused 1: acpctl speaks ACP v1, so it asks "
            "every agent for 1 (the editor offered 2)"
        )
        listed = await h.request(acp.SESSION_LIST, {})
        assert listed["error"]["code"] == acp.INVALID_REQUEST

    run(tmp_path, scenario)


def test_delete_returns_the_agents_result(tmp_path: Path) -> None:
    """Issue 43, 12: session/delete answered {} instead of the agent's result."""
    agent = FakeAgent(capabilities={"sessionCapabilities": {"delete": {}}})

    async def scenario(h: Harness) -> None:
        async def deleted(params: Any) -> JsonObject:
            return {"_meta": {"vendor/freed": 3}}

        h.agent.handlers[acp.SESSION_DELETE] = deleted
        sid = await h.session()
        assert await h.result(acp.SESSION_DELETE, {"sessionId": sid}) == {
            "_meta": {"vendor/freed": 3}
        }
        assert not h.store.exists(sid)

    run(tmp_path, scenario, agent)


def test_session_list_takes_the_archived_filter_as_the_schema_has_it(tmp_path: Path) -> None:
    """Issue 43, 12: the unstable `archived` filter was never passed on; then it was taken
    as a boolean, which the schema (a string: exclude, include, only, or one to come) and
    the TypeScript SDK's agents refuse. Archiving is the agent's state: its word places
    acpctl's own sessions too, and each listed session says whether it is archived."""
    agent = FakeAgent(capabilities={"sessionCapabilities": {"list": {}, "archive": {}}})
    put_away = {"old-one", "agent-2"}  # one only the agent knows, and one of acpctl's

    async def listed(params: Any) -> JsonObject:
        wanted = params.get("archived", "exclude")
        if wanted not in ("exclude", "include", "only"):
            raise RpcError(acp.INVALID_PARAMS, "no such filter")
        ids = [
            sid
            for sid in ("live-one", "old-one", "agent-1", "agent-2")
            if wanted == "include" or (sid in put_away) == (wanted == "only")
        ]
        return {"sessions": [{"sessionId": s, "cwd": "/w", "archived": s in put_away} for s in ids]}

    async def scenario(h: Harness) -> None:
        h.agent.handlers[acp.SESSION_LIST] = listed
        kept, archived = await h.session(), await h.session()  # agent-1 and agent-2

        async def shown(params: JsonObject) -> list[tuple[str, bool]]:
            found = (await h.result(acp.SESSION_LIST, params))["sessions"]
            return sorted((s["sessionId"], s["archived"]) for s in found)

        assert await shown({}) == sorted([(kept, False), ("live-one", False)])
        assert await shown({"archived": "exclude"}) == await shown({})
        assert await shown({"archived": "only"}) == sorted([(archived, True), ("old-one", True)])
        assert await shown({"archived": "include"}) == sorted(
            [(kept, False), (archived, True), ("live-one", False), ("old-one", True)]
        )
        assert (acp.SESSION_LIST, {"archived": "only"}) in h.agent.calls
        for refused in ("someday", True):
            bad = await h.request(acp.SESSION_LIST, {"archived": refused})
            assert bad["error"]["code"] == acp.INVALID_PARAMS
            assert "exclude, include, only" in bad["error"]["message"]

    run(tmp_path, scenario, agent)


def test_without_the_agents_archive_acpctl_archives_nothing(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        sid = await h.session()
        for wanted, ids in (
            ({}, [sid]),
            ({"archived": "include"}, [sid]),
            ({"archived": "only"}, []),
        ):
            found = (await h.result(acp.SESSION_LIST, wanted))["sessions"]
            assert [s["sessionId"] for s in found] == ids
            assert all("archived" not in s for s in found)  # an agent that archives says it

    run(tmp_path, scenario)


def test_a_resume_keeps_the_fields_the_agent_added(tmp_path: Path) -> None:
    """Issue 43, 12: load and resume results lost fields the agent added."""
    agent = FakeAgent(capabilities={"sessionCapabilities": {"resume": {}, "close": {}}})

    async def scenario(h: Harness) -> None:
        async def resumed(params: Any) -> JsonObject:
            return {"_meta": {"vendor/warm": True}, "sessionId": "agent-raw-id"}

        h.agent.handlers[acp.SESSION_RESUME] = resumed
        sid = await h.session()
        await h.result(acp.SESSION_CLOSE, {"sessionId": sid})
        result = await h.result(acp.SESSION_RESUME, {"sessionId": sid, "cwd": "/w"})
        assert result["_meta"] == {"vendor/warm": True}
        # Issue 54, 5 (N6): the agent names the session in its answer, and so does
        # acpctl's, by acpctl's id: the agent's own never reaches the editor.
        assert result["sessionId"] == sid != "agent-raw-id"
        # and a later answer from acpctl's state keeps both, as the agent's own would
        again = h.another()
        await again.result(acp.INITIALIZE, {"protocolVersion": 1})
        joined = await again.result(acp.SESSION_RESUME, {"sessionId": sid, "cwd": "/w"})
        assert joined["_meta"] == {"vendor/warm": True} and joined["sessionId"] == sid

    run(tmp_path, scenario, agent)


def test_new_and_unknown_update_kinds_are_relayed_recorded_and_replayed(
    tmp_path: Path,
) -> None:
    """Issue 43, 5: compaction, notices (drafts when the issue was written) and a kind no
    schema names yet: relayed as the agent's bytes, recorded as them, replayed as them on
    load (a notice is left out of a load's replay, as ACP says it is no part of the
    history; acpctl's link, which asks for the replay as recorded, gets it too)."""
    kinds: list[JsonObject] = [
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"},
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "c1",
            "content": {"type": "text", "text": "kept: the parser work"},
        },
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed"},
        {"sessionUpdate": "notice", "severity": "warning", "title": "Rate limited"},
        {"sessionUpdate": "hologram_update", "frames": [1, 2.5, None], "_meta": {"v": "x"}},
    ]

    async def live(h: Harness) -> None:
        sid = await h.session()
        for update in kinds:
            h.agent.update("agent-1", update)
        await h.agent.batch_end()
        relayed = [m["params"]["update"] for m in h.editor.notifications(acp.SESSION_UPDATE)]
        assert relayed == kinds
        stored = [u.update for u in h.store.iter_replay(sid)]
        assert stored == kinds
        await h.server.shutdown()

    run(tmp_path, live)

    async def loaded(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        await h.result(acp.SESSION_LOAD, {"sessionId": "agent-1", "cwd": "/tmp", "mcpServers": []})
        replayed = [m["params"]["update"] for m in h.editor.notifications(acp.SESSION_UPDATE)]
        assert replayed == [k for k in kinds if k["sessionUpdate"] != "notice"]
        as_recorded = h.another()
        await as_recorded.result(
            acp.SESSION_LOAD,
            {
                "sessionId": "agent-1",
                "cwd": "/tmp",
                "mcpServers": [],
                "_meta": {acp.REPLAY_META: acp.REPLAY_AS_RECORDED},
            },
        )
        again = [
            m["params"]["update"] for m in as_recorded.editor.notifications(acp.SESSION_UPDATE)
        ]
        assert again == kinds

    run(tmp_path, loaded)


def test_the_terminal_shows_notices_and_compactions_and_skips_kinds_it_does_not_know() -> None:
    """Issue 43, 5: what `acpctl run` and `sessions show` do with each kind."""
    import io

    from acpctl.terminal.render import Renderer

    out = io.StringIO()
    renderer = Renderer(out)
    for update in (
        {"sessionUpdate": "notice", "severity": "warning", "title": "Rate\x1b[2J limited"},
        {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed"},
        {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1", "content": {}},
        {"sessionUpdate": "hologram_update", "frames": [1]},
    ):
        renderer.update(update)
    assert out.getvalue() == "[warning] Rate^[[2J limited\n(context compaction: completed)\n"


@pytest.mark.parametrize(
    "method", [acp.SESSION_SET_MODE, acp.SESSION_PROMPT, "_vendor/ping", "_vendor/session_ping"]
)
def test_what_the_agent_writes_after_a_result_reaches_the_editor_after_it(
    tmp_path: Path, method: str
) -> None:
    """Issue 43, 10: codex-acp writes set_mode's result and then a config_option_update;
    the editor got the update first, as the result went through a task. Relayed answers
    now go out from the read loop: a setting, a prompt, a request with no session (the
    fast path) and one with a session."""
    agent = FakeAgent()
    agent.handlers[acp.SESSION_SET_MODE] = agent.ok
    agent.handlers["_vendor/ping"] = agent.ok
    agent.handlers["_vendor/session_ping"] = agent.ok
    behind = {"sessionUpdate": acp.CONFIG_OPTION_UPDATE, "configOptions": []}
    agent.after_answer[method] = lambda params: agent.update("agent-1", behind)

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        params: JsonObject = {"sessionId": sid}
        if method == acp.SESSION_SET_MODE:
            params["modeId"] = "code"
        elif method == acp.SESSION_PROMPT:
            params["prompt"] = [{"type": "text", "text": "hi"}]
        elif method == "_vendor/ping":
            params = {}
        answer = await h.request(method, params)
        assert "result" in answer, answer
        await h.editor.settled()
        order = [
            "answer" if m.get("id") == answer["id"] and "method" not in m else "update"
            for m in h.editor.messages
            if m.get("id") == answer["id"]
            or m.get("params", {}).get("update", {}).get("sessionUpdate")
            == acp.CONFIG_OPTION_UPDATE
        ]
        assert order == ["answer", "update"]

    run(tmp_path, scenario, agent)


def test_set_title_is_kept_in_the_history_open_or_not(tmp_path: Path) -> None:
    """session/set_title (unstable; the session need not be open): what the agent took is
    the history's title too, for a session open here or one only in the store; what it
    refused is not."""
    agent = FakeAgent(capabilities={"sessionCapabilities": {"close": {}}})

    async def scenario(h: Harness) -> None:
        async def titled(params: Any) -> JsonObject:
            if params["title"] == "refused":
                raise RpcError(acp.INVALID_PARAMS, "no such title")
            return {}

        h.agent.handlers[acp.SESSION_SET_TITLE] = titled
        sid = await h.session()
        await h.result(acp.SESSION_SET_TITLE, {"sessionId": sid, "title": "Open one"})
        await h.conn.recorder.committed()
        assert h.store.read_meta(sid).title == "Open one"
        await h.result(acp.SESSION_CLOSE, {"sessionId": sid})
        await h.result(acp.SESSION_SET_TITLE, {"sessionId": sid, "title": "Closed one"})
        assert h.store.read_meta(sid).title == "Closed one"
        assert (acp.SESSION_SET_TITLE, {"sessionId": "agent-1", "title": "Closed one"}) in (
            h.agent.calls
        )  # under the agent's id
        refused = await h.request(acp.SESSION_SET_TITLE, {"sessionId": sid, "title": "refused"})
        assert "error" in refused
        assert h.store.read_meta(sid).title == "Closed one"

    run(tmp_path, scenario, agent)


def test_a_cancel_the_agent_ignores_is_settled_for_the_editor_after_a_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51, 8: an agent stopped (SIGSTOP) or stuck never ends a cancelled turn; the
    editor's prompt is answered `cancelled` after the deadline, with why, and the agent's
    late answer is dropped."""
    from acpctl.runner import turns

    monkeypatch.setattr(turns, "CANCEL_DEADLINE_S", 0.2)
    agent = FakeAgent()
    never = asyncio.Event()

    async def stuck(params: Any) -> JsonObject:
        await never.wait()
        return {"stopReason": acp.END_TURN}

    agent.handlers[acp.SESSION_PROMPT] = stuck

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        blocks = [{"type": "text", "text": "forever"}]
        h.send(jsonrpc.request(900, acp.SESSION_PROMPT, {"sessionId": sid, "prompt": blocks}))
        while not any(method == acp.SESSION_PROMPT for method, _ in agent.calls):
            await asyncio.sleep(0)
        h.send(jsonrpc.notification(acp.SESSION_CANCEL, {"sessionId": sid}))
        answer = await h.editor.response(900)
        assert answer["result"]["stopReason"] == acp.CANCELLED
        assert "did not end the turn" in answer["result"]["_meta"][acp.ENDED_BY_ACPCTL_META]
        never.set()  # the agent's late answer: no second answer to the editor
        await h.editor.settled()
        assert [m for m in h.editor.messages if m.get("id") == 900] == [answer]

    run(tmp_path, scenario, agent)
