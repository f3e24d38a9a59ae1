"""Live probes: start an agent the way an editor would and watch what it does."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from acpctl import protocol as acp
from acpctl.runner.supervisor import end_process_tree

GARBAGE_SHOWN = 120


@dataclass
class ProbeResult:
    started: bool = False
    answered: bool = False
    seconds: float | None = None
    error: str | None = None
    stdout_garbage: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)
    auth_required: bool | None = None
    session_error: str | None = None


async def _end(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(process.wait(), 0.2)  # closed stdin may be enough
    await asyncio.to_thread(end_process_tree, process.pid, 1.0, False)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(process.wait(), 3)


async def _read_until(stdout: asyncio.StreamReader, probe: ProbeResult,
                      wanted: Any) -> dict[str, Any] | None:
    """Read stdout lines until the response with id `wanted`; non-JSON lines are kept."""
    while True:
        line = await stdout.readline()
        if not line:
            return None
        text = line.decode("utf-8", "replace").strip()
        if not text:
            continue
        try:
            message = json.loads(text)
        except ValueError:
            probe.stdout_garbage.append(text[:GARBAGE_SHOWN])
            continue
        if isinstance(message, dict) and message.get("id") == wanted and "method" not in message:
            return message


@contextlib.asynccontextmanager
async def _spawned(argv: list[str], env: dict[str, str], probe: ProbeResult, cwd: str,
                   ) -> AsyncIterator[asyncio.subprocess.Process | None]:
    """The agent started in `cwd` (None when it cannot start: probe.error says why); on
    exit its whole tree is ended and its stderr tail kept in the probe."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env={**os.environ, **env}, cwd=cwd,
            start_new_session=True, limit=64 * 1024 * 1024)
    except OSError as exc:
        probe.error = f"cannot start {argv[0]}: {exc.strerror or exc}"
        yield None
        return
    probe.started = True
    assert process.stdin and process.stderr
    stderr_task = asyncio.create_task(process.stderr.read())
    try:
        yield process
    finally:
        if not process.stdin.is_closing():
            process.stdin.close()
        await _end(process)
        with contextlib.suppress(Exception):
            raw = await asyncio.wait_for(stderr_task, 1)
            probe.stderr_tail = raw.decode("utf-8", "replace").splitlines()[-10:]
        stderr_task.cancel()


async def probe_acp(argv: list[str], env: dict[str, str], timeout: float) -> ProbeResult:
    """initialize (timed), then session/new in a temp directory to see whether it needs
    authentication. The agent's whole process tree is ended afterwards."""
    probe = ProbeResult()
    with tempfile.TemporaryDirectory(prefix="acpctl-doctor-") as cwd:
        async with _spawned(argv, env, probe, cwd) as process:
            if process is not None:
                await _converse_acp(process, probe, cwd, timeout)
    return probe


async def _converse_acp(process: asyncio.subprocess.Process, probe: ProbeResult, cwd: str,
                        timeout: float) -> None:
    assert process.stdin and process.stdout
    started = time.monotonic()
    process.stdin.write(json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": acp.INITIALIZE,
        "params": {"protocolVersion": acp.PROTOCOL_VERSION, "clientCapabilities": {},
                   "clientInfo": {"name": "acpctl-doctor", "version": "1"}}}).encode() + b"\n")
    try:
        answer = await asyncio.wait_for(_read_until(process.stdout, probe, 1), timeout)
    except asyncio.TimeoutError:
        probe.error = f"no answer to initialize within {timeout:g}s"
        return
    probe.seconds = time.monotonic() - started
    if answer is None:
        probe.error = f"exited with status {await process.wait()} during initialize"
        return
    if "error" in answer:
        probe.error = f"initialize failed: {answer['error'].get('message')}"
        return
    probe.answered = True
    probe.result = answer.get("result") or {}
    process.stdin.write(json.dumps({
        "jsonrpc": "2.0", "id": 2, "method": acp.SESSION_NEW,
        "params": {"cwd": cwd, "mcpServers": []}}).encode() + b"\n")
    remaining = max(timeout - probe.seconds, 1.0)
    try:
        session = await asyncio.wait_for(_read_until(process.stdout, probe, 2), remaining)
    except asyncio.TimeoutError:
        probe.session_error = f"no answer to session/new within {remaining:.0f}s"
        return
    if session is None:
        probe.session_error = "exited during session/new"
    elif "error" in session:
        error = session["error"]
        probe.auth_required = error.get("code") == acp.AUTH_REQUIRED
        probe.session_error = str(error.get("message"))
    else:
        probe.auth_required = False


async def probe_pi_rpc(argv: list[str], env: dict[str, str], timeout: float) -> ProbeResult:
    """pi's --mode rpc handshake: get_state, matched by id."""
    probe = ProbeResult()
    with tempfile.TemporaryDirectory(prefix="acpctl-doctor-") as cwd:
        async with _spawned(argv, env, probe, cwd) as process:
            if process is not None:
                await _converse_pi(process, probe, timeout)
    return probe


async def _converse_pi(process: asyncio.subprocess.Process, probe: ProbeResult,
                       timeout: float) -> None:
    assert process.stdin and process.stdout
    started = time.monotonic()
    process.stdin.write(b'{"id":"acpctl-doctor","type":"get_state"}\n')
    while True:
        try:
            line = await asyncio.wait_for(process.stdout.readline(),
                                          timeout - (time.monotonic() - started))
        except (asyncio.TimeoutError, ValueError):
            probe.error = f"no answer to get_state within {timeout:g}s"
            return
        if not line:
            probe.error = f"exited with status {await process.wait()} before get_state"
            return
        try:
            message = json.loads(line)
        except ValueError:
            continue  # pi may print a banner before its JSON
        if isinstance(message, dict) and message.get("id") == "acpctl-doctor":
            probe.seconds = time.monotonic() - started
            probe.answered = bool(message.get("success"))
            probe.result = message.get("data") or {}
            if not probe.answered:
                probe.error = f"get_state failed: {message.get('error')}"
            return
