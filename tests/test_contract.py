"""Issue 43: acpctl's contract with its clients. Every kind of message acpctl itself composes
(its notifications, errors, attach answers, replay shapes) is kept as a fixture in
tests/contract/, made here in process, so that a change to any of them is a visible diff;
and each is checked against the ACP schema it claims (npm @agentclientprotocol/sdk's), as
acp-mux keeps its client-contract fixtures. Kinds the schema has no definition for (the
multi-client attach proposal's, acpctl's `_acpctl/` extensions) say so in their fixture.

To accept a change: ACPCTL_UPDATE_CONTRACT=1 pytest tests/test_contract.py, and review the
diff of tests/contract/."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.store.sessions import SessionMeta
from tests.fake_backend import FakeAgent, Harness

CONTRACT = Path(__file__).parent / "contract"
VOLATILE = {
    "timestamp",
    "ts",
    "updatedAt",
    "created",
    "updated",
    "messageId",
    acp.HOST_VERSION_META,
}
WANTS_RECORDED = {"_meta": {acp.RECORDED_META: True}, "elicitation": {"form": {}}}
FORM: JsonObject = {
    "mode": "form",
    "message": "Your name?",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}
PERMISSION: JsonObject = {
    "toolCall": {"toolCallId": "t1", "title": "Edit a.txt", "kind": "edit"},
    "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
}


def normalized(value: Any) -> Any:
    """Times replaced by a mark: what varies from run to run."""
    if isinstance(value, dict):
        return {k: f"<{k}>" if k in VOLATILE else normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(item) for item in value]
    return value


def first(h: Harness, wanted: Any) -> JsonObject:
    (found, *_) = [m for m in h.editor.messages if isinstance(m, dict) and wanted(m)]
    return dict(found)


def update_kind(kind: str) -> Any:
    return lambda m: m.get("params", {}).get("update", {}).get("sessionUpdate") == kind


async def made(h: Harness) -> dict[str, tuple[str | None, JsonObject]]:
    """Each kind of message acpctl composes, as one scenario has clients receive it: the
    kind's name -> (the schema definition it must satisfy, the message)."""
    agent = h.agent
    agent.handlers[acp.SESSION_PROMPT] = agent.end_turn
    await h.result(acp.INITIALIZE, {"protocolVersion": 1, "clientInfo": {"name": "zed"}})
    sid = str((await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["sessionId"])
    agent.update("agent-1", {"sessionUpdate": "available_commands_update", "availableCommands": []})
    phone = h.another()
    await phone.result(
        acp.INITIALIZE,
        {
            "protocolVersion": 1,
            "clientInfo": {"name": "phone", "version": "2"},
            "clientCapabilities": WANTS_RECORDED,
        },
    )
    attached = await phone.request(
        acp.SESSION_ATTACH, {"sessionId": sid, "clientId": "phone-1", "historyPolicy": "none"}
    )
    watcher = h.another(may_control=False)
    await watcher.result(acp.INITIALIZE, {"protocolVersion": 1, "clientInfo": {"name": "watcher"}})
    await watcher.result(acp.SESSION_ATTACH, {"sessionId": sid, "historyPolicy": "none"})
    refused = await watcher.request(
        acp.SESSION_PROMPT, {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
    )

    # A prompt from the editor, which the other clients see as the user's message.
    await h.result(
        acp.SESSION_PROMPT, {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
    )
    # A permission and a question, answered from the phone: the others are told.
    asked = agent.ask(acp.REQUEST_PERMISSION, {"sessionId": "agent-1", **PERMISSION})
    request = await phone.editor.request(acp.REQUEST_PERMISSION)
    chosen = {"outcome": {"outcome": "selected", "optionId": "allow"}}
    phone.send(jsonrpc.result(request["id"], chosen))
    await asked
    question = agent.ask(acp.ELICITATION_CREATE, {"sessionId": "agent-1", **FORM})
    request = await phone.editor.request(acp.ELICITATION_CREATE)
    phone.send(jsonrpc.result(request["id"], {"action": "accept", "content": {"name": "Ada"}}))
    await question
    await h.editor.settled()

    loader = h.another()
    await loader.result(
        acp.INITIALIZE,
        {
            "protocolVersion": 1,
            "clientInfo": {"name": "laptop"},
            "clientCapabilities": WANTS_RECORDED,
        },
    )
    loaded = await loader.request(
        acp.SESSION_LOAD, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
    )
    link = h.another()  # acpctl's own link, as the host's unix socket marks it
    link.client.link = True
    await link.result(acp.INITIALIZE, {"protocolVersion": 1})
    replay_meta = {acp.REPLAY_META: acp.REPLAY_AS_RECORDED}
    linked = await link.request(
        acp.SESSION_LOAD, {"sessionId": sid, "cwd": "/tmp", "mcpServers": [], "_meta": replay_meta}
    )
    resumer = h.another()
    await resumer.result(acp.INITIALIZE, {"protocolVersion": 1})
    resumed = await resumer.request(
        acp.SESSION_RESUME, {"sessionId": sid, "cwd": "/tmp", "mcpServers": []}
    )
    await resumer.editor.settled()
    listed = await resumer.request(acp.SESSION_LIST, {})
    detached = await phone.request(acp.SESSION_DETACH, {"sessionId": sid})
    await h.editor.settled()

    h.store.create(SessionMeta(id="other-agents", agent="codex", command=[], cwd="/tmp")).close()
    elsewhere = await resumer.request(
        acp.SESSION_LOAD, {"sessionId": "other-agents", "cwd": "/tmp", "mcpServers": []}
    )
    unknown = await resumer.request(acp.SESSION_PROMPT, {"sessionId": "nowhere", "prompt": []})
    bad_policy = await resumer.request(
        acp.SESSION_ATTACH, {"sessionId": sid, "historyPolicy": "some"}
    )
    return {
        "attach answer": (None, attached),
        "detach answer": (None, detached),
        "load answer": ("LoadSessionResponse", loaded),
        "load answer, to acpctl's link (how many stored updates its replay covered)": (
            "LoadSessionResponse",
            linked,
        ),
        "resume answer": ("ResumeSessionResponse", resumed),
        "list answer, from acpctl's store": ("ListSessionsResponse", listed),
        "the user's message, to the session's other clients": (
            "SessionNotification",
            first(phone, update_kind(acp.USER_MESSAGE_CHUNK)),
        ),
        "a load's replay of a message, joined": (
            "SessionNotification",
            first(loader, update_kind(acp.AGENT_MESSAGE_CHUNK)),
        ),
        "the commands again, behind a resume's answer": (
            "SessionNotification",
            first(resumer, update_kind(acp.AVAILABLE_COMMANDS_UPDATE)),
        ),
        "permission_resolved (attach proposal)": (
            None,
            first(watcher, update_kind(acp.PERMISSION_RESOLVED)),
        ),
        "client_disconnected (attach proposal)": (
            None,
            first(watcher, update_kind(acp.CLIENT_DISCONNECTED)),
        ),
        "a question withdrawn from a client": (
            "CancelRequestNotification",
            first(h, lambda m: m.get("method") == acp.CANCEL_REQUEST),
        ),
        "_acpctl/elicitation_resolved": (
            "ExtNotification",
            first(h, lambda m: m.get("method") == acp.ELICITATION_RESOLVED),
        ),
        "_acpctl/permission_resolved, to a client that did not attach": (
            "ExtNotification",
            first(h, lambda m: m.get("method") == acp.PERMISSION_ANSWERED),
        ),
        "_acpctl/recorded, a permission": (
            "ExtNotification",
            first(
                loader, lambda m: m.get("params", {}).get("event", {}).get("type") == "permission"
            ),
        ),
        "_acpctl/recorded, an answer to a question": (
            "ExtNotification",
            first(
                loader,
                lambda m: m.get("params", {}).get("event", {}).get("type") == "elicitation_outcome",
            ),
        ),
        "error: an observer acts": ("Error", refused),
        "error: a session of another agent": ("Error", elsewhere),
        "error: an unknown session": ("Error", unknown),
        "error: a history policy acpctl does not know": ("Error", bad_policy),
    }


async def host_initialize() -> JsonObject:
    """The session host's answer to a v1 initialize, as it composes it around the agent's
    (host/connection.py): v1's fields only, what acpctl adds in _meta (issue 54, 3)."""
    from acpctl.host.connection import LogicalConnection

    connection = LogicalConnection("c1", role=acp.CONTROLLER)
    answer = connection.capture(1)
    connection.deliver(jsonrpc.encode(jsonrpc.request(1, acp.INITIALIZE, {"protocolVersion": 1})))
    agent_said = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
    connection.send(jsonrpc.result(1, {**agent_said, "authMethods": []}))
    composed: JsonObject = json.loads(await answer)
    connection.end()
    return composed


def test_acpctls_own_messages_match_their_fixtures(tmp_path: Path) -> None:
    messages: dict[str, tuple[str | None, JsonObject]] = {}

    async def main() -> None:
        h = Harness(tmp_path / "sessions", FakeAgent(), shared=True)
        messages.update(await asyncio.wait_for(made(h), 10))
        messages["the host's initialize answer (v1)"] = (
            "InitializeResponse",
            await host_initialize(),
        )

    asyncio.run(main())
    update = os.environ.get("ACPCTL_UPDATE_CONTRACT") == "1"
    names = set()
    for kind, (schema, message) in messages.items():
        name = fixture_name(kind)
        names.add(name)
        fixture = {"kind": kind, "schema": schema, "message": normalized(message)}
        path = CONTRACT / name
        if update:
            CONTRACT.mkdir(exist_ok=True)
            path.write_text(json.dumps(fixture, indent=2, ensure_ascii=False) + "\n")
        assert path.exists(), f"no fixture for {kind!r}: ACPCTL_UPDATE_CONTRACT=1 makes it"
        assert json.loads(path.read_text()) == fixture, f"{kind!r} changed: see {path}"
    stale = {p.name for p in CONTRACT.glob("*.json")} - names
    assert not stale, f"fixtures of kinds acpctl no longer makes: {sorted(stale)}"


def fixture_name(kind: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in kind).strip("-").lower() + ".json"


def fixtures() -> list[Path]:
    return sorted(CONTRACT.glob("*.json"))


@pytest.mark.npm
@pytest.mark.parametrize("path", fixtures(), ids=lambda p: p.stem)
def test_each_fixture_is_what_the_acp_schema_says(path: Path) -> None:
    import jsonschema

    from tests.npm_agents import npm_package

    fixture = json.loads(path.read_text())
    message = fixture["message"]
    assert message.get("jsonrpc") == "2.0"
    schema = fixture["schema"]
    if schema is None:  # the attach proposal's: no schema yet; a JSON-RPC message still
        assert ("method" in message) != ("result" in message or "error" in message)
        return
    directory = npm_package("@agentclientprotocol/sdk") / "schema" / "v1"
    defs = json.loads((directory / "schema.unstable.json").read_text())["$defs"]
    if schema == "Error":
        checked = message["error"]
    elif schema.endswith("Response"):
        checked = message["result"]
    elif schema == "ExtNotification":
        assert message["method"].startswith("_acpctl/")  # an extension's name
        checked = message["params"]
    else:
        checked = message["params"]
    validator = jsonschema.Draft202012Validator({"$ref": f"#/$defs/{schema}", "$defs": defs})
    errors = [e.message for e in validator.iter_errors(checked)]
    assert not errors, errors
    # Nothing at the top level that the schema does not name, though it allows more: a
    # strict client may refuse it, and v1 puts additions in _meta (issue 54, 3).
    named = defs[schema].get("properties")
    if isinstance(named, dict):
        assert set(checked) <= set(named), set(checked) - set(named)
