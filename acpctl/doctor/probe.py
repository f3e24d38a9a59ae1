"""Live probes: start an agent the way `run --acp` does and watch what it does.

The agent is spawned like any other (its own process group, ACPCTL_RUN_PID, so a probe
interrupted half-way leaves an orphan `doctor` finds), spoken to through the same read loop
and pending table as the relay, and its whole tree is ended afterwards. Every step has a
deadline: whatever the agent does, a probe ends within its timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.jsonrpc.peer import Peer
from acpctl.jsonrpc.pending import Pending
from acpctl.runner.supervisor import AgentProcess
from acpctl.sandbox import Policy, launch

# A sandboxed agent's policy for the directory it starts in (the probe's own, known late).
Confinement = Callable[[str], Policy]

GARBAGE_SHOWN = 120
TEARDOWN_GRACE_S = 1.0
LOG = logging.getLogger("acpctl.doctor.probe")
_EXITED: JsonObject = {}  # what every request still waiting gets when the agent exits


@dataclass
class ProbeResult:
    started: bool = False
    answered: bool = False
    seconds: float | None = None
    error: str | None = None
    error_data: Any = None  # the data of initialize's error answer
    stdout_garbage: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)
    auth_required: bool | None = None
    session_error: str | None = None


@dataclass
class TurnResult:
    """One prompt's turn: when its first chunk and its end came, or how it failed."""

    session_id: str | None = None
    first_chunk: float | None = None  # seconds after the prompt was sent
    ended: float | None = None
    stop_reason: str | None = None
    error: str | None = None  # the prompt's JSON-RPC error, or the step that failed
    gave_up: str | None = None  # the wait that ran out
    text: str = ""
    stderr_tail: list[str] = field(default_factory=list)


class Conversation:
    """A spawned agent, spoken to through a JSON-RPC peer; for ACP agents, anything on
    stdout that is not JSON is kept as evidence of a banner (pi may print a prelude)."""

    def __init__(
        self, process: AgentProcess, probe: ProbeResult, ids: Iterator[Any], keep_garbage: bool
    ) -> None:
        self.process = process
        self.probe = probe
        self.keep_garbage = keep_garbage
        # what the agent sends of its own (notifications, requests): dropped unless heard
        self.hear: Callable[[JsonObject], None] = lambda message: None
        self.peer: Peer[Any] = Peer(process.write, ids)
        self.exit_code: int | None = None
        self.reader = asyncio.create_task(
            self.peer.read(
                jsonrpc.read_messages(process.stdout),
                self._heard,
                self._garbage,
                closed=self._exited,
            )
        )

    async def answer(
        self,
        future: asyncio.Future[JsonObject],
        timeout: float,
    ) -> JsonObject | None:
        """The response, None when the agent exited first; raises TimeoutError."""
        response = await asyncio.wait_for(future, max(timeout, 0.0))
        return None if response is _EXITED else response

    def _heard(self, message: Any, line: bytes) -> None:
        if isinstance(message, dict) and "method" in message:
            self.hear(message)

    def _garbage(self, line: jsonrpc.BadLine) -> None:
        if self.keep_garbage:
            self.probe.stdout_garbage.append(line.preview().strip()[:GARBAGE_SHOWN])

    async def _exited(self) -> Callable[[Pending], JsonObject]:
        self.exit_code = await self.process.wait()
        return lambda entry: _EXITED


@contextlib.asynccontextmanager
async def _spawned(
    argv: list[str],
    env: dict[str, str],
    probe: ProbeResult,
    cwd: str,
    ids: Iterator[Any],
    keep_garbage: bool = True,
) -> AsyncIterator[Conversation | None]:
    """The agent started in `cwd` (None when it cannot start: probe.error says why); on
    exit its whole tree is ended and its stderr tail kept in the probe."""
    process = AgentProcess(argv, env, cwd=cwd)
    try:
        process.spawn()
        await process.attach(LOG)
    except OSError as exc:
        probe.error = f"cannot start {argv[0]}: {exc.strerror or exc}"
        yield None
        return
    probe.started = True
    conversation = Conversation(process, probe, ids, keep_garbage)
    try:
        yield conversation
    finally:
        await process.terminate(TEARDOWN_GRACE_S)
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(conversation.reader, TEARDOWN_GRACE_S)
        conversation.reader.cancel()
        probe.stderr_tail = list(process.stderr_tail)


async def _probe(
    argv: list[str],
    env: dict[str, str],
    ids: Iterator[Any],
    keep_garbage: bool,
    converse: Callable[[Conversation, ProbeResult, str], Awaitable[None]],
    confine: Confinement | None,
) -> ProbeResult:
    """Spawn the agent in a fresh temp directory (in its sandbox, that directory its root,
    when `confine` gives its policy), hold the conversation, end its tree."""
    probe = ProbeResult()
    with tempfile.TemporaryDirectory(prefix="acpctl-doctor-") as cwd:
        if confine is not None:
            argv, env = launch(confine(cwd), argv, env)
        async with _spawned(argv, env, probe, cwd, ids, keep_garbage) as conversation:
            if conversation is not None:
                await converse(conversation, probe, cwd)
    return probe


async def probe_acp(
    argv: list[str], env: dict[str, str], timeout: float, confine: Confinement | None = None
) -> ProbeResult:
    """initialize (timed), then session/new in a temp directory to see whether it needs
    authentication. The agent's whole process tree is ended afterwards."""
    return await _probe(
        argv,
        env,
        itertools.count(1),
        True,
        lambda talk, probe, cwd: _converse_acp(talk, probe, cwd, timeout),
        confine,
    )


async def probe_v2(
    argv: list[str], env: dict[str, str], timeout: float, confine: Confinement | None = None
) -> ProbeResult:
    """initialize asking for ACP v2 (the draft), in v2's fields, and nothing else: the
    version the agent answers says whether it speaks v2 too (speaks())."""
    return await _probe(
        argv,
        env,
        itertools.count(1),
        False,
        lambda talk, probe, cwd: _converse_acp(talk, probe, cwd, timeout, V2_INITIALIZE),
        confine,
    )


async def probe_versions(
    argv: list[str], env: dict[str, str], timeout: float, confine: Confinement | None = None
) -> tuple[ProbeResult, ProbeResult]:
    """The agent started twice at once, asked for ACP v1 and for v2: for speaks()."""
    v1, v2 = await asyncio.gather(
        probe_acp(argv, env, timeout, confine), probe_v2(argv, env, timeout, confine)
    )
    return v1, v2


def refused_version(v1: ProbeResult) -> int | None:
    """The version an agent answered acpctl's v1 initialize with when it is a newer one,
    which `run --acp` refuses (runner/handshake.py): None when it answered 1, or not."""
    answered = v1.result.get("protocolVersion") if v1.answered else None
    if isinstance(answered, int) and answered > acp.PROTOCOL_VERSION:
        return answered
    return None


def speaks(v1: ProbeResult, v2: ProbeResult) -> str | None:
    """The ACP versions an agent speaks, read from its answers to a v1 and a v2
    initialize: v1 only when the v1 answer says 1, v2 only when the v2 answer says 2.
    None when neither answer says (the agent failed otherwise)."""
    supported = v1.error_data.get("supported") if isinstance(v1.error_data, dict) else None
    if not v1.answered and isinstance(supported, list):
        return "only ACP " + ", ".join(map(str, supported))
    if not v1.answered:
        return None
    newer = refused_version(v1)
    if newer is not None:
        return f"only ACP {newer} (it answered {newer} when asked for 1)"
    if v2.answered and v2.result.get("protocolVersion") == 2:
        return "ACP v1 and v2 (acpctl speaks v1 to it)"
    return "ACP v1"


def _initialize_params(capabilities: JsonObject) -> JsonObject:
    return {
        "protocolVersion": acp.PROTOCOL_VERSION,
        "clientCapabilities": capabilities,
        "clientInfo": {"name": "acpctl-doctor", "version": "1"},
    }


# A v2 client's initialize: the draft renames clientInfo and clientCapabilities.
V2_INITIALIZE: JsonObject = {
    "protocolVersion": 2,
    "capabilities": {},
    "info": {"name": "acpctl-doctor", "version": "1"},
}


async def _converse_acp(
    conversation: Conversation,
    probe: ProbeResult,
    cwd: str,
    timeout: float,
    only_initialize: JsonObject | None = None,
) -> None:
    """`only_initialize`: those params, and no session/new after."""
    started = time.monotonic()
    initialize = conversation.peer.call(
        acp.INITIALIZE,
        # so that agents name their terminal sign-in (claude-agent-acp's /login)
        only_initialize or _initialize_params({"auth": {"terminal": True}}),
    )
    try:
        answer = await conversation.answer(initialize, timeout)
    except asyncio.TimeoutError:
        probe.error = f"no answer to initialize within {timeout:g}s"
        return
    probe.seconds = time.monotonic() - started
    if answer is None:
        probe.error = f"exited with status {conversation.exit_code} during initialize"
        return
    if "error" in answer:
        error = answer["error"] if isinstance(answer["error"], dict) else {}
        probe.error = f"initialize failed: {error.get('message')}"
        probe.error_data = error.get("data")
        return
    probe.answered = True
    result = answer.get("result")
    probe.result = result if isinstance(result, dict) else {}
    if only_initialize is not None:
        return
    remaining = max(timeout - probe.seconds, 1.0)
    new_session = conversation.peer.call(acp.SESSION_NEW, {"cwd": cwd, "mcpServers": []})
    try:
        session = await conversation.answer(new_session, remaining)
    except asyncio.TimeoutError:
        probe.session_error = f"no answer to session/new within {remaining:.0f}s"
        return
    if session is None:
        probe.session_error = "exited during session/new"
    elif "error" in session:
        error = session["error"] if isinstance(session["error"], dict) else {}
        probe.auth_required = error.get("code") == acp.AUTH_REQUIRED
        probe.session_error = str(error.get("message"))
    else:
        probe.auth_required = False


TURN_PROMPT = "Reply with the single word: ok"


async def probe_turn(argv: list[str], env: dict[str, str], timeout: float) -> TurnResult:
    """One tiny prompt (it may cost tokens): initialize, session/new in a temp directory,
    session/prompt, each step within `timeout`. `argv` is `acpctl run --acp`, so the turn
    takes the path an editor's does. Tool calls are refused: nothing may change."""
    turn = TurnResult()
    probe = ProbeResult()
    with tempfile.TemporaryDirectory(prefix="acpctl-doctor-") as cwd:
        async with _spawned(argv, env, probe, cwd, itertools.count(1)) as conversation:
            if conversation is None:
                turn.error = probe.error
            else:
                await _converse_turn(conversation, turn, cwd, timeout)
    turn.stderr_tail = probe.stderr_tail
    return turn


async def _converse_turn(
    conversation: Conversation, turn: TurnResult, cwd: str, timeout: float
) -> None:
    steps: list[tuple[str, JsonObject]] = [
        (acp.INITIALIZE, _initialize_params({})),
        (acp.SESSION_NEW, {"cwd": cwd, "mcpServers": []}),
    ]
    for method, params in steps:
        answer = await _step(conversation, turn, method, params, timeout)
        if answer is None:
            return
        if method == acp.SESSION_NEW:
            turn.session_id = str(answer.get("sessionId"))
    sent = time.monotonic()

    def hear(message: JsonObject) -> None:
        method, params = message.get("method"), message.get("params")
        if method == acp.SESSION_UPDATE and isinstance(params, dict):
            update = params.get("update")
            if isinstance(update, dict) and update.get("sessionUpdate") == acp.AGENT_MESSAGE_CHUNK:
                if turn.first_chunk is None:
                    turn.first_chunk = time.monotonic() - sent
                content = update.get("content")
                if isinstance(content, dict) and isinstance(content.get("text"), str):
                    turn.text += content["text"]
        elif "id" in message and method == acp.REQUEST_PERMISSION:
            refused = {"outcome": {"outcome": acp.CANCELLED}}
            conversation.peer.send(jsonrpc.result(message["id"], refused))
        elif "id" in message:
            error = jsonrpc.error(message["id"], acp.METHOD_NOT_FOUND, "not offered")
            conversation.peer.send(error)

    conversation.hear = hear
    prompt = {"sessionId": turn.session_id, "prompt": [{"type": "text", "text": TURN_PROMPT}]}
    result = await _step(conversation, turn, acp.SESSION_PROMPT, prompt, timeout)
    if result is not None:
        turn.ended = time.monotonic() - sent
        turn.stop_reason = str(result.get("stopReason"))


async def _step(
    conversation: Conversation, turn: TurnResult, method: str, params: JsonObject, timeout: float
) -> JsonObject | None:
    """One request's result; None when it failed (turn says how)."""
    future = conversation.peer.call(method, params)
    try:
        answer = await conversation.answer(future, timeout)
    except asyncio.TimeoutError:
        turn.gave_up = f"no answer to {method} within {timeout:g} s"
        return None
    if answer is None:
        turn.error = f"acpctl exited with status {conversation.exit_code} during {method}"
        return None
    if "error" in answer:
        error = answer["error"] if isinstance(answer["error"], dict) else {}
        turn.error = f"{method} failed: {error.get('message')}"
        return None
    result = answer.get("result")
    return result if isinstance(result, dict) else {}


async def probe_pi_rpc(
    argv: list[str], env: dict[str, str], timeout: float, confine: Confinement | None = None
) -> ProbeResult:
    """pi's --mode rpc handshake: get_state, matched by id."""
    ids = (f"acpctl-doctor-{n}" for n in itertools.count(1))
    return await _probe(
        argv,
        env,
        ids,
        False,
        lambda talk, probe, cwd: _converse_pi(talk, probe, timeout),
        confine,
    )


async def _converse_pi(conversation: Conversation, probe: ProbeResult, timeout: float) -> None:
    started = time.monotonic()
    state = conversation.peer.command("get_state", {})
    try:
        message = await conversation.answer(state, timeout)
    except asyncio.TimeoutError:
        probe.error = f"no answer to get_state within {timeout:g}s"
        return
    if message is None:
        probe.error = f"exited with status {conversation.exit_code} before get_state"
        return
    probe.seconds = time.monotonic() - started
    probe.answered = bool(message.get("success"))
    data = message.get("data")
    probe.result = data if isinstance(data, dict) else {}
    if not probe.answered:
        probe.error = f"get_state failed: {message.get('error')}"
