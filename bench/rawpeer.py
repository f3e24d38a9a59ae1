"""A minimal line-level JSON-RPC peer for benchmarks: no SDK, so it measures the server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEMO = [sys.executable, "-m", "acpctl.demo_agent"]
# What editors launch: the console script beside the interpreter (`acpctl install` writes
# its path), else `python -m acpctl`.
_SCRIPT = Path(sys.executable).parent / "acpctl"
ACPCTL_COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "acpctl"]
ACPCTL = [*ACPCTL_COMMAND, "run", "--acp", "--agent", "demo"]
LIMIT = 64 * 1024 * 1024


class Peer:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.next_id = 0

    @classmethod
    async def start(cls, argv: list[str], env: dict[str, str] | None = None) -> Peer:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            limit=LIMIT,
        )
        return cls(process)

    def send(self, method: str, params: Any) -> int:
        assert self.process.stdin is not None
        self.next_id += 1
        line = json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        )
        self.process.stdin.write(line.encode() + b"\n")
        return self.next_id

    async def response(self, msg_id: int) -> tuple[dict[str, Any], int]:
        """Read until the response to msg_id; returns it and how many lines came before."""
        assert self.process.stdout is not None
        before = 0
        while True:
            line = await self.process.stdout.readline()
            if not line:
                raise RuntimeError("peer closed its stdout")
            if b'"id":' in line and b'"method"' not in line:
                message = json.loads(line)
                if message.get("id") == msg_id:
                    return message, before
            before += 1

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        message, _ = await self.response(self.send(method, params))
        return message

    def write(self, message: dict[str, Any]) -> None:
        """Any message, as a line (an answer to the agent's request)."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")

    async def until(self, wanted: Any) -> dict[str, Any]:
        """The first message from now on that `wanted` takes."""
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            if wanted(message):
                return dict(message)
        raise RuntimeError("peer closed its stdout")

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except asyncio.TimeoutError:
            self.process.kill()


def agents_add(name: str, *arguments: str, env: dict[str, str] | None = None) -> None:
    """`acpctl agents add NAME ARGUMENTS` in this process's acpctl home (and `env`): how
    every benchmark sets up the agents it measures."""
    subprocess.run(
        [sys.executable, "-m", "acpctl", "agents", "add", name, *arguments],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def as_installed() -> None:
    """Start acpctl as an installed copy starts: from bytecode (pip compiles it at install).
    A shell with PYTHONDONTWRITEBYTECODE set would otherwise have every measured process
    compile acpctl's modules from source, 30 ms and more a start."""
    import compileall

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "acpctl"), quiet=1)


@contextlib.contextmanager
def private_home() -> Iterator[None]:
    """Every acpctl directory in a temporary one, so a benchmark touches nothing of yours;
    acpctl run from bytecode, as installed."""
    as_installed()
    with tempfile.TemporaryDirectory() as home:
        for variable in ("ACPCTL_CONFIG_DIR", "ACPCTL_DATA_DIR", "ACPCTL_STATE_DIR"):
            os.environ[variable] = os.path.join(home, variable.lower())
        os.environ.pop("ACPCTL_SESSION_DIR", None)
        yield


def interleaved(rep: int, configs: list[str]) -> list[str]:
    """The configurations of repetition `rep`: in order, then reversed, so that neither
    always runs first."""
    return configs if rep % 2 == 0 else list(reversed(configs))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def now() -> float:
    return time.perf_counter()
