"""Issue 43, 1 to 3: the agent's questions (permissions and elicitations) with several
clients on one session, in process: every controller is asked, however it joined; the
first answer wins and is recorded with who gave it; the others are told; a replay brings
the recorded answers to a client that asked for them; a cancel settles them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from tests.fake_backend import FakeAgent, Harness

Scenario = Callable[[Harness], Awaitable[None]]

FORM: JsonObject = {
    "mode": "form",
    "message": "What should the demo call you?",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}
WANTS_RECORDED = {"_meta": {acp.RECORDED_META: True}}
ELICITS: JsonObject = {"elicitation": {"form": {}, "url": {}}}  # it can answer forms, URLs
# A permission in the agent's session agent-1 with one option, "ok".
OK_PERMISSION: JsonObject = {
    "sessionId": "agent-1",
    "toolCall": {"toolCallId": "t1"},
    "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
}


def run(tmp_path: Path, scenario: Scenario, agent: FakeAgent | None = None) -> Harness:
    harness: Harness | None = None

    async def main() -> None:
        nonlocal harness
        harness = Harness(tmp_path / "sessions", agent, shared=True)
        await asyncio.wait_for(scenario(harness), 10)

    asyncio.run(main())
    assert harness is not None
    return harness


async def initialized(
    h: Harness, name: str, capabilities: JsonObject | None = None, elicits: bool = True
) -> None:
    """`h`'s client initialized as `name`, with `capabilities`; and, `elicits`, able to
    answer the agent's forms and URLs (a question goes only to clients that are)."""
    declared = {**(ELICITS if elicits else {}), **(capabilities or {})}
    await h.result(
        acp.INITIALIZE,
        {
            "protocolVersion": 1,
            "clientInfo": {"name": name, "version": "1"},
            "clientCapabilities": declared,
        },
    )


async def three_clients(h: Harness) -> tuple[str, Harness, Harness]:
    """A session `h`'s client ("zed") opened, joined by a controller ("phone") and an
    observer ("watcher") that attached: its id, the phone, the watcher."""
    await initialized(h, "zed")
    sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
    phone = h.another()
    await initialized(phone, "phone")
    await phone.result(acp.SESSION_ATTACH, {"sessionId": sid, "historyPolicy": "none"})
    watcher = h.another(may_control=False)
    await initialized(watcher, "watcher")
    await watcher.result(acp.SESSION_ATTACH, {"sessionId": sid, "role": acp.OBSERVER})
    return sid, phone, watcher


async def permission_answered_by(h: Harness, client: Harness) -> None:
    """The agent asks a permission in agent-1; `client` answers "ok", which reaches it."""
    asked = h.agent.ask(acp.REQUEST_PERMISSION, OK_PERMISSION)
    request = await client.editor.request(acp.REQUEST_PERMISSION)
    client.send(
        jsonrpc.result(request["id"], {"outcome": {"outcome": "selected", "optionId": "ok"}})
    )
    await asked


def recorded(h: Harness, session_id: str, *kinds: str) -> list[dict[str, Any]]:
    h.conn.recorder.batch_end()
    return [e for e in h.store.iter_events(session_id) if e.get("type") in kinds]


def test_an_elicitation_goes_to_every_controller_and_the_first_answer_wins(
    tmp_path: Path,
) -> None:
    async def scenario(h: Harness) -> None:
        sid, phone, watcher = await three_clients(h)

        answered = h.agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
        asked_zed = await h.editor.request(acp.ELICITATION_CREATE)
        asked_phone = await phone.editor.request(acp.ELICITATION_CREATE)
        assert asked_zed["params"] == asked_phone["params"] == {"sessionId": sid, **FORM}
        phone.send(
            jsonrpc.result(asked_phone["id"], {"action": "accept", "content": {"name": "Ada"}})
        )
        assert (await answered)["result"] == {"action": "accept", "content": {"name": "Ada"}}
        # The others are told who answered, and how; the dialog of the one asked closes.
        await h.editor.settled()
        told = h.editor.notifications("_acpctl/elicitation_resolved")
        assert [n["params"] for n in told] == [
            {
                "sessionId": sid,
                "action": "accept",
                "resolvedBy": {"name": "phone", "version": "1", "role": acp.CONTROLLER},
            }
        ]
        assert [n["params"] for n in watcher.editor.notifications(acp.ELICITATION_RESOLVED)]
        assert watcher.editor.notifications(acp.CANCEL_REQUEST) == []  # never asked
        (withdrawn,) = h.editor.notifications(acp.CANCEL_REQUEST)
        assert withdrawn["params"]["requestId"] == asked_zed["id"]
        # A late answer changes nothing: the agent had one.
        h.send(jsonrpc.result(asked_zed["id"], {"action": "decline"}))
        await h.editor.settled()
        agent_id = (await answered)["id"]
        assert len([m for m in h.agent.sent if m.get("id") == agent_id]) == 1
        asked, outcome = recorded(h, sid, "elicitation", "elicitation_outcome")
        assert {k: asked[k] for k in ("mode", "message", "requestedSchema")} == FORM
        assert outcome["action"] == "accept" and outcome["content"] == {"name": "Ada"}
        assert outcome["resolvedBy"]["name"] == "phone"

    run(tmp_path, scenario)


@pytest.mark.parametrize("method", [acp.SESSION_ATTACH, acp.SESSION_LOAD, acp.SESSION_RESUME])
def test_a_question_waiting_is_asked_of_a_client_that_joins_and_settled_once(
    tmp_path: Path, method: str
) -> None:
    """Issue 43, 1: a pending permission and a pending elicitation are asked of a
    controller that joins by attach, load or resume; the first answer settles each."""

    async def scenario(h: Harness) -> None:
        await initialized(h, "zed")
        sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
        permission = h.agent.ask(
            acp.REQUEST_PERMISSION,
            {
                "sessionId": "agent-1",
                "toolCall": {"toolCallId": "t1", "title": "Edit a.txt"},
                "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
            },
        )
        question = h.agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
        await h.editor.request(acp.ELICITATION_CREATE)
        joiner = h.another()
        await initialized(joiner, "laptop")
        await joiner.result(method, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        asked_permission = await joiner.editor.request(acp.REQUEST_PERMISSION)
        asked_question = await joiner.editor.request(acp.ELICITATION_CREATE)
        chosen = {"outcome": {"outcome": "selected", "optionId": "allow"}}
        joiner.send(jsonrpc.result(asked_permission["id"], chosen))
        joiner.send(jsonrpc.result(asked_question["id"], {"action": "decline"}))
        assert (await permission)["result"] == chosen
        assert (await question)["result"] == {"action": "decline"}
        # The first client's dialogs close; its answers come too late.
        await h.editor.settled()
        first = await h.editor.request(acp.REQUEST_PERMISSION)
        h.send(jsonrpc.result(first["id"], {"outcome": {"outcome": "cancelled"}}))
        await h.editor.settled()
        answers = [m for m in h.agent.sent if "result" in m]
        assert len(answers) == 2
        assert len(h.editor.notifications(acp.CANCEL_REQUEST)) == 2
        outcomes = recorded(h, sid, "permission_outcome", "elicitation_outcome")
        assert [o["resolvedBy"]["name"] for o in outcomes] == ["laptop", "laptop"]

    run(tmp_path, scenario)


def test_a_replay_brings_the_recorded_answers_to_a_client_that_asked(tmp_path: Path) -> None:
    """Issue 43, 2: the question and its answer are replayed on load, in their place, as
    `_acpctl/recorded` notes, to a client that asked in its capabilities' _meta (acpctl's
    terminal does); another client's replay is the updates alone."""

    async def scenario(h: Harness) -> None:
        await initialized(h, "zed")
        sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
        h.agent.update(
            "agent-1",
            {
                "sessionUpdate": acp.AGENT_MESSAGE_CHUNK,
                "content": {"type": "text", "text": "before"},
            },
        )
        question = h.agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
        asked = await h.editor.request(acp.ELICITATION_CREATE)
        h.send(jsonrpc.result(asked["id"], {"action": "accept", "content": {"name": "Ada"}}))
        await question
        h.agent.update(
            "agent-1",
            {
                "sessionUpdate": acp.AGENT_MESSAGE_CHUNK,
                "content": {"type": "text", "text": "after"},
            },
        )
        await h.agent.batch_end()

        terminal = h.another()
        await initialized(terminal, "acpctl", WANTS_RECORDED)
        await terminal.result(acp.SESSION_LOAD, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        seen = [
            (
                m["method"],
                m["params"].get("event", {}).get("type")
                or m["params"]["update"].get("content", {}).get("text"),
            )
            for m in terminal.editor.messages
            if m.get("method") in (acp.SESSION_UPDATE, acp.RECORDED_NOTE)
        ]
        # On the wire, as docs/relay.md names it.
        assert {m.get("method") for m in terminal.editor.messages} >= {"_acpctl/recorded"}
        assert seen == [
            (acp.SESSION_UPDATE, "before"),
            (acp.RECORDED_NOTE, "elicitation"),
            (acp.RECORDED_NOTE, "elicitation_outcome"),
            (acp.SESSION_UPDATE, "after"),
        ]
        (outcome,) = [
            m["params"]["event"]
            for m in terminal.editor.notifications(acp.RECORDED_NOTE)
            if m["params"]["event"]["type"] == "elicitation_outcome"
        ]
        assert outcome["resolvedBy"]["name"] == "zed" and outcome["content"] == {"name": "Ada"}

        plain = h.another()
        await initialized(plain, "other-editor")
        await plain.result(acp.SESSION_LOAD, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        assert plain.editor.notifications(acp.RECORDED_NOTE) == []
        (joined,) = plain.editor.notifications(acp.SESSION_UPDATE)  # one message, joined
        assert joined["params"]["update"]["content"]["text"] == "beforeafter"

    run(tmp_path, scenario)


def test_a_cancel_settles_the_sessions_open_questions_as_cancelled(tmp_path: Path) -> None:
    """ACP: a cancelled turn's open requests are answered cancelled; an elicitation's
    answer is the action "cancel". Recorded without a person's name."""
    agent = FakeAgent()
    turn_ends = asyncio.Event()

    async def prompt(params: Any) -> JsonObject:
        await turn_ends.wait()
        return {"stopReason": acp.CANCELLED}

    agent.handlers[acp.SESSION_PROMPT] = prompt

    async def scenario(h: Harness) -> None:
        await initialized(h, "zed")
        sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
        h.send(jsonrpc.request("p1", acp.SESSION_PROMPT, {"sessionId": sid, "prompt": []}))
        question = h.agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
        asked = await h.editor.request(acp.ELICITATION_CREATE)
        h.send(jsonrpc.notification(acp.SESSION_CANCEL, {"sessionId": sid}))
        assert (await question)["result"] == {"action": "cancel"}
        turn_ends.set()
        await h.editor.response("p1")
        (withdrawn,) = h.editor.notifications(acp.CANCEL_REQUEST)
        assert withdrawn["params"]["requestId"] == asked["id"]
        (outcome,) = recorded(h, sid, "elicitation_outcome")
        assert outcome["action"] == "cancel" and "resolvedBy" not in outcome

    run(tmp_path, scenario, agent)


def test_sessions_show_and_the_html_export_say_what_was_asked_and_who_answered(
    tmp_path: Path,
) -> None:
    """Issue 43, 2: the recorded question and answer in `sessions show` and the export,
    the agent's text made harmless in each."""
    import io

    from acpctl.store.sessions import SessionMeta, SessionStore
    from acpctl.terminal.html_export import export_html
    from acpctl.terminal.transcript import write_terminal

    store = SessionStore(tmp_path / "sessions")
    meta = SessionMeta(id="s1", agent="demo", command=[], cwd="/tmp")
    writer = store.create(meta)
    hostile = "Sign in\x1b]0;owned\x07 <img src=x onerror=alert(1)>"
    writer.event("elicitation", mode="url", message=hostile, url="javascript:alert(1)")
    writer.event(
        "elicitation_outcome", action="accept", resolvedBy={"name": "phone", "role": "controller"}
    )
    writer.event("elicitation", **FORM)
    writer.event(
        "elicitation_outcome", action="accept", content={"name": "Ada"}, resolvedBy={"name": "zed"}
    )
    writer.event("permission", toolCall={"title": "Edit a.txt"}, options=[{"name": "Allow"}])
    writer.event(
        "permission_outcome",
        outcome={"outcome": "selected", "optionId": "allow"},
        resolvedBy={"name": "zed"},
    )
    writer.close()

    shown = io.StringIO()
    write_terminal(store, meta, shown)
    text = shown.getvalue()
    assert "\x1b]0;" not in text and "\x07" not in text
    assert "? the agent asks: Sign in^[]0;owned^G <img src=x onerror=alert(1)>" in text
    assert "  at javascript:alert(1)" in text
    assert "  answered: accept, by phone" in text
    assert "  form: name" in text and "  answered: accept (name='Ada'), by zed" in text
    assert "? permission asked: Edit a.txt (Allow)" in text and "  answered: allow, by zed" in text

    page = "".join(export_html(store, meta))
    assert "<img" not in page and 'href="javascript' not in page
    assert "The agent asks: Sign in" in page and "at javascript:alert(1)" in page
    assert "Answered: accept, by phone" in page
    assert "Answered: accept (name=&#x27;Ada&#x27;), by zed" in page
    assert "Answered: allow, by zed" in page


def test_two_clients_each_cancel_their_own_request_under_the_same_id(tmp_path: Path) -> None:
    """Issue 43, 3: two clients of one session send a request each under the same id;
    each `$/cancel_request` reaches the agent under the agent-hop id of its sender's
    request only; a prompt still queued is answered -32800 without the agent seeing it."""
    agent = FakeAgent()
    release: dict[int, asyncio.Event] = {}

    async def slow(params: Any) -> JsonObject:
        (msg_id,) = [
            i for i, e in agent.pending.items() if e.method == "_vendor/slow" and i not in release
        ]
        release[msg_id] = asyncio.Event()
        await release[msg_id].wait()
        return {"done": msg_id}

    agent.handlers["_vendor/slow"] = slow

    async def scenario(h: Harness) -> None:
        await initialized(h, "zed")
        sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
        other = h.another()
        await initialized(other, "phone")
        await other.result(acp.SESSION_ATTACH, {"sessionId": sid, "historyPolicy": "none"})
        h.send(jsonrpc.request("same", "_vendor/slow", {"sessionId": sid}))
        await asyncio.sleep(0.05)
        other.send(jsonrpc.request("same", "_vendor/slow", {"sessionId": sid}))
        while len(release) < 2:
            await asyncio.sleep(0.01)
        first, second = sorted(release)
        other.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": "same"}))
        await h.editor.settled()
        cancels = [p for m, p in agent.notifications if m == acp.CANCEL_REQUEST]
        assert cancels == [{"requestId": second}]
        h.send(jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": "same"}))
        await h.editor.settled()
        cancels = [p for m, p in agent.notifications if m == acp.CANCEL_REQUEST]
        assert cancels == [{"requestId": second}, {"requestId": first}]
        for event in release.values():
            event.set()
        assert (await h.editor.response("same"))["result"] == {"done": first}
        assert (await other.editor.response("same"))["result"] == {"done": second}

    run(tmp_path, scenario, agent)


def test_the_agents_cancel_reaches_only_the_clients_it_asked(tmp_path: Path) -> None:
    """Issue 43, 3: the agent's `$/cancel_request` for a question goes, under each one's
    id, to the clients asked: the session's controllers, not its observer, nor a client
    of another session."""

    async def scenario(h: Harness) -> None:
        _, phone, watcher = await three_clients(h)
        elsewhere = h.another()
        await initialized(elsewhere, "elsewhere")
        await elsewhere.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})

        question = h.agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
        asked = await h.editor.request(acp.ELICITATION_CREATE)
        await phone.editor.request(acp.ELICITATION_CREATE)
        (agent_id,) = [i for i, e in h.agent.agent_requests.items() if not e.future.done()]
        cancel = jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": agent_id})
        assert h.agent.events is not None
        h.agent.events.on_agent_notification(cancel, jsonrpc.encode(cancel)[:-1])
        await h.editor.settled()
        for client in (h, phone):
            (told,) = client.editor.notifications(acp.CANCEL_REQUEST)
            assert told["params"] == {"requestId": asked["id"]}
        for client in (watcher, elsewhere):
            assert client.editor.notifications(acp.CANCEL_REQUEST) == []
        h.send(jsonrpc.result(asked["id"], {"action": "cancel"}))  # the client's answer goes on
        assert (await question)["result"] == {"action": "cancel"}

    run(tmp_path, scenario)


def chunk(text: str, message_id: str) -> JsonObject:
    return {
        "sessionUpdate": acp.AGENT_MESSAGE_CHUNK,
        "content": {"type": "text", "text": text},
        "messageId": message_id,
    }


def test_a_client_id_is_echoed_wherever_the_client_is_named(tmp_path: Path) -> None:
    """Issue 43, 1: the attach proposal's later clientId, chosen by the client in
    session/attach or, for one that joins by load or resume, in its clientInfo."""

    async def scenario(h: Harness) -> None:
        await initialized(h, "zed")
        sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
        loader = h.another()
        await loader.result(
            acp.INITIALIZE,
            {"protocolVersion": 1, "clientInfo": {"name": "laptop", "clientId": "laptop-7"}},
        )
        await loader.result(acp.SESSION_LOAD, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []})
        phone = h.another()
        await initialized(phone, "phone")
        attached = await phone.result(
            acp.SESSION_ATTACH, {"sessionId": sid, "clientId": "phone-1", "historyPolicy": "none"}
        )
        assert {"name": "laptop", "clientId": "laptop-7", "role": acp.CONTROLLER} in attached[
            "connectedClients"
        ]
        await permission_answered_by(h, phone)
        watcher = h.another()
        await initialized(watcher, "watcher")
        await watcher.result(acp.SESSION_ATTACH, {"sessionId": sid, "historyPolicy": "none"})
        await phone.result(acp.SESSION_DETACH, {"sessionId": sid})
        await watcher.editor.settled()
        (gone,) = [
            n["params"]["update"]
            for n in watcher.editor.notifications(acp.SESSION_UPDATE)
            if n["params"]["update"]["sessionUpdate"] == acp.CLIENT_DISCONNECTED
        ]
        assert gone["client"]["clientId"] == "phone-1"
        (outcome,) = recorded(h, sid, "permission_outcome")
        assert outcome["resolvedBy"]["clientId"] == "phone-1"
        bad = await watcher.request(acp.SESSION_ATTACH, {"sessionId": sid, "clientId": "\x1b[2J"})
        assert bad["error"]["code"] == acp.INVALID_PARAMS

    run(tmp_path, scenario)


def test_after_message_replays_only_what_follows_the_clients_last_message(
    tmp_path: Path,
) -> None:
    """Issue 43, 1: historyPolicy after_message, with the id of the last message the
    client has: the rest of the history (a tool call, a recorded answer, the next
    message), nothing before; a message the history lacks is refused, nothing joined."""

    async def scenario(h: Harness) -> None:
        await initialized(h, "zed")
        sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
        for update in (chunk("one ", "m1"), chunk("two", "m1")):
            h.agent.update("agent-1", update)
        h.agent.update(
            "agent-1", {"sessionUpdate": acp.TOOL_CALL, "toolCallId": "t1", "title": "Read"}
        )
        question = h.agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
        asked = await h.editor.request(acp.ELICITATION_CREATE)
        h.send(jsonrpc.result(asked["id"], {"action": "decline"}))
        await question
        h.agent.update("agent-1", chunk("three", "m2"))
        await h.agent.batch_end()

        phone = h.another()
        await initialized(phone, "phone", WANTS_RECORDED)
        missing = await phone.request(
            acp.SESSION_ATTACH,
            {"sessionId": sid, "historyPolicy": "after_message", "afterMessageId": "m9"},
        )
        assert missing["error"]["code"] == acp.INVALID_PARAMS
        assert "m9" in missing["error"]["message"]
        live = h.conn.sessions.get(sid)
        assert live is not None and not live.sees(phone.client)
        await phone.result(
            acp.SESSION_ATTACH,
            {"sessionId": sid, "historyPolicy": "after_message", "afterMessageId": "m1"},
        )
        seen = [
            m["params"].get("update", m["params"].get("event"))
            for m in phone.editor.messages
            if m.get("method") in (acp.SESSION_UPDATE, acp.RECORDED_NOTE)
        ]
        assert [u.get("sessionUpdate") or u.get("type") for u in seen] == [
            acp.TOOL_CALL,
            "elicitation",
            "elicitation_outcome",
            acp.AGENT_MESSAGE_CHUNK,
        ]
        assert seen[-1]["content"]["text"] == "three"
        bare = await phone.request(
            acp.SESSION_ATTACH, {"sessionId": sid, "historyPolicy": "after_message"}
        )
        assert bare["error"]["code"] == acp.INVALID_PARAMS

    run(tmp_path, scenario)


def test_an_answer_from_a_paired_device_is_recorded_with_the_devices_name(
    tmp_path: Path,
) -> None:
    """Issue 42, 4: the audit trail names the device (acpctl host pair --name)."""
    from acpctl.terminal.transcript import answer_of

    async def scenario(h: Harness) -> None:
        sid, phone, _ = await three_clients(h)
        phone.client.device = "Ada's phone"
        await permission_answered_by(h, phone)
        (outcome,) = recorded(h, sid, "permission_outcome")
        assert outcome["resolvedBy"]["device"] == "Ada's phone"
        assert answer_of(outcome) == "ok, by Ada's phone (a paired device)"

    run(tmp_path, scenario)


# -- issue 54, 1: a question goes only to clients that can answer it -------------------------


async def two_clients(h: Harness, second_elicits: bool) -> tuple[str, Harness]:
    """A session of `h`'s client ("ts-sdk", which can answer forms), joined by a controller
    ("py-sdk") that can, or cannot (`second_elicits`)."""
    await initialized(h, "ts-sdk")
    sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
    other = h.another()
    await initialized(other, "py-sdk", elicits=second_elicits)
    await other.result(acp.SESSION_ATTACH, {"sessionId": sid, "historyPolicy": "none"})
    return sid, other


def test_an_elicitation_goes_only_to_clients_that_declared_its_mode(tmp_path: Path) -> None:
    """The Python SDK client, which declared no elicitation, was asked too, and its -32601
    settled the question for everyone: now it is never asked, and the TypeScript SDK
    client's accept reaches the agent."""

    async def scenario(h: Harness) -> None:
        _, other = await two_clients(h, second_elicits=False)
        answered = h.agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
        asked = await h.editor.request(acp.ELICITATION_CREATE)
        h.send(jsonrpc.result(asked["id"], {"action": "accept", "content": {"name": "Ada"}}))
        assert (await answered)["result"]["action"] == "accept"
        await other.editor.settled()
        assert not [m for m in other.editor.messages if m.get("method") == acp.ELICITATION_CREATE]
        url = {"sessionId": "agent-1", "mode": "url", "message": "Sign in", "url": "https://x"}
        asked_url = h.agent.ask(acp.ELICITATION_CREATE, url)
        await h.editor.settled()
        *_, request = [m for m in h.editor.messages if m.get("method") == acp.ELICITATION_CREATE]
        assert request["params"]["mode"] == "url"
        h.send(jsonrpc.result(request["id"], {"action": "decline"}))
        assert (await asked_url)["result"]["action"] == "decline"

    run(tmp_path, scenario)


@pytest.mark.parametrize("method", [acp.ELICITATION_CREATE, acp.REQUEST_PERMISSION])
@pytest.mark.parametrize(
    "failed",
    [
        {"error": {"code": -32603, "message": "the handler threw"}},
        {"error": {"code": -32601, "message": "Method not found"}},
        {"result": {"nothing": "here"}},
    ],
    ids=["internal error", "method not found", "malformed"],
)
def test_one_client_s_failure_does_not_settle_a_question_another_may_answer(
    tmp_path: Path, method: str, failed: JsonObject
) -> None:
    """An error answer (or one that is no answer) from one client, first, settled it for
    all: the agent got the error, and the other's pending accept was withdrawn. Now the
    first valid answer wins, and the history names who gave it."""
    question = (
        FORM
        if method == acp.ELICITATION_CREATE
        else {
            "toolCall": {"toolCallId": "t1"},
            "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
        }
    )
    valid = (
        {"action": "accept", "content": {"name": "Ada"}}
        if method == acp.ELICITATION_CREATE
        else {"outcome": {"outcome": "selected", "optionId": "ok"}}
    )

    async def scenario(h: Harness) -> None:
        sid, other = await two_clients(h, second_elicits=True)
        answered = h.agent.ask(method, {"sessionId": "agent-1", **question})
        asked_first = await h.editor.request(method)
        asked_other = await other.editor.request(method)
        other.send({"jsonrpc": "2.0", "id": asked_other["id"], **failed})
        await other.editor.settled()
        assert not answered.done()  # the other client may still answer
        h.send(jsonrpc.result(asked_first["id"], valid))
        assert (await answered)["result"] == valid
        kind = "elicitation_outcome" if method == acp.ELICITATION_CREATE else "permission_outcome"
        (outcome,) = recorded(h, sid, kind)
        assert outcome["resolvedBy"]["name"] == "ts-sdk"

    run(tmp_path, scenario)


def test_when_every_client_asked_fails_the_agent_gets_one_error_saying_so(tmp_path: Path) -> None:
    async def scenario(h: Harness) -> None:
        sid, other = await two_clients(h, second_elicits=True)
        answered = h.agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
        asked_first = await h.editor.request(acp.ELICITATION_CREATE)
        asked_other = await other.editor.request(acp.ELICITATION_CREATE)
        other.send(jsonrpc.error(asked_other["id"], -32601, "Method not found"))
        h.send(jsonrpc.error(asked_first["id"], -32603, "the handler threw"))
        error = (await answered)["error"]
        assert "every client asked failed" in error["message"]
        assert "py-sdk: Method not found" in error["message"]
        assert "ts-sdk: the handler threw" in error["message"]
        (outcome,) = recorded(h, sid, "elicitation_outcome")
        assert outcome["action"] == "error" and "every client" in outcome["error"]

    run(tmp_path, scenario)


def test_with_no_client_able_to_answer_the_agent_is_told_at_once(tmp_path: Path) -> None:
    """`run --acp` with one editor that declared no elicitation: the agent's question is
    not sent to it (it would answer "Method not found"); the agent gets an error saying
    why, and the history records it."""

    async def scenario(h: Harness) -> None:
        await initialized(h, "zed", elicits=False)
        sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
        answered = h.agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
        error = (await answered)["error"]
        assert "no client of this session can answer elicitation/create (form)" in error["message"]
        assert not [m for m in h.editor.messages if m.get("method") == acp.ELICITATION_CREATE]
        (outcome,) = recorded(h, sid, "elicitation_outcome")
        assert outcome["action"] == "error"

    async def main() -> None:
        harness = Harness(tmp_path / "sessions", None, shared=False)
        await asyncio.wait_for(scenario(harness), 10)

    asyncio.run(main())


def test_an_error_answer_to_a_request_that_is_no_question_reaches_the_agent_as_it_is(
    tmp_path: Path,
) -> None:
    """Only a person's questions wait for another client after an error: a file request's
    error (its path outside the session) is the answer, and goes back with its code."""

    async def scenario(h: Harness) -> None:
        await initialized(h, "zed")
        await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
        read = h.agent.ask(acp.FS_READ_TEXT_FILE, {"sessionId": "agent-1", "path": "/etc/x"})
        asked = await h.editor.request(acp.FS_READ_TEXT_FILE)
        h.send(jsonrpc.error(asked["id"], acp.INVALID_PARAMS, "outside the session"))
        assert (await read)["error"] == {
            "code": acp.INVALID_PARAMS,
            "message": "outside the session",
        }

    run(tmp_path, scenario)


def test_the_host_is_told_when_what_waits_for_a_person_changes(tmp_path: Path) -> None:
    """Issue 52, 2: the session host pushes a change of the waiting questions to its page
    (on_waiting_changed): when one is asked, and when it is settled."""
    told: list[str] = []

    async def scenario(h: Harness) -> None:
        h.conn.on_waiting_changed = lambda: told.append("changed")
        sid, phone, _ = await three_clients(h)
        asked = h.agent.ask(acp.REQUEST_PERMISSION, OK_PERMISSION)
        request = await phone.editor.request(acp.REQUEST_PERMISSION)
        assert told == ["changed"]  # asked
        chosen = {"outcome": {"outcome": "selected", "optionId": "ok"}}
        phone.send(jsonrpc.result(request["id"], chosen))
        await asked
        assert told == ["changed", "changed"]  # settled
        assert sid

    run(tmp_path, scenario)
