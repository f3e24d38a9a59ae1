"""Issue 14, in-process (fast tier): what an editor and an agent do directly also works
through the server: prompt queueing, close during a turn, session state, fork, list and
load per agent, the agent's own sessions, ids in every schema path, protocol versions,
logout."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.runner.attach import CONTEXT_LOST_NOTE
from acpctl.store.sessions import SessionMeta
from tests.fake_backend import FakeAgent, Harness
from tests.test_server import events, run

MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}],
}
EFFORT = {
    "id": "effort",
    "name": "Effort",
    "type": "select",
    "currentValue": "low",
    "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"}],
}


def stateful_agent(capabilities: dict[str, Any] | None = None) -> FakeAgent:
    """An agent with modes and a config option, that forgets sessions when restarted."""
    agent = FakeAgent(capabilities)
    sessions = iter(range(1, 1000))

    async def new(params: Any) -> dict[str, Any]:
        return {
            "sessionId": f"agent-{next(sessions)}",
            "modes": MODES,
            "configOptions": [EFFORT],
        }

    async def set_mode(params: Any) -> dict[str, Any]:
        return {}

    async def set_option(params: Any) -> dict[str, Any]:
        return {"configOptions": [{**EFFORT, "currentValue": params["value"]}]}

    agent.handlers[acp.SESSION_NEW] = new
    agent.handlers[acp.SESSION_SET_MODE] = set_mode
    agent.handlers[acp.SESSION_SET_CONFIG_OPTION] = set_option
    return agent


def held_prompts(agent: FakeAgent) -> list[asyncio.Future[dict[str, Any]]]:
    """Prompts the agent holds until the test answers them (in the order they came)."""
    waiting: list[asyncio.Future[dict[str, Any]]] = []

    async def held(params: Any) -> dict[str, Any]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        waiting.append(future)
        return await future

    agent.handlers[acp.SESSION_PROMPT] = held
    return waiting


async def until(condition: Any, timeout: float = 5) -> None:
    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(wait(), timeout)


def prompt(sid: str, text: str) -> dict[str, Any]:
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}


# == prompt queueing ====================================================================


def test_prompts_to_a_busy_session_wait_their_turn_in_order(tmp_path: Path) -> None:
    agent = FakeAgent()
    waiting = held_prompts(agent)

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        for n in (1, 2, 3):
            h.send(jsonrpc.request(f"p{n}", acp.SESSION_PROMPT, prompt(sid, f"n{n}")))
        await until(lambda: len(waiting) == 1)
        await asyncio.sleep(0.05)
        assert len(waiting) == 1  # the second is not at the agent while the first runs
        for n in (1, 2, 3):
            await until(lambda n=n: len(waiting) == n)
            waiting[-1].set_result({"stopReason": acp.END_TURN})
            assert (await h.editor.response(f"p{n}"))["result"]["stopReason"] == acp.END_TURN
        prompts = [p["prompt"][0]["text"] for m, p in agent.calls if m == acp.SESSION_PROMPT]
        assert prompts == ["n1", "n2", "n3"]

    run(tmp_path, scenario, agent)


def test_cancel_ends_the_running_prompt_and_every_queued_one(tmp_path: Path) -> None:
    agent = FakeAgent()
    waiting = held_prompts(agent)

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        for n in (1, 2, 3):
            h.send(jsonrpc.request(f"p{n}", acp.SESSION_PROMPT, prompt(sid, f"n{n}")))
        await until(lambda: len(waiting) == 1)
        await asyncio.sleep(0.01)
        h.send(jsonrpc.notification(acp.SESSION_CANCEL, {"sessionId": sid}))
        await until(lambda: (acp.SESSION_CANCEL, {"sessionId": "agent-1"}) in agent.notifications)
        waiting[0].set_result({"stopReason": acp.CANCELLED})  # the agent honours it
        for n in (1, 2, 3):
            assert (await h.editor.response(f"p{n}"))["result"]["stopReason"] == acp.CANCELLED
        assert len(waiting) == 1  # the queued ones never reached the agent
        # The session takes prompts again.
        h.send(jsonrpc.request("p4", acp.SESSION_PROMPT, prompt(sid, "n4")))
        await until(lambda: len(waiting) == 2)
        waiting[1].set_result({"stopReason": acp.END_TURN})
        assert (await h.editor.response("p4"))["result"]["stopReason"] == acp.END_TURN

    run(tmp_path, scenario, agent)


def test_an_agent_that_queues_prompts_gets_them_at_once(tmp_path: Path) -> None:
    agent = FakeAgent(
        {"sessionCapabilities": {"resume": {}}, "_meta": {"claudeCode": {"promptQueueing": True}}}
    )
    waiting = held_prompts(agent)

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        h.send(jsonrpc.request("p1", acp.SESSION_PROMPT, prompt(sid, "one")))
        h.send(jsonrpc.request("p2", acp.SESSION_PROMPT, prompt(sid, "two")))
        await until(lambda: len(waiting) == 2)
        waiting[1].set_result({"stopReason": acp.END_TURN})
        waiting[0].set_result({"stopReason": acp.END_TURN})
        for msg_id in ("p1", "p2"):
            assert (await h.editor.response(msg_id))["result"]["stopReason"] == acp.END_TURN

    run(tmp_path, scenario, agent)


# == close during a turn ================================================================


def test_close_during_a_turn_cancels_it_and_nothing_leaks_afterwards(tmp_path: Path) -> None:
    agent = FakeAgent({"sessionCapabilities": {"close": {}}})
    waiting = held_prompts(agent)

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        h.send(jsonrpc.request("p1", acp.SESSION_PROMPT, prompt(sid, "long")))
        h.send(jsonrpc.request("p2", acp.SESSION_PROMPT, prompt(sid, "queued")))
        await until(lambda: len(waiting) == 1)
        h.send(jsonrpc.request("close", acp.SESSION_CLOSE, {"sessionId": sid}))
        await until(lambda: (acp.SESSION_CANCEL, {"sessionId": "agent-1"}) in agent.notifications)
        assert not any(m == acp.SESSION_CLOSE for m, _ in agent.calls)  # cancelled first
        waiting[0].set_result({"stopReason": acp.CANCELLED})
        assert (await h.editor.response("p1"))["result"]["stopReason"] == acp.CANCELLED
        assert (await h.editor.response("p2"))["result"]["stopReason"] == acp.CANCELLED
        assert (await h.editor.response("close"))["result"] == {}
        assert (acp.SESSION_CLOSE, {"sessionId": "agent-1"}) in agent.calls
        before = len(h.editor.messages)
        agent.update("agent-1", {"sessionUpdate": acp.AGENT_MESSAGE_CHUNK, "content": {}})
        await agent.batch_end()
        assert len(h.editor.messages) == before  # the late update reaches nobody
        assert events(h, sid)[-1]["stopReason"] == acp.CANCELLED

    run(tmp_path, scenario, agent)


# == session state ======================================================================


def test_state_is_kept_and_answers_load_of_an_open_session(tmp_path: Path) -> None:
    agent = stateful_agent()

    async def scenario(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        new = await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
        sid = new["sessionId"]
        assert new["modes"]["currentModeId"] == "ask"
        await h.result(acp.SESSION_SET_MODE, {"sessionId": sid, "modeId": "code"})
        await h.result(
            acp.SESSION_SET_CONFIG_OPTION, {"sessionId": sid, "configId": "effort", "value": "high"}
        )
        for method in (acp.SESSION_LOAD, acp.SESSION_RESUME):
            again = await h.result(method, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
            assert again["modes"]["currentModeId"] == "code", method
            assert again["configOptions"][0]["currentValue"] == "high", method
        # The agent switches mode itself: kept too.
        agent.update(
            agent_id(h, sid), {"sessionUpdate": acp.CURRENT_MODE_UPDATE, "currentModeId": "ask"}
        )
        again = await h.result(
            acp.SESSION_RESUME, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        assert again["modes"]["currentModeId"] == "ask"

    run(tmp_path, scenario, agent)


def agent_id(h: Harness, sid: str) -> str:
    record = h.conn.sessions.get(sid)
    assert record is not None and record.agent_session_id is not None
    return record.agent_session_id


def test_a_fresh_agent_session_gets_the_chosen_mode_and_options_back(tmp_path: Path) -> None:
    """After a restart the agent cannot resume: the stand-in session is given the mode and
    options the user chose, and the editor is told the context was lost."""
    agent = stateful_agent({})  # no resume, no load

    async def scenario(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        sid = (await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
        await h.result(acp.SESSION_SET_MODE, {"sessionId": sid, "modeId": "code"})
        await h.result(
            acp.SESSION_SET_CONFIG_OPTION, {"sessionId": sid, "configId": "effort", "value": "high"}
        )
        await h.result(acp.SESSION_PROMPT, prompt(sid, "hello"))
        agent.die()
        await h.result(acp.SESSION_PROMPT, prompt(sid, "again"))
        fresh = agent.calls[-4:]
        assert [m for m, _ in fresh] == [
            acp.SESSION_NEW,
            acp.SESSION_SET_MODE,
            acp.SESSION_SET_CONFIG_OPTION,
            acp.SESSION_PROMPT,
        ]
        assert fresh[1][1] == {"sessionId": "agent-2", "modeId": "code"}
        assert fresh[2][1] == {"sessionId": "agent-2", "configId": "effort", "value": "high"}
        state = await h.result(
            acp.SESSION_RESUME, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        assert state["modes"]["currentModeId"] == "code"
        assert state["configOptions"][0]["currentValue"] == "high"
        await h.server.shutdown()  # the editor goes: the metadata is written

    h = run(tmp_path, scenario, agent)
    (meta,) = [
        h.store.read_meta(p.name)
        for p in (tmp_path / "sessions").iterdir()
        if p.is_dir() and not p.name.startswith(".")
    ]
    assert meta.state == {"mode": "code", "config": {"effort": "high"}}


def test_a_stored_session_reopened_later_gets_its_state_back(tmp_path: Path) -> None:
    agent = stateful_agent({})

    async def first(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        sid = (await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"]
        await h.result(acp.SESSION_SET_MODE, {"sessionId": sid, "modeId": "code"})
        await h.result(acp.SESSION_PROMPT, prompt(sid, "hello"))
        await h.server.shutdown()

    run(tmp_path, first, agent)
    (sid,) = [
        p.name
        for p in (tmp_path / "sessions").iterdir()
        if p.is_dir() and not p.name.startswith(".")
    ]

    async def second(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        response = await h.request(
            acp.SESSION_LOAD, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
        )
        result = response["result"]
        assert result["modes"]["currentModeId"] == "code"
        assert result["_meta"]["acpctl"]["note"] == CONTEXT_LOST_NOTE
        assert (acp.SESSION_SET_MODE, {"sessionId": "agent-1", "modeId": "code"}) in h.agent.calls

    run(tmp_path, second, stateful_agent({}))


# == fork ===============================================================================


def test_fork_by_the_agent_is_registered_with_the_parents_history(tmp_path: Path) -> None:
    agent = FakeAgent({"sessionCapabilities": {"fork": {}, "resume": {}}})

    async def fork(params: Any) -> dict[str, Any]:
        assert params["sessionId"] == "agent-1"
        return {"sessionId": "agent-fork"}

    agent.handlers[acp.SESSION_FORK] = fork

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        await h.result(acp.SESSION_PROMPT, prompt(sid, "before the fork"))
        forked = await h.result(acp.SESSION_FORK, {"sessionId": sid, "cwd": "/tmp"})
        fid = forked["sessionId"]
        assert fid == "agent-fork"
        response = await h.result(acp.SESSION_PROMPT, prompt(fid, "in the fork"))
        assert response["stopReason"] == acp.END_TURN
        assert (acp.SESSION_PROMPT, prompt("agent-fork", "in the fork")) in agent.calls
        meta = h.store.read_meta(fid)
        assert meta.parent_id == sid and meta.title == "before the fork"
        texts = [str(e) for e in events(h, fid)]
        assert any("before the fork" in t for t in texts) and any("in the fork" in t for t in texts)
        assert not any("in the fork" in str(e) for e in events(h, sid))
        listed = await h.result(acp.SESSION_LIST, {})
        by_id = {info["sessionId"]: info for info in listed["sessions"]}
        assert by_id[fid]["_meta"]["acpctl"]["parentId"] == sid

    run(tmp_path, scenario, agent)


def test_fork_without_the_agent_copies_history_and_says_context_is_lost(tmp_path: Path) -> None:
    agent = stateful_agent({})

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        await h.result(acp.SESSION_SET_MODE, {"sessionId": sid, "modeId": "code"})
        await h.result(acp.SESSION_PROMPT, prompt(sid, "before the fork"))
        forked = await h.result(acp.SESSION_FORK, {"sessionId": sid, "cwd": "/tmp"})
        fid = forked["sessionId"]
        assert fid != sid
        assert forked["_meta"]["acpctl"]["note"] == CONTEXT_LOST_NOTE
        assert forked["modes"]["currentModeId"] == "code"  # the parent's choice
        assert (await h.result(acp.SESSION_PROMPT, prompt(fid, "in the fork")))[
            "stopReason"
        ] == acp.END_TURN
        assert h.store.read_meta(fid).parent_id == sid
        assert any("before the fork" in str(e) for e in events(h, fid))

    run(tmp_path, scenario, agent)


# == list and load per agent, the agent's own sessions ==================================


def other_agents_session(root: Path) -> str:
    from acpctl.store.sessions import SessionStore

    meta = SessionMeta(
        id="demo-session", agent="demo", command=["demo"], cwd="/tmp", title="demo's"
    )
    SessionStore(root).create(meta).close()
    return meta.id


def test_a_connection_lists_and_loads_only_its_own_agents_sessions(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        other = other_agents_session(tmp_path / "sessions")
        sid = await h.session()
        listed = await h.result(acp.SESSION_LIST, {})
        assert [info["sessionId"] for info in listed["sessions"]] == [sid]
        response = await h.request(
            acp.SESSION_LOAD, {"sessionId": other, "cwd": "/tmp", "mcpServers": []}
        )
        assert response["error"]["code"] == acp.RESOURCE_NOT_FOUND
        assert "belongs to agent 'demo'" in response["error"]["message"]
        assert not h.editor.notifications(acp.SESSION_UPDATE)  # nothing replayed

    run(tmp_path, scenario)


def test_the_agents_own_sessions_are_listed_and_loadable(tmp_path: Path) -> None:
    agent = FakeAgent({"loadSession": True, "sessionCapabilities": {"list": {}}})

    async def agent_list(params: Any) -> dict[str, Any]:
        sessions = [
            {
                "sessionId": "older-x",
                "cwd": "/tmp",
                "title": "made elsewhere",
                "updatedAt": "2020-01-01T00:00:00Z",
            },
            {"sessionId": "other-dir", "cwd": "/elsewhere"},
        ]
        if params.get("cwd"):
            sessions = [s for s in sessions if s["cwd"] == params["cwd"]]
        return {"sessions": sessions}

    async def load(params: Any) -> dict[str, Any]:
        if params["sessionId"] != "older-x":
            raise RpcError(acp.RESOURCE_NOT_FOUND, "no such session")
        agent.update(
            "older-x",
            {
                "sessionUpdate": acp.USER_MESSAGE_CHUNK,
                "content": {"type": "text", "text": "old question"},
            },
        )
        await agent.batch_end()
        return {}

    agent.handlers[acp.SESSION_LIST] = agent_list
    agent.handlers[acp.SESSION_LOAD] = load

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        listed = await h.result(acp.SESSION_LIST, {"cwd": "/tmp"})
        assert [info["sessionId"] for info in listed["sessions"]] == [sid, "older-x"]
        await h.result(acp.SESSION_LOAD, {"sessionId": "older-x", "cwd": "/tmp", "mcpServers": []})
        replayed = h.editor.notifications(acp.SESSION_UPDATE)
        assert replayed[-1]["params"]["sessionId"] == "older-x"
        assert (await h.result(acp.SESSION_PROMPT, prompt("older-x", "new question")))[
            "stopReason"
        ] == acp.END_TURN
        recorded = [str(e) for e in events(h, "older-x")]
        assert any("old question" in t for t in recorded) and any(
            "new question" in t for t in recorded
        )
        # Now in acpctl's history: listed once.
        listed = await h.result(acp.SESSION_LIST, {"cwd": "/tmp"})
        assert sorted(info["sessionId"] for info in listed["sessions"]) == sorted([sid, "older-x"])
        missing = await h.request(
            acp.SESSION_LOAD, {"sessionId": "nowhere", "cwd": "/tmp", "mcpServers": []}
        )
        assert missing["error"]["code"] == acp.RESOURCE_NOT_FOUND
        assert not (tmp_path / "sessions" / "nowhere").exists()

    run(tmp_path, scenario, agent)


# == ids, versions, logout ==============================================================


def test_a_request_scoped_elicitation_names_the_editors_request(tmp_path: Path) -> None:
    agent = FakeAgent()
    asked: list[asyncio.Future[dict[str, Any]]] = []

    async def prompt_with_elicitation(params: Any) -> dict[str, Any]:
        (agent_id,) = [
            i for i, entry in agent.pending.items() if entry.method == acp.SESSION_PROMPT
        ]
        asked.append(
            agent.ask(
                acp.ELICITATION_CREATE, {"requestId": agent_id, "message": "which?", "mode": "form"}
            )
        )
        await asked[0]
        return {"stopReason": acp.END_TURN}

    agent.handlers[acp.SESSION_PROMPT] = prompt_with_elicitation

    async def scenario(h: Harness) -> None:
        forms: JsonObject = {"elicitation": {"form": {}}}  # asked only of a client that can
        await h.result(acp.INITIALIZE, {"protocolVersion": 1, "clientCapabilities": forms})
        sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
        h.send(jsonrpc.request("editor-prompt-7", acp.SESSION_PROMPT, prompt(sid, "x")))
        request = await h.editor.request(acp.ELICITATION_CREATE)
        assert request["params"]["requestId"] == "editor-prompt-7"
        h.send(jsonrpc.result(request["id"], {"action": "decline"}))
        assert (await h.editor.response("editor-prompt-7"))["result"]["stopReason"] == acp.END_TURN

    run(tmp_path, scenario, agent)


def test_nested_session_ids_of_an_update_are_mapped(tmp_path: Path) -> None:
    agent = FakeAgent()
    taken = iter(["taken", "agent-2"])

    async def new(params: Any) -> dict[str, Any]:
        return {"sessionId": next(taken)}

    agent.handlers[acp.SESSION_NEW] = new

    async def scenario(h: Harness) -> None:
        h.store.create(SessionMeta(id="taken", agent="fake", command=[], cwd="/tmp")).close()
        first = await h.session()  # the agent's id is taken in the store: mapped
        assert first != "taken"
        agent.update(
            "taken",
            {
                "sessionUpdate": acp.SUBAGENT_UPDATE,
                "sessionId": "taken",
                "senderSessionId": "unknown-sub",
            },
        )
        await agent.batch_end()
        (sent,) = h.editor.notifications(acp.SESSION_UPDATE)
        assert sent["params"]["sessionId"] == first
        assert sent["params"]["update"]["sessionId"] == first
        assert sent["params"]["update"]["senderSessionId"] == "unknown-sub"

    run(tmp_path, scenario, agent)


def test_an_agent_id_taken_in_the_store_is_changed_in_the_agents_own_bytes(
    tmp_path: Path,
) -> None:
    """Issue 27, 8: when the agent's session id is taken in the store, its lines reach the
    editor as the agent wrote them with only the id changed; they were encoded again,
    every one (slow, and the agent's own spelling of its text was lost). A line whose
    params do not begin with the id is still encoded again, and still mapped."""
    agent = FakeAgent()

    async def new(params: Any) -> dict[str, Any]:
        return {"sessionId": "taken"}

    agent.handlers[acp.SESSION_NEW] = new

    async def scenario(h: Harness) -> None:
        h.store.create(SessionMeta(id="taken", agent="fake", command=[], cwd="/tmp")).close()
        first = await h.session()
        assert first != "taken"
        text = b'"caf\\u00e9, \\"sessionId\\":\\"taken\\""'
        as_sdks_write = (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"taken",'
            b'"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text",'
            b'"text":' + text + b"}}}}"
        )
        id_last = (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":'
            b'"agent_message_chunk","content":{"type":"text","text":"x"}},"sessionId":"taken"}}'
        )
        assert agent.events is not None
        for line in (as_sdks_write, id_last):
            agent.events.on_agent_notification(json.loads(line), line)
        await agent.batch_end()
        await h.editor.settled()
        ours = as_sdks_write.replace(b'"sessionId":"taken"', f'"sessionId":"{first}"'.encode(), 1)
        assert ours in h.editor.lines
        updates = h.editor.notifications(acp.SESSION_UPDATE)
        assert [u["params"]["sessionId"] for u in updates] == [first, first]
        assert updates[0]["params"]["update"]["content"]["text"] == 'café, "sessionId":"taken"'

    run(tmp_path, scenario, agent)


def test_protocol_version_is_the_lowest_of_editor_acpctl_and_agent(tmp_path: Path) -> None:
    agent = FakeAgent()

    async def initialize(params: Any) -> dict[str, Any]:
        return {
            "protocolVersion": params["protocolVersion"] if params["protocolVersion"] < 2 else 3
        }

    agent.handlers[acp.INITIALIZE] = initialize

    async def scenario(h: Harness) -> None:
        result = await h.result(acp.INITIALIZE, {"protocolVersion": 7})
        assert agent.calls[0][1]["protocolVersion"] == acp.PROTOCOL_VERSION
        assert result["protocolVersion"] == acp.PROTOCOL_VERSION

    run(tmp_path, scenario, agent)


def test_logout_forgets_the_authenticate_replayed_after_a_restart(tmp_path: Path) -> None:
    agent = FakeAgent()
    agent.handlers[acp.AUTHENTICATE] = agent.ok
    agent.handlers[acp.LOGOUT] = agent.ok

    async def scenario(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        await h.result(acp.AUTHENTICATE, {"methodId": "key"})
        assert h.conn.handshake.authenticate_params == {"methodId": "key"}
        await h.result(acp.LOGOUT, {})
        assert h.conn.handshake.authenticate_params is None

    run(tmp_path, scenario, agent)


def test_proxy_methods_are_refused_with_the_reason(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        response = await h.request(acp.PROXY_INITIALIZE, {})
        assert response["error"]["code"] == acp.METHOD_NOT_FOUND
        assert "proxy" in response["error"]["message"]

    run(tmp_path, scenario)


def test_a_queued_prompt_withdrawn_by_cancel_request_ends_at_once(tmp_path: Path) -> None:
    """$/cancel_request for a prompt still waiting its turn answers it -32800 at once; it
    never reaches the agent, and the prompts behind it keep their places."""
    agent = FakeAgent()
    waiting = held_prompts(agent)

    async def scenario(h: Harness) -> None:
        sid = await h.session()
        for n in (1, 2, 3):
            h.send(jsonrpc.request(f"p{n}", acp.SESSION_PROMPT, prompt(sid, f"n{n}")))
        await until(lambda: len(waiting) == 1)
        await asyncio.sleep(0.01)
        h.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": "p2"}))
        withdrawn = await h.editor.response("p2")
        assert withdrawn["error"]["code"] == acp.REQUEST_CANCELLED
        waiting[0].set_result({"stopReason": acp.END_TURN})
        assert (await h.editor.response("p1"))["result"]["stopReason"] == acp.END_TURN
        await until(lambda: len(waiting) == 2)
        waiting[1].set_result({"stopReason": acp.END_TURN})
        assert (await h.editor.response("p3"))["result"]["stopReason"] == acp.END_TURN
        sent = [p["prompt"][0]["text"] for m, p in agent.calls if m == acp.SESSION_PROMPT]
        assert sent == ["n1", "n3"]

    run(tmp_path, scenario, agent)


def test_a_user_message_is_replayed_with_the_id_the_other_clients_saw(tmp_path: Path) -> None:
    """Issue 54, 5 (N6): an agent's own replay names each message; acpctl's replay of the
    user's message had no messageId. Each prompt is now a message with an id, the one the
    session's other clients saw it under, kept in the history and replayed with it."""

    async def scenario(h: Harness) -> None:
        h.agent.handlers[acp.SESSION_PROMPT] = h.agent.end_turn
        sid = await h.session()
        other = h.another()
        await other.result(acp.INITIALIZE, {"protocolVersion": 1})
        await other.result(acp.SESSION_ATTACH, {"sessionId": sid, "historyPolicy": "none"})
        await h.result(acp.SESSION_PROMPT, prompt(sid, "hello"))
        await other.editor.settled()
        (seen,) = [
            m["params"]["update"]
            for m in other.editor.messages
            if m.get("method") == acp.SESSION_UPDATE
            and m["params"]["update"]["sessionUpdate"] == acp.USER_MESSAGE_CHUNK
        ]
        loader = h.another()
        await loader.result(acp.INITIALIZE, {"protocolVersion": 1})
        await loader.result(acp.SESSION_LOAD, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        (replayed,) = [
            m["params"]["update"]
            for m in loader.editor.messages
            if m.get("method") == acp.SESSION_UPDATE
            and m["params"]["update"]["sessionUpdate"] == acp.USER_MESSAGE_CHUNK
        ]
        assert seen["messageId"] and replayed["messageId"] == seen["messageId"]
        assert replayed["content"] == {"type": "text", "text": "hello"}

    async def main() -> None:
        await asyncio.wait_for(scenario(Harness(tmp_path / "sessions", None, shared=True)), 10)

    asyncio.run(main())
