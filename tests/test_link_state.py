"""Issue 53, 4: the link's state (remote/link_state.py) has one phase at a time, and every
move between phases is in one table (remote/link_phase.py). Each move is driven here with
no socket and no event loop: connect, drop, resume, a refused cursor (a new connection),
a reload, the outage limit, and a host's graceful stop."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest

from acpctl import protocol as acp
from acpctl.remote.link_phase import MOVES, NoSuchMove, Phase
from acpctl.remote.link_state import HOST_STOPPED, LINK_DOWN, LinkState


def phase_of(state: LinkState) -> Phase:
    """The state's phase now (read through a call: each step changes it)."""
    return state.phase


def line(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


def host(state: LinkState, message: dict[str, Any]) -> None:
    state.host_sent(json.dumps({"jsonrpc": "2.0", **message}))


def shown(state: LinkState) -> list[dict[str, Any]]:
    told = [json.loads(text) for text in state.to_editor]
    state.to_editor.clear()
    return told


def sent(state: LinkState) -> list[dict[str, Any]]:
    out = [json.loads(text) for text in state.to_host]
    state.to_host.clear()
    return out


def connected(resumable: bool = True) -> LinkState:
    """A link up, initialized by an agent that can load, with session "s" open."""
    state = LinkState("far", logging.getLogger("test"))
    assert phase_of(state) is Phase.NEW and not state.open
    assert state.came_up(resumed=False) == []  # the first connection: nothing to reload
    assert phase_of(state) is Phase.SETTING_UP and state.open and not state.live
    state.set_up()
    assert phase_of(state) is Phase.UP and state.live
    state.editor_sent(line({"id": 0, "method": acp.INITIALIZE, "params": {}}))
    meta = {acp.TRANSPORT_META: {"resumable": {}}} if resumable else {}
    result = {"agentCapabilities": {"loadSession": True}, "_meta": meta}
    host(state, {"id": 0, "result": result})
    state.editor_sent(line({"id": 1, "method": acp.SESSION_NEW, "params": {"cwd": "/w"}}))
    host(state, {"id": 1, "result": {"sessionId": "s"}})
    sent(state), shown(state)
    return state


def test_connect_then_drop_holds_the_editors_messages_until_the_link_is_back() -> None:
    state = connected()
    assert state.resumable and list(state.sessions) == ["s"]
    state.went_down("connection reset")
    assert phase_of(state) is Phase.DOWN and state.down_reason == "connection reset"
    state.went_down("refused")  # still down: another reason
    assert phase_of(state) is Phase.DOWN and state.down_reason == "refused"
    prompt = {"id": 2, "method": acp.SESSION_PROMPT, "params": {"sessionId": "s", "prompt": []}}
    assert state.editor_sent(line(prompt)) is False
    assert state.to_host == [] and len(state.held) == 1  # held, not sent
    state.came_up(resumed=True)
    assert phase_of(state) is Phase.SETTING_UP and state.to_host == []
    state.set_up()
    assert phase_of(state) is Phase.UP and state.down_since is None
    assert [m["id"] for m in sent(state)] == [2]  # the held prompt, now


def test_a_resume_sends_again_what_may_have_been_lost_in_flight() -> None:
    state = connected()
    prompt = {"id": 2, "method": acp.SESSION_PROMPT, "params": {"sessionId": "s", "prompt": []}}
    state.editor_sent(line(prompt))
    state.editor_sent(line({"method": acp.SESSION_CANCEL, "params": {"sessionId": "s"}}))
    assert len(sent(state)) == 2
    state.went_down("dropped")
    assert state.came_up(resumed=True) == []  # the same connection: nothing to reload
    again = sent(state)
    assert [m.get("id", m.get("method")) for m in again] == [2, acp.SESSION_CANCEL]
    state.set_up()
    assert shown(state) == []  # the editor lost nothing, and is told no error


def test_a_refused_cursor_makes_a_new_connection_that_reloads_and_fails_what_may_have_run() -> None:
    state = connected()
    prompt = {"id": 2, "method": acp.SESSION_PROMPT, "params": {"sessionId": "s", "prompt": []}}
    state.editor_sent(line(prompt))
    state.editor_sent(line({"id": 3, "method": acp.SESSION_LIST, "params": {}}))
    sent(state)
    state.went_down("dropped")
    # The host could not resume (its grace passed): the link dials a new connection.
    reloads = state.came_up(resumed=False)
    assert phase_of(state) is Phase.SETTING_UP and state.connection == 2
    assert [step.method for step in reloads] == [acp.INITIALIZE, acp.SESSION_LOAD]
    (failed,) = shown(state)
    assert failed["id"] == 2 and failed["error"]["code"] == LINK_DOWN  # may have run: not again
    for step in reloads:
        state.reloading(step)
        state.reloaded(step, {"result": {}})
    state.set_up()
    assert [m["id"] for m in sent(state)] == [3]  # session/list changes nothing: sent again


def test_a_reload_leaves_out_what_the_editor_has() -> None:
    state = connected(resumable=False)
    for text in ("a", "b"):
        host(
            state,
            {"method": acp.SESSION_UPDATE, "params": {"sessionId": "s", "update": chunk(text)}},
        )
    shown(state)
    state.went_down("dropped")
    (_, load) = state.came_up(resumed=False)
    state.reloading(load)
    for text in ("a", "b", "c"):
        host(
            state,
            {"method": acp.SESSION_UPDATE, "params": {"sessionId": "s", "update": chunk(text)}},
        )
    state.reloaded(load, {"result": {}})
    state.set_up()
    assert [m["params"]["update"]["content"]["text"] for m in shown(state)] == ["c"]


def chunk(text: str) -> dict[str, Any]:
    return {"sessionUpdate": acp.AGENT_MESSAGE_CHUNK, "content": {"type": "text", "text": text}}


def test_past_the_outage_limit_the_waiting_requests_fail_and_the_next_one_tries_again() -> None:
    state = connected()
    state.went_down("no route to host")
    assert not state.past(300, 30)
    state.down_since = time.time() - 301  # the limit's worth of time, gone by
    assert state.past(300, 30)
    prompt = {"id": 2, "method": acp.SESSION_PROMPT, "params": {"sessionId": "s", "prompt": []}}
    state.editor_sent(line(prompt))
    state.give_up("no route to host")
    assert phase_of(state) is Phase.GIVEN_UP and state.given_up
    (failed,) = shown(state)
    assert failed["id"] == 2 and failed["error"]["code"] == LINK_DOWN
    assert "is down since" in failed["error"]["message"]
    state.give_up("again")  # said once
    assert shown(state) == []
    woken = state.editor_sent(line({**prompt, "id": 3}))
    assert woken and phase_of(state) is Phase.DOWN  # the link dials again
    state.came_up(resumed=True)
    state.set_up()
    assert [m["id"] for m in sent(state)] == [3]


def test_a_host_that_says_it_stops_is_said_to_have_stopped_when_the_link_drops() -> None:
    state = connected()
    host(state, {"method": acp.HOST_STOPPING, "params": {"graceSeconds": 30}})
    assert state.stopping == "the session host is stopping: running turns get 30 s to finish"
    state.went_down("connection closed")
    assert phase_of(state) is Phase.DOWN and state.down_reason == HOST_STOPPED
    state.came_up(resumed=False)  # another host, started again: the stop is behind
    state.set_up()
    assert state.stopping is None


def test_a_first_dial_that_fails_goes_down_with_the_shorter_limit_and_may_give_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = LinkState("far", logging.getLogger("test"))
    state.went_down("refused")
    # Issue 53, 5: it did not drop, it never connected.
    assert "the link to far could not connect: refused" in caplog.text
    assert "dropped" not in caplog.text
    assert phase_of(state) is Phase.DOWN and state.down_since is not None
    state.down_since = time.time() - 31
    assert state.past(300, 30)  # never up: the first connection's limit holds
    state.give_up("refused")
    assert phase_of(state) is Phase.GIVEN_UP


@pytest.mark.parametrize("phase", list(Phase))
def test_only_the_moves_in_the_table_are_made(phase: Phase) -> None:
    """Every move not in MOVES is refused: the phase is the one truth, changed in one place."""
    for target in Phase:
        state = LinkState("far", logging.getLogger("test"))
        state.phase = phase
        if target in MOVES[phase]:
            state._move(target)
            assert phase_of(state) is target
        else:
            with pytest.raises(NoSuchMove):
                state._move(target)
            assert phase_of(state) is phase


def test_a_set_up_with_no_transport_is_a_fault() -> None:
    state = LinkState("far", logging.getLogger("test"))
    with pytest.raises(NoSuchMove, match="from new to up"):
        state.set_up()
