"""The protocol fuzzer: malformed, nested, huge, wrongly typed, batched and out-of-order
messages from the editor and from the agent. After each case the server must still answer a
fresh initialize → session/new → prompt. In-process against the fake agent (thousands of
cases), and through the real `run --acp` process (its framing, a few hundred lines)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acpctl import jsonrpc
from acpctl import protocol as acp
from tests.fake_backend import FakeAgent, Harness
from tests.raw_peer import raw_editor

METHODS = [
    acp.INITIALIZE,
    acp.AUTHENTICATE,
    acp.SESSION_NEW,
    acp.SESSION_LOAD,
    acp.SESSION_RESUME,
    acp.SESSION_LIST,
    acp.SESSION_CLOSE,
    acp.SESSION_DELETE,
    acp.SESSION_PROMPT,
    acp.SESSION_CANCEL,
    acp.SESSION_SET_MODE,
    acp.SESSION_SET_CONFIG_OPTION,
    acp.SESSION_FORK,
    acp.SESSION_STATUS,
    acp.LOGOUT,
    acp.PROXY_INITIALIZE,
    acp.ELICITATION_CREATE,
    acp.CANCEL_REQUEST,
    "_x/other",
    "",
]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
IDS = st.none() | st.integers() | st.text(max_size=6) | st.booleans() | st.lists(st.integers())
PARAMS = st.one_of(
    JSON,
    st.fixed_dictionaries(
        {},
        optional={
            "sessionId": st.one_of(st.text(max_size=12), JSON, st.just("agent-1"), st.just("../x")),
            "cwd": st.one_of(st.just("/tmp"), JSON),
            "prompt": st.one_of(JSON, st.just([{"type": "text", "text": "hi"}])),
            "mcpServers": JSON,
            "cursor": JSON,
            "requestId": IDS,
        },
    ),
)


@st.composite
def messages(draw: Any) -> Any:
    """Mostly well-formed envelopes with ill-typed insides; now and then anything at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(JSON)
    message: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        message["jsonrpc"] = "2.0"
    else:
        message["jsonrpc"] = draw(st.sampled_from(["1.0", 2, None]))
    kind = draw(st.sampled_from(["request", "notification", "response", "error"]))
    if kind in ("request", "notification"):
        message["method"] = (
            draw(st.sampled_from(METHODS)) if draw(st.integers(0, 9)) else draw(JSON)
        )
        params = draw(st.one_of(st.none(), PARAMS, st.lists(JSON, min_size=1, max_size=3)))
        if params is not None:
            message["params"] = params
    if kind != "notification":
        message["id"] = draw(IDS)
    if kind == "response":
        message["result"] = draw(JSON)
    if kind == "error":
        message["error"] = draw(JSON)
    if draw(st.integers(0, 9)) == 0:
        return [message, draw(messages())]
    return message


@st.composite
def agent_messages(draw: Any) -> Any:
    """What a broken agent may send the server."""
    method = draw(
        st.sampled_from(
            [
                acp.SESSION_UPDATE,
                acp.REQUEST_PERMISSION,
                acp.CANCEL_REQUEST,
                acp.FS_READ_TEXT_FILE,
                "_x",
            ]
        )
    )
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": draw(PARAMS)}
    if draw(st.booleans()):
        message["id"] = draw(st.integers() | st.text(max_size=4))
    return message


async def still_serves(h: Harness) -> None:
    """A fresh initialize, session/new and prompt, with ids no case used."""
    init = await h.request(acp.INITIALIZE, {"protocolVersion": 1})
    assert "result" in init, init
    new = await h.request(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
    sid = new["result"]["sessionId"]
    answer = await h.request(
        acp.SESSION_PROMPT, {"sessionId": sid, "prompt": [{"type": "text", "text": "still there?"}]}
    )
    assert answer["result"]["stopReason"] == acp.END_TURN, answer


@pytest.mark.e2e  # long-running: 300 cases a run (hypothesis draws new ones each run)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(editor=st.lists(messages(), max_size=6), agent=st.lists(agent_messages(), max_size=4))
def test_no_message_wedges_the_server(tmp_path: Path, editor: list[Any], agent: list[Any]) -> None:
    async def scenario() -> None:
        h = Harness(tmp_path / "sessions", FakeAgent())
        h.ids = iter(range(10**9, 2 * 10**9))  # fresh ids, never a case's
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        await h.result(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
        for message in editor:
            h.send(message)
        for message in agent:
            raw = json.dumps(message).encode()
            if "id" in message:
                h.server.from_agent.on_agent_request(message, h.agent.generation)
            else:
                h.server.from_agent.on_agent_notification(message, raw)
        await asyncio.sleep(0)
        await still_serves(h)
        for line in h.editor.messages:  # whatever was sent, it was JSON-RPC
            assert isinstance(line, dict | list)

    asyncio.run(asyncio.wait_for(scenario(), 20))


@pytest.mark.e2e
def test_random_bytes_through_the_real_process(home: Path, tmp_path: Path) -> None:
    lines = [
        b"",
        b"\x00\x01\x02",
        b"{",
        b"}",
        b"[]",
        b"[[[[",
        b'{"jsonrpc":"2.0"}',
        b'{"jsonrpc":"2.0","id":{},"method":"x"}',
        b'"just a string"',
        b"1e999",
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":[1]}}',
        b'{"jsonrpc":"2.0","id":9,"result":{}}',
        b"\xff" * 100,
        b"{" * 5000,
        b'{"jsonrpc":"2.0","id":"x","method":"session/prompt","params":{"sessionId":5}}',
        json.dumps([jsonrpc.request(i, "session/list", {}) for i in range(50)]).encode(),
        b" " * 100_000,
        b"x" * 1_000_000,
    ]

    async def scenario() -> None:
        async with raw_editor() as editor:
            for line in lines * 10:
                editor.write(line + b"\n")
            sid = await editor.session(str(tmp_path))
            answer = await editor.prompt(sid, "still there?")
            assert answer["result"]["stopReason"] == acp.END_TURN

    asyncio.run(asyncio.wait_for(scenario(), 60))
