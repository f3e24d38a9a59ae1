"""An agent process in the event loop: its pipes, its stderr in the run log, its teardown,
and how often it may be restarted."""

from __future__ import annotations

import asyncio
import collections
import logging
import signal
import subprocess
import time

from acpctl import processes
from acpctl.jsonrpc import MAX_LINE_BYTES
from acpctl.jsonrpc.streams import line_reader, widen_pipe

# The last lines of an agent's stderr kept for error messages and `doctor` (the run log
# has them all).
STDERR_TAIL_LINES = 10
MAX_RESTARTS_PER_MINUTE = 5


class AgentProcess:
    """One agent child process: its pipes, a stderr pump into the run log, its teardown.

    The process is spawned with plain subprocess (processes.spawn: its own process group,
    acpctl's marks) and its pipes are then adopted by the event loop.
    """

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | None = None,
        popen: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.popen = popen  # spawned already (from argv), to adopt
        self.stdout = asyncio.StreamReader()  # replaced by attach()
        self.log = logging.getLogger(__name__)
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stdin: asyncio.WriteTransport | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self._exited: asyncio.Future[int] | None = None

    def spawn(self) -> None:
        """Start the process (raises OSError). Needs no event loop."""
        self.popen = processes.spawn(self.argv, self.env, self.cwd)

    async def attach(self, log: logging.Logger) -> None:
        """Adopt the pipes into the running event loop and start watching the process."""
        assert self.popen is not None
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        loop = asyncio.get_running_loop()
        self.log = log
        widen_pipe(self.popen.stdout.fileno())
        self.stdout = line_reader()
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(self.stdout), self.popen.stdout
        )
        stderr = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stderr), self.popen.stderr
        )
        self._stdin, _ = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, self.popen.stdin
        )
        self._exited = loop.run_in_executor(None, self.popen.wait)
        log.info("started agent pid %d: %s", self.popen.pid, " ".join(self.argv))
        self._stderr_task = asyncio.create_task(self._pump_stderr(stderr))

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen else None

    def write(self, data: bytes) -> None:
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.write(data)

    async def _pump_stderr(self, stream: asyncio.StreamReader) -> None:
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
        assert self._exited is not None
        code = await asyncio.shield(self._exited)
        if self._stderr_task is not None:
            # asyncio.wait, not wait_for: terminate() may have cancelled the pump, and its
            # cancellation must not become the caller's (the agent's reader would die
            # before failing the requests that wait).
            await asyncio.wait({self._stderr_task}, timeout=1.0)
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

    async def terminate(self, grace: float = processes.TERMINATE_GRACE_S) -> None:
        """Close stdin, then SIGTERM the whole tree, SIGKILL what is left after `grace`."""
        popen = self.popen
        if popen is None:
            return
        tree = processes.process_tree(popen.pid)
        if self._stdin is not None and not self._stdin.is_closing():
            self._stdin.close()
        deadline = time.monotonic() + min(0.2, grace)
        while popen.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        tree = [p for p in {*tree, *processes.process_tree(popen.pid)} if processes.is_alive(p)]
        processes.signal_tree(popen.pid, tree, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (
            popen.poll() is None or any(processes.is_alive(p) for p in tree)
        ):
            await asyncio.sleep(0.05)
        leftovers = [p for p in tree if processes.is_alive(p)]
        if popen.poll() is None or leftovers:
            processes.signal_tree(popen.pid, leftovers, signal.SIGKILL)
            self.log.info("killed %d agent processes that ignored SIGTERM", len(leftovers) or 1)
        if self._exited is not None:
            await asyncio.shield(self._exited)
        if self._stderr_task is not None:
            self._stderr_task.cancel()


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

    def refusal(self, agent: str) -> str:
        span = "minute" if self.window == 60 else f"{self.window:g} s"
        return (
            f"{agent} crashed {self.limit} times in the last {span}; acpctl stopped "
            "restarting it (see `acpctl logs` and `acpctl doctor`)"
        )
