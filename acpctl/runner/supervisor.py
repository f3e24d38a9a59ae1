"""Spawning the agent, capturing its stderr, restart limits, and process-tree teardown."""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import signal
import sys
import time

import psutil

from acpctl.jsonrpc import MAX_LINE_BYTES

STDERR_TAIL_LINES = 20
TERMINATE_GRACE_S = 2.0
MAX_RESTARTS_PER_MINUTE = 5


class AgentProcess:
    """One agent child process: its pipes, a stderr pump into the run log, its teardown."""

    def __init__(self, argv: list[str], env: dict[str, str], log: logging.Logger,
                 cwd: str | None = None) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.log = log
        self.process: asyncio.subprocess.Process | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        environment = {**os.environ, **self.env}
        # A session of its own: the whole tree can be signalled even after reparenting.
        self.process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=environment, cwd=self.cwd,
            start_new_session=True, limit=MAX_LINE_BYTES,
        )
        self.log.info("started agent pid %d: %s", self.process.pid, " ".join(self.argv))
        self._stderr_task = asyncio.create_task(self._pump_stderr())

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def stdout(self) -> asyncio.StreamReader:
        assert self.process is not None and self.process.stdout is not None
        return self.process.stdout

    def write(self, data: bytes) -> None:
        if self.process and self.process.stdin and not self.process.stdin.is_closing():
            self.process.stdin.write(data)

    async def drain(self) -> None:
        if self.process and self.process.stdin and not self.process.stdin.is_closing():
            try:
                await self.process.stdin.drain()
            except (ConnectionResetError, BrokenPipeError):
                pass

    async def _pump_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        stream = self.process.stderr
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # an over-long line: take what is buffered
                raw = await stream.read(MAX_LINE_BYTES)
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.stderr_tail.append(line)
            self.log.info("agent stderr: %s", line)

    async def wait(self) -> int:
        assert self.process is not None
        code = await self.process.wait()
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
            except asyncio.TimeoutError:
                pass
        return code

    def describe_exit(self, code: int | None) -> str:
        if code is None:
            status = "agent is not running"
        elif code < 0:
            try:
                status = f"agent was killed by {signal.Signals(-code).name}"
            except ValueError:
                status = f"agent was killed by signal {-code}"
        else:
            status = f"agent exited with status {code}"
        if code in (137, -9):
            status += " (killed: out of memory, or by hand)"
        return status

    async def terminate(self, grace: float = TERMINATE_GRACE_S) -> None:
        """Close stdin, then SIGTERM the whole tree, SIGKILL what is left after `grace`."""
        process = self.process
        if process is None:
            return
        tree = _process_tree(process.pid)
        if process.stdin and not process.stdin.is_closing():
            process.stdin.close()
        if process.returncode is None:
            try:
                await asyncio.wait_for(asyncio.shield(process.wait()), min(0.2, grace))
            except asyncio.TimeoutError:
                pass
        tree = [p for p in {*tree, *_process_tree(process.pid)} if _alive(p)]
        _signal_all(process.pid, tree, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (
            process.returncode is None or any(_alive(p) for p in tree)
        ):
            await asyncio.sleep(0.05)
        leftovers = [p for p in tree if _alive(p)]
        if process.returncode is None or leftovers:
            _signal_all(process.pid, leftovers, signal.SIGKILL)
            self.log.info("killed %d agent processes that ignored SIGTERM",
                          len(leftovers) or 1)
        await process.wait()
        if self._stderr_task is not None:
            self._stderr_task.cancel()


def _process_tree(pid: int) -> list[psutil.Process]:
    try:
        parent = psutil.Process(pid)
        return [parent, *parent.children(recursive=True)]
    except psutil.Error:
        return []


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _signal_all(group: int, processes: list[psutil.Process], sig: signal.Signals) -> None:
    if sys.platform != "win32":
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for process in processes:
        try:
            process.send_signal(sig)
        except psutil.Error:
            pass


class RestartPolicy:
    """Exponential backoff between restarts, and at most MAX_RESTARTS_PER_MINUTE of them."""

    def __init__(self, limit: int = MAX_RESTARTS_PER_MINUTE, window: float = 60.0) -> None:
        self.limit = limit
        self.window = window
        self.restarts: list[float] = []

    def next_delay(self) -> float | None:
        """Seconds to wait before restarting, or None when the limit is reached."""
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < self.window]
        if len(self.restarts) >= self.limit:
            return None
        delay = 0.0 if not self.restarts else min(0.25 * 2 ** (len(self.restarts) - 1), 4.0)
        self.restarts.append(now + delay)
        return delay
