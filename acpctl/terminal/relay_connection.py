"""The terminal's connection to its agent: a child `acpctl run --acp` (the agent directly),
or the link to the session host run in this process (through the host, as an editor's
`run --acp` goes there). ACP over a pair of pipes either way; what it says drawn by the
renderer, the agent's questions asked on the terminal, the link's state said."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

from acpctl import __version__, config, jsonrpc
from acpctl import protocol as acp
from acpctl.config import Remote
from acpctl.errors import AcpctlError
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.peer import Peer
from acpctl.jsonrpc.pending import Pending
from acpctl.jsonrpc.streams import Lines, MemoryPipe, Output, open_input
from acpctl.processes import signal_child
from acpctl.remote.link_state import HOST_STOPPED
from acpctl.remote.relay import NOTE
from acpctl.runner import runs
from acpctl.runner.supervisor import STDERR_TAIL_LINES
from acpctl.terminal.host import ClientHost
from acpctl.terminal.render import Renderer, answered_by
from acpctl.terminal.screen import printable
from acpctl.terminal.transcript import recorded_lines

CLIENT_VARIABLE = "ACPCTL_CLIENT"  # who started `run --acp`, for its log
PROMPT = "you> "
PROMPT_BACK_S = 1.0  # how long another client's turn is quiet before the prompt returns


class CurrentTurn(Protocol):
    """The turn a prompt runs (terminal/client.py's Turn): Ctrl-C interrupts it, and it is
    abandoned when nobody reads its answer."""

    abandon: asyncio.Event

    def interrupt(self, why: str = ...) -> None: ...


# What the host says of the agent's questions, shown to the person (_note_of_answer).
NOTES_OF_ANSWERS = frozenset(
    {
        acp.CANCEL_REQUEST,
        acp.RECORDED_NOTE,
        acp.ELICITATION_RESOLVED,
        acp.PERMISSION_ANSWERED,
        acp.ELICITATION_COMPLETE,
    }
)


class RelayConnection:
    """A child `acpctl run --acp` in a session of its own (Ctrl-C is ours, not its), or the
    link to the session host in this process."""

    def __init__(self, host: ClientHost, renderer: Renderer) -> None:
        self.host = host
        self.renderer = renderer
        self.session_id: str | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.link: asyncio.Task[int | None] | None = None  # the link, run here instead
        self._in: asyncio.StreamReader | None = None
        self._out: Lines | None = None
        self.peer: Peer[int] = Peer(self._write)
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.turn: CurrentTurn | None = None  # the turn Ctrl-C applies to
        self.output_closed = False
        self.heard = 0.0  # when the agent last said something in our session
        self.saved_terminal: list[Any] | None = None  # the chat's terminal, as it was
        self.commands: list[JsonObject] = []  # the agent's slash commands, as it published them
        self.closing = False  # close() has begun: the end of reading is ours
        self.host_stopping = False  # the host said it stops: its end is no surprise
        self.prompt_up = False  # the chat waits at its prompt (another client may be prompting)
        self.link_down: str | None = None  # what the status line says while the link is down
        self._prompt_back: asyncio.TimerHandle | None = None  # the prompt, hidden, comes back
        # The agent's questions being asked here, by their ids: dropped when another
        # client answers first (the host's $/cancel_request).
        self.questions: dict[Any, asyncio.Task[Any]] = {}

    async def start(
        self,
        agent: str,
        history: bool = True,
        through_host: bool = False,
        cwd: str | None = None,
        remote: Remote | None = None,
    ) -> None:
        """`run --acp` for `agent`, started in `cwd` (the session's directory: where an
        editor starts it, the first root of a sandboxed agent). Through the host, the link
        runs here: no second interpreter to start, no process between us and the host; to
        `remote` (a linked host's agent), likewise."""
        if through_host or remote is not None:
            if not history:
                raise AcpctlError("--no-history is not served through the session host")
            await self._start_link(agent, cwd, remote)
            return
        argv = [sys.executable, "-m", "acpctl", "run", "--acp", "--agent", agent]
        if not history:
            argv.append("--no-history")
        to_child, from_child = os.pipe(), os.pipe()
        try:
            self.process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=to_child[0],
                stdout=from_child[1],
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env={**os.environ, CLIENT_VARIABLE: "acpctl run"},  # named in the run's log
                cwd=cwd if cwd is not None and os.path.isdir(cwd) else None,
            )
        finally:
            os.close(to_child[0])
            os.close(from_child[1])
        await self._open_pipes(from_child[0], to_child[1])
        self._spawn(self._read_stderr())

    async def _open_pipes(self, reading: int, writing: int) -> None:
        """Our ends of the two pipes, as asyncio streams (which hold their own copies)."""
        try:
            self._in = await open_input(reading)
            self._out = await Output.open(writing)
        finally:
            os.close(reading)
            os.close(writing)
        self._spawn(self._read())

    async def _start_link(self, agent: str, cwd: str | None, remote: Remote | None) -> None:
        """The link to this machine's session host (one started when none runs) as `run
        --acp --through-host` runs it, or to `remote`, in this process over two in-memory
        pipes; what it logs is kept as a child's stderr is (its notes shown)."""
        from acpctl.remote.relay import link_local, link_remote

        to_link, from_link = MemoryPipe(), MemoryPipe()
        log = logging.Logger("acpctl.link")
        log.addHandler(_LinkLog(self._said))

        async def ends() -> tuple[asyncio.StreamReader, Lines]:
            return to_link.reader, from_link

        linking = (
            link_local(agent, config.load().outage_limit_s, False, log, ends, cwd)
            if remote is None
            else link_remote(remote, log, ends)
        )
        self.link = asyncio.ensure_future(linking)
        self.link.add_done_callback(lambda _: from_link.close())  # failed before the ends
        self._in, self._out = from_link.reader, to_link
        self._spawn(self._read())

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _write(self, line: bytes) -> None:
        assert self._out is not None
        self._out.write(line)

    async def request(self, method: str, params: JsonObject) -> Any:
        return jsonrpc.unwrap(await self.peer.call(method, params))

    def notify(self, method: str, params: JsonObject) -> None:
        self.peer.notify(method, params)

    async def _read(self) -> None:
        assert self._in is not None
        await self.peer.read(jsonrpc.read_messages(self._in), self._route, closed=self._exited)

    async def _exited(self) -> Callable[[Pending], JsonObject]:
        why = self.ended()

        def failed(entry: Pending) -> JsonObject:
            return jsonrpc.error(None, acp.INTERNAL_ERROR, why)

        return failed

    async def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        debug = bool(os.environ.get("ACPCTL_DEBUG"))
        while line := await self.process.stderr.readline():
            self._said(line.decode("utf-8", "replace").rstrip(), debug)

    def _said(self, text: str, debug: bool = False) -> None:
        """A line of the child's stderr, or of the link's log: kept to say why it ended."""
        self.stderr_tail.append(text)
        if debug or text.startswith(f"acpctl: {NOTE}"):  # a note is for the person
            self._notice(text)

    def _route(self, message: Any, line: bytes) -> None:
        if not isinstance(message, dict):
            return
        method = message.get("method")
        raw_params = message.get("params")
        params: JsonObject = raw_params if isinstance(raw_params, dict) else {}
        if method is None:
            return  # an answer to nothing we asked
        if method == acp.HOST_STOPPING:
            self.host_stopping = True
            self._notice(f"acpctl: {acp.stopping_notice(params)}")
            return
        if method == acp.LINK_STATE:
            self._link_state(params)
            return
        if "id" in message:
            self.heard = time.monotonic()
            self._spawn(self._answer(message["id"], method, params))
        elif method in NOTES_OF_ANSWERS:
            self._note_of_answer(method, params)
        elif method == acp.SESSION_UPDATE and params.get("sessionId") == self.session_id:
            self.heard = time.monotonic()
            update = params.get("update")
            if isinstance(update, dict) and update.get("sessionUpdate") == (
                acp.AVAILABLE_COMMANDS_UPDATE
            ):
                listed = update.get("availableCommands")
                self.commands = [c for c in listed or [] if isinstance(c, dict)]
            if isinstance(update, dict) and not self.output_closed:
                self._clear_of_the_prompt()
                try:
                    self.renderer.update(update)
                except BrokenPipeError:
                    self.close_output()

    def _note_of_answer(self, method: str, params: JsonObject) -> None:
        """What is said of the agent's questions: one asked of us answered elsewhere (the
        question is dropped), who answered one, a URL step done, a recorded answer in a
        replay."""
        if method == acp.CANCEL_REQUEST:
            question = self.questions.pop(jsonrpc.id_key(params.get("requestId")), None)
            if question is not None and not question.done():
                question.cancel()
                self._notice("acpctl: answered elsewhere")
            return
        if params.get("sessionId") not in (self.session_id, None):
            return
        if method == acp.RECORDED_NOTE:
            event = params.get("event")
            lines = recorded_lines(event) if isinstance(event, dict) else []
            text = "\n".join(lines)
        elif method in (acp.ELICITATION_RESOLVED, acp.PERMISSION_ANSWERED):
            answer = params.get("action") or params.get("chosenOptionId") or "cancelled"
            text = f"  answered elsewhere: {answer}{answered_by(params.get('resolvedBy'))}"
        else:
            text = "  the agent says the step at the address it gave is done"
        if text:
            self._notice(printable(text))

    def _clear_of_the_prompt(self) -> None:
        """Another client's turn streams while the chat waits at its prompt: the prompt
        goes from the screen, so that nothing lands on it, and comes back once that turn
        has been quiet for PROMPT_BACK_S, with what was typed so far."""
        if not (self.prompt_up and self.turn is None and self.renderer.column.on_screen):
            return
        if self._prompt_back is None:
            sys.stdout.write("\r\033[K")
        else:
            self._prompt_back.cancel()
        loop = asyncio.get_running_loop()
        self._prompt_back = loop.call_later(PROMPT_BACK_S, self._prompt_again)

    def _notice(self, text: str) -> None:
        """A line for the person. At the chat's prompt it goes on a line of its own (the
        prompt is taken off the screen first) and the prompt comes back after it, with
        what was typed so far."""
        at_prompt = self.prompt_up and self.turn is None and self.renderer.column.on_screen
        if at_prompt and self._prompt_back is None:
            sys.stdout.write("\r\033[K")
            sys.stdout.flush()
        self.renderer.notice(text)
        if at_prompt and self._prompt_back is None:
            self._prompt_again()

    def _prompt_again(self) -> None:
        self._prompt_back = None
        if not self.prompt_up:
            return
        self.renderer.finish(None)  # the other turn's last line ended
        typed = ""
        with contextlib.suppress(ImportError):
            import readline

            typed = readline.get_line_buffer()
        sys.stdout.write(PROMPT + typed)
        sys.stdout.flush()

    def prompt_answered(self) -> None:
        self.prompt_up = False
        if self._prompt_back is not None:
            self._prompt_back.cancel()
            self._prompt_back = None

    def new_turn(self) -> None:
        """A turn starts: its status line says the link is down, if it is (a prompt typed
        while the host is away waits for the link, not for the agent)."""
        self.renderer.new_turn()
        if self.renderer.status is not None:
            self.renderer.status.fact("link", self.link_down)

    def _link_state(self, params: JsonObject) -> None:
        """The link dropped (said on the status line while it lasts) or is back (said
        once)."""
        status = self.renderer.status
        if params.get("state") == "down":
            since = params.get("since")
            at = (
                time.strftime("%H:%M:%S", time.localtime(since))
                if isinstance(since, (int, float))
                else "now"
            )
            never = params.get("connected") is False  # not a drop: it never connected
            self.link_down = (
                f"link not up yet (since {at}), connecting"
                if never
                else f"link down since {at}, reconnecting"
            )
            if status is not None:
                status.fact("link", self.link_down)
            elif never:
                self._notice(f"acpctl: the link could not connect ({at}); trying again")
            else:
                self._notice(f"acpctl: the link dropped at {at}; reconnecting")
        elif params.get("state") == "up":
            self.link_down = None
            if status is not None:
                status.fact("link", None)
            after = params.get("after")
            took = f" after {after:g} s" if isinstance(after, (int, float)) else ""
            said = "up" if params.get("first") is True else "back"
            self._notice(f"acpctl: the link is {said}{took} ({params.get('how')})")

    def ended(self) -> str:
        """Why the child `run --acp` or the link ended: the host it linked to stopped, as it
        said, or what it said last."""
        if self.host_stopping:
            return HOST_STOPPED
        said = "; ".join(self.stderr_tail) or "no output"
        if self.link is not None:
            return f"the link to the session host ended ({said})"
        return f"acpctl run --acp exited ({said})"

    def log_path(self) -> str:
        """The run log of the child `run --acp`, from its run record."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            assert self.process is not None
            record = json.loads(runs.path_of(self.process.pid).read_text())
            return str(record["log"])
        return "acpctl logs"

    def close_output(self) -> None:
        """Whoever read our stdout has gone (`| head`): stop writing, end the turn, and
        leave quietly; the child relay and its agent are ended on the way out."""
        self.output_closed = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush into a closed pipe
        os.close(devnull)
        if self.turn is not None:  # nobody reads the answer: the agent can stop writing it
            self.notify(acp.SESSION_CANCEL, {"sessionId": self.session_id})
            self.turn.abandon.set()

    async def _answer(self, msg_id: Any, method: str, params: JsonObject) -> None:
        asking = method in (acp.REQUEST_PERMISSION, acp.ELICITATION_CREATE)
        spinner = self.renderer.status if asking else None
        if spinner is not None:  # a question on the terminal: no status line over it
            spinner.hide()
            spinner.paused = True
        task = asyncio.current_task()
        if asking and task is not None:  # another client may answer it first
            self.questions[jsonrpc.id_key(msg_id)] = task
        try:
            self.peer.send(jsonrpc.result(msg_id, await self.host.handle(method, params)))
        except RpcError as exc:
            self.peer.send(jsonrpc.error_response(msg_id, exc))
        except asyncio.CancelledError:
            if self.closing:
                raise  # else: answered elsewhere, and nothing is sent
        except Exception as exc:  # every request gets an answer, whatever failed in it
            failed = RpcError(acp.INTERNAL_ERROR, f"{method} failed: {exc}")
            self.peer.send(jsonrpc.error_response(msg_id, failed))
        finally:
            self.questions.pop(jsonrpc.id_key(msg_id), None)
            if spinner is not None:
                spinner.paused = False
                spinner.quiet_since = time.monotonic()
                self.renderer.column.line_broken()  # the question ended with the answer's Enter

    async def close(self) -> None:
        """The child or the link told that we go (the end of its input), and waited for."""
        self.closing = True
        await self.host.close()
        if self._out is not None:
            self._out.close()
        if self.link is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.link), 10)
            except asyncio.TimeoutError:
                self.link.cancel()
                await asyncio.gather(self.link, return_exceptions=True)
        if self.process is not None:
            try:
                await asyncio.wait_for(self.process.wait(), 10)
            except asyncio.TimeoutError:
                signal_child(self.process)
                await self.process.wait()
        for task in list(self.tasks):
            task.cancel()


class _LinkLog(logging.Handler):
    """The link's log, as the child's stderr would have carried it."""

    def __init__(self, said: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self._said = said

    def emit(self, record: logging.LogRecord) -> None:
        self._said(f"acpctl: {record.getMessage()}")


async def initialize(conn: RelayConnection, host: ClientHost) -> None:
    await conn.request(
        acp.INITIALIZE,
        {
            "protocolVersion": acp.PROTOCOL_VERSION,
            "clientCapabilities": host.capabilities(),
            "clientInfo": {"name": "acpctl", "title": "acpctl terminal", "version": __version__},
        },
    )
