"""A line-level editor for `acpctl run --acp`: writes any bytes, reads every message back.
For the tests that send what the SDK client never would."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from acpctl import jsonrpc
from tests.acp_peer import acpctl_env


class RawEditor:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.messages: list[Any] = []
        self.ids = iter(range(1, 1 << 30))
        self._changed = asyncio.Event()
        self._reader = asyncio.ensure_future(self._read())

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)

    def send(self, message: Any) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    async def call(self, method: str, params: Any, timeout: float = 30) -> Any:
        msg_id = next(self.ids)
        self.send(jsonrpc.request(msg_id, method, params))
        return await self.wait_for(
            lambda m: isinstance(m, dict) and m.get("id") == msg_id and "method" not in m, timeout
        )

    async def wait_for(self, wanted: Any, timeout: float = 30) -> Any:
        async def found() -> Any:
            while True:
                for message in self.messages:
                    if wanted(message):
                        return message
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(found(), timeout)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.messages.append(json.loads(line))  # acpctl must only ever write JSON
            self._changed.set()

    async def session(self, cwd: str) -> str:
        await self.call("initialize", {"protocolVersion": 1})
        new = await self.call("session/new", {"cwd": cwd, "mcpServers": []})
        return str(new["result"]["sessionId"])

    async def prompt(self, session_id: str, text: str) -> Any:
        return await self.call(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )


@asynccontextmanager
async def raw_editor(
    *args: str, cwd: str | None = None, log: Path | None = None, **env: str
) -> AsyncIterator[RawEditor]:
    """`acpctl run --acp ARGS` started as an editor starts it (in the project's `cwd`); its
    stderr to `log` when given."""
    log_file = log.open("wb") if log is not None else None
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acpctl",
        "run",
        "--acp",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=log_file if log_file is not None else asyncio.subprocess.PIPE,
        env=acpctl_env(**env),
        limit=jsonrpc.MAX_LINE_BYTES,
        cwd=cwd,
    )
    editor = RawEditor(process)
    try:
        yield editor
    finally:
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 15)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
        editor._reader.cancel()
        if log_file is not None:
            log_file.close()
