"""A real ACP client (the official Python SDK) that records what an agent sends it."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import acp
from acp.connection import StreamObserver
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    DeclineElicitationResponse,
    DeniedOutcome,
    RequestPermissionResponse,
)

from acpctl import jsonrpc

ACPCTL_VARIABLES = (
    "ACPCTL_CONFIG_DIR",
    "ACPCTL_DATA_DIR",
    "ACPCTL_STATE_DIR",
    "ACPCTL_SESSION_DIR",
    "ACPCTL_DEBUG",
    "PYTHONPATH",
)


class RecordingClient:
    """Records session updates per session; answers permission requests by policy:
    a dict session_id -> option id to select, "allow_once" for the agent's allow-once option
    whatever its id, "hold" to never answer (until cancelled). Elicitations likewise:
    `form_answer` is the content to accept with, or "decline", or "hold". Extension
    notifications are kept in `notes`."""

    def __init__(self) -> None:
        self.updates: dict[str, list[Any]] = defaultdict(list)
        self.permission_requests: list[tuple[str, Any]] = []
        self.answers: dict[str, str] = {}
        self.default_answer = "allow"
        self.permission_asked = asyncio.Event()
        self.elicitations: list[tuple[str, Any]] = []  # (message, mode)
        self.form_answer: dict[str, Any] | str = "decline"
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self._updated = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates[session_id].append(update)
        self._updated.set()

    async def until(self, condition: Callable[[], bool], timeout: float = 30) -> None:
        """Wait, update by update, until `condition()` holds."""

        async def wait() -> None:
            while not condition():
                self._updated.clear()
                await self._updated.wait()

        await asyncio.wait_for(wait(), timeout)

    async def streaming(self, session_id: str, count: int = 1) -> None:
        """Wait until `session_id` has had `count` updates."""
        await self.until(lambda: len(self.updates[session_id]) >= count)

    async def request_permission(
        self, options: Any, session_id: str, tool_call: Any, **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append((session_id, tool_call))
        self.permission_asked.set()
        answer = self.answers.get(session_id, self.default_answer)
        if answer == "hold":
            await asyncio.Event().wait()
        if answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if answer == "allow_once":  # whatever id the agent gave its allow-once option
            answer = next(o.option_id for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=answer, outcome="selected")
        )

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.elicitations.append((message, mode))
        self._updated.set()
        if self.form_answer == "hold":
            await asyncio.Event().wait()
        if isinstance(self.form_answer, dict):
            return AcceptElicitationResponse(action="accept", content=self.form_answer)
        return DeclineElicitationResponse(action="decline")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        self.notes.append(("elicitation/complete", {"elicitationId": elicitation_id}))

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.notes.append((method, params))
        self._updated.set()

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u.content.text
            for u in self.updates[session_id]
            if u.session_update == kind and hasattr(u.content, "text")
        )

    def kinds(self, session_id: str) -> list[str]:
        return [u.session_update for u in self.updates[session_id]]


def acpctl_env(**extra: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in ACPCTL_VARIABLES if k in os.environ}
    env.update(extra)
    return env


@asynccontextmanager
async def connect(
    *args: str,
    client: RecordingClient | None = None,
    stderr_file: Path | None = None,
    observers: list[StreamObserver] | None = None,
    **env: str,
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process, RecordingClient]]:
    """Start `acpctl run --acp ARGS` and connect the SDK's client side to it; observers see
    every message as it goes out or comes in."""
    client = client or RecordingClient()
    stderr = open(stderr_file, "ab") if stderr_file else None  # noqa: SIM115
    try:
        async with acp.spawn_agent_process(
            # The SDK's Client protocol lists every method; RecordingClient has those
            # acpctl can send, which is what the SDK dispatches to.
            cast(Any, client),
            sys.executable,
            "-m",
            "acpctl",
            "run",
            "--acp",
            *args,
            env=acpctl_env(**env),
            transport_kwargs={
                "stderr": stderr.fileno() if stderr else asyncio.subprocess.DEVNULL,
                "limit": jsonrpc.MAX_LINE_BYTES,
            },
            use_unstable_protocol=True,
            observers=observers,
        ) as (conn, process):
            yield conn, process, client
    finally:
        if stderr:
            stderr.close()


async def initialized(conn: Any) -> Any:
    return await conn.initialize(protocol_version=1)
