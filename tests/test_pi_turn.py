"""A pi-rpc turn's end without a pi process (fast tier): pi's events as pi writes them,
its get_state answered in their place among them."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from acpctl.jsonrpc import JsonObject
from acpctl.runner.backends.pi.child import PiChild
from acpctl.runner.backends.pi.turn import Turn

IDLE = {"isStreaming": False, "isCompacting": False}


def _answer(text: str, stop: str = "stop") -> list[JsonObject]:
    message = {"role": "assistant", "stopReason": stop, "content": [{"type": "text", "text": text}]}
    return [
        {"type": "agent_start"},
        {"type": "message_start", "message": message},
        {"type": "message_end", "message": message},
        {"type": "agent_end"},
    ]


class OverflowingPi:
    """pi after a context overflow: the run ends in error, pi compacts at once and is
    done compacting by the time it answers get_state, and the retry's run starts a little
    later (pi's setTimeout): the turn must wait for it."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[Any] = asyncio.Queue()
        self.states = 0

    def subscribe(self) -> asyncio.Queue[Any]:
        return self.events

    async def command(self, kind: str, **fields: Any) -> Any:
        if kind == "prompt":
            for event in _answer("prompt is too long", stop="error"):
                self.events.put_nowait(event)
            return None
        assert kind == "get_state"
        self.states += 1
        if self.states == 1:
            self.events.put_nowait({"type": "compaction_start", "reason": "overflow"})
            self.events.put_nowait({"type": "compaction_end", "willRetry": True})
            for at, event in enumerate(_answer("Hi after the compaction.")):
                asyncio.get_running_loop().call_later(
                    0.05 + at / 1000, self.events.put_nowait, event
                )
        return IDLE


class Session:
    def __init__(self) -> None:
        self.announced: dict[str, tuple[str, JsonObject]] = {}
        self.before: dict[str, JsonObject] = {}
        self.updates: list[JsonObject] = []

    def emit(self, update: JsonObject) -> None:
        self.updates.append(update)


def test_a_turn_waits_for_the_run_a_compaction_starts_again() -> None:
    """Seen in CI under load: the compaction and its end came before get_state's answer,
    which said idle; the turn ended with the overflow's error before the retry ran."""
    pi = OverflowingPi()
    session = Session()

    async def scenario() -> None:
        turn = Turn(cast(Any, session), cast(PiChild, pi))
        await asyncio.wait_for(turn.run("a big question", []), 5)
        assert pi.states == 2  # the retry's end was asked about too
        assert turn.last_assistant["content"][0]["text"] == "Hi after the compaction."

    asyncio.run(scenario())
    said = "".join(u["content"]["text"] for u in session.updates if "content" in u)
    assert "(compaction start: overflow)" in said and said.endswith("Hi after the compaction.")
