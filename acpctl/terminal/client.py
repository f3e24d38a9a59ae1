"""The terminal client: talks ACP to a child `acpctl run --acp`, so every turn goes through
the same runner (supervision, history store) as an editor's, and the sessions are shared.

Exit codes: 0 end_turn, 1 error (and max_tokens, max_turn_requests), 2 usage, 3 timeout,
4 refusal, 5 a permission was denied, 130 cancelled.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from acpctl import __version__, config, jsonrpc, paths
from acpctl import protocol as acp
from acpctl.agents import discovery, transcripts
from acpctl.errors import UsageError
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.peer import Peer
from acpctl.jsonrpc.pending import Pending
from acpctl.remote.link_state import HOST_STOPPED
from acpctl.remote.relay import NOTE
from acpctl.runner import runs
from acpctl.runner.supervisor import STDERR_TAIL_LINES
from acpctl.sandbox import Policy, for_agent, home_in_tmp
from acpctl.store.index import SessionIndex
from acpctl.store.sessions import SessionMeta, SessionStore
from acpctl.terminal import controls
from acpctl.terminal.host import ClientHost
from acpctl.terminal.questions import ask_on_terminal, elicit_on_terminal
from acpctl.terminal.render import RENDERERS, Renderer, answered_by, status
from acpctl.terminal.screen import printable
from acpctl.terminal.transcript import recorded_lines
from acpctl.terminal.typed import typed_lines

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT, EXIT_REFUSAL, EXIT_DENIED = 0, 1, 2, 3, 4, 5
CLIENT_VARIABLE = "ACPCTL_CLIENT"  # who started `run --acp`, for its log
EXIT_CANCELLED = 130
STOP_EXIT = {acp.END_TURN: EXIT_OK, acp.REFUSAL: EXIT_REFUSAL, acp.CANCELLED: EXIT_CANCELLED}
PROMPT = "you> "
PROMPT_BACK_S = 1.0  # how long another client's turn is quiet before the prompt returns


@dataclass
class Options:
    agent: str | None
    prompt: str | None
    cwd: str
    session: str | None
    continue_: bool
    policy: str
    format: str
    timeout: float | None
    piped: str | None  # what came on a non-terminal stdin
    mode: str | None = None
    model: str | None = None
    config: list[tuple[str, str]] = field(default_factory=list)
    mcp_servers: list[JsonObject] = field(default_factory=list)
    name: str | None = None  # for a new (or forked) session
    fork: bool = False  # --session continues in a fork of the session
    history: bool = True  # False: the child `run --acp` records no new session
    through_host: bool = False  # the child goes through the session host, whatever config says


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
    """A child `acpctl run --acp` in a session of its own (Ctrl-C is ours, not its): the agent
    directly, or through the session host as an editor's is (its link)."""

    def __init__(self, host: ClientHost, renderer: Renderer) -> None:
        self.host = host
        self.renderer = renderer
        self.session_id: str | None = None
        self.process: asyncio.subprocess.Process | None = None
        self._in: asyncio.StreamReader | None = None
        self._out: asyncio.StreamWriter | None = None
        self.peer: Peer[int] = Peer(self._write)
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.turn: Turn | None = None  # the turn Ctrl-C applies to
        self.output_closed = False
        self.heard = 0.0  # when the agent last said something in our session
        self.saved_terminal: list[Any] | None = None  # the chat's terminal, as it was
        self.commands: list[JsonObject] = []  # the agent's slash commands, as it published them
        self.closing = False  # close() has begun: the end of reading is ours
        self.host_stopping = False  # the host said it stops: its end is no surprise
        self.prompt_up = False  # the chat waits at its prompt (another client may be prompting)
        self._prompt_back: asyncio.TimerHandle | None = None  # the prompt, hidden, comes back
        # The agent's questions being asked here, by their ids: dropped when another
        # client answers first (the host's $/cancel_request).
        self.questions: dict[Any, asyncio.Task[Any]] = {}

    async def start(
        self,
        agent: str | None,
        history: bool = True,
        through_host: bool = False,
        cwd: str | None = None,
    ) -> None:
        """`run --acp` for `agent`, started in `cwd` (the session's directory: where an
        editor starts it, the first root of a sandboxed agent)."""
        argv = [sys.executable, "-m", "acpctl", "run", "--acp"]
        if agent:
            argv += ["--agent", agent]
        if not history:
            argv.append("--no-history")
        if through_host:
            argv.append("--through-host")
        self.process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=jsonrpc.MAX_LINE_BYTES,
            env={**os.environ, CLIENT_VARIABLE: "acpctl run"},  # named in the run's log
            cwd=cwd if cwd is not None and os.path.isdir(cwd) else None,
        )
        self._in, self._out = self.process.stdout, self.process.stdin
        self._spawn(self._read())
        self._spawn(self._read_stderr())

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _write(self, line: bytes) -> None:
        assert self._out is not None
        if not self._out.is_closing():
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
            text = line.decode("utf-8", "replace").rstrip()
            self.stderr_tail.append(text)
            if debug or text.startswith(f"acpctl: {NOTE}"):  # a note is for the person
                self.renderer.notice(text)

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
            self.renderer.notice(f"acpctl: {acp.stopping_notice(params)}")
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
                self.renderer.notice("acpctl: answered elsewhere")
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
            self.renderer.notice(printable(text))

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

    def _link_state(self, params: JsonObject) -> None:
        """A remote agent's link dropped (said on the status line while it lasts) or is
        back (said once)."""
        status = self.renderer.status
        if params.get("state") == "down":
            since = params.get("since")
            at = (
                time.strftime("%H:%M:%S", time.localtime(since))
                if isinstance(since, (int, float))
                else "now"
            )
            if status is not None:
                status.fact("link", f"link down since {at}, reconnecting")
            else:
                self.renderer.notice(f"acpctl: the link dropped at {at}; reconnecting")
        elif params.get("state") == "up":
            if status is not None:
                status.fact("link", None)
            after = params.get("after")
            took = f" after {after:g} s" if isinstance(after, (int, float)) else ""
            self.renderer.notice(f"acpctl: the link is back{took} ({params.get('how')})")

    def ended(self) -> str:
        """Why the child `run --acp` ended: the host it linked to stopped, as it said, or
        what the child said last."""
        if self.host_stopping:
            return HOST_STOPPED
        return f"acpctl run --acp exited ({'; '.join(self.stderr_tail) or 'no output'})"

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
        self.closing = True
        await self.host.close()
        if self.process is None:
            return
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except asyncio.TimeoutError:
            self.process.terminate()
            await self.process.wait()
        for task in list(self.tasks):
            task.cancel()


def _prompt_blocks(text: str, piped: str | None) -> list[JsonObject]:
    blocks: list[JsonObject] = [{"type": "text", "text": text}] if text else []
    if piped:
        blocks.append({"type": "text", "text": piped})
    return blocks


async def _open_session(conn: RelayConnection, options: Options, agent_name: str) -> str:
    """The session the prompt goes to, with the run controls applied: a stored one
    continued (or forked), else a new one."""
    store = SessionStore()
    target: str | None = None
    if options.session:
        try:
            target = SessionIndex(store).resolve(options.session)
        except LookupError as exc:
            raise RpcError(acp.RESOURCE_NOT_FOUND, str(exc)) from exc
    elif options.continue_:
        newest = [m for m in SessionIndex(store).readable(cwd=options.cwd) if m.agent == agent_name]
        if newest:
            target = newest[0].id
        else:
            print(
                f"acpctl: no {agent_name} session for {options.cwd} yet; starting one",
                file=sys.stderr,
            )
    servers = options.mcp_servers
    if target is None:
        result = await conn.request(acp.SESSION_NEW, {"cwd": options.cwd, "mcpServers": servers})
    else:
        cwd = store.read_meta(target).cwd or options.cwd
        method = acp.SESSION_FORK if options.fork else acp.SESSION_RESUME
        params = {"sessionId": target, "cwd": cwd, "mcpServers": servers}
        result = await conn.request(method, params)
    session_id = str(result.get("sessionId") or target)
    if options.name and (target is None or options.fork):
        store.rename(session_id, options.name)
    try:
        await controls.apply(
            conn.request, session_id, result, options.mode, options.model, options.config
        )
    except UsageError:
        if target is None or options.fork:  # leave no empty session behind
            with contextlib.suppress(RpcError):
                await conn.request(acp.SESSION_CLOSE, {"sessionId": session_id})
            store.delete(session_id)
        raise
    return session_id


class Turn:
    """One prompt, with Ctrl-C (cancel, then leave), --timeout, and a word on stderr when
    the agent goes silent."""

    def __init__(
        self,
        conn: RelayConnection,
        agent_name: str,
        silence_s: float,
        agent_env: Mapping[str, str],
    ) -> None:
        self.conn = conn
        self.agent_name = agent_name
        self.silence_s = silence_s
        self.agent_env = agent_env  # where the agent keeps its own records
        self.cancelled = False
        self.timed_out = False
        self.abandon = asyncio.Event()

    def interrupt(self, why: str = "cancelling (Ctrl-C again to leave)") -> None:
        if self.cancelled:
            self.abandon.set()  # a second Ctrl-C: leave without waiting
            return
        self.cancelled = True
        assert self.conn.session_id is not None
        self.conn.notify(acp.SESSION_CANCEL, {"sessionId": self.conn.session_id})
        self._say(f"\nacpctl: {why}")

    def _say(self, text: str) -> None:
        self.conn.renderer.notice(text)

    async def run(self, blocks: list[JsonObject], timeout: float | None) -> str | None:
        self.conn.turn = self
        renderer = self.conn.renderer
        renderer.new_turn()
        request = asyncio.ensure_future(
            self.conn.request(
                acp.SESSION_PROMPT, {"sessionId": self.conn.session_id, "prompt": blocks}
            )
        )
        abandon = asyncio.ensure_future(self.abandon.wait())
        watchdog = asyncio.ensure_future(self._silence_notices())
        try:
            done, _ = await asyncio.wait(
                {request, abandon}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                self.timed_out = True
                self.interrupt(f"timed out after {timeout:g} s (--timeout); cancelling the turn")
                done, _ = await asyncio.wait(
                    {request, abandon}, timeout=5, return_when=asyncio.FIRST_COMPLETED
                )
            if request not in done:
                return None
            result = request.result()
            return str(result.get("stopReason")) if isinstance(result, dict) else None
        finally:
            request.cancel()  # abandoned: its answer, or its failure as we leave, is nobody's
            abandon.cancel()
            watchdog.cancel()
            renderer.end_turn()
            self.conn.turn = None

    async def _silence_notices(self) -> None:
        """Each silence_s without a word from the agent: say so, and how to get out."""
        if self.silence_s <= 0:
            return
        conn = self.conn
        conn.heard = noticed = time.monotonic()
        while True:
            since = max(conn.heard, noticed)
            await asyncio.sleep(max(since + self.silence_s - time.monotonic(), 0.0))
            quiet = time.monotonic() - conn.heard
            if quiet >= self.silence_s and not self.cancelled:
                noticed = time.monotonic()
                said = transcripts.last_api_error(self.agent_env, conn.session_id or "")
                own_log = f"; its own log says: {said}" if said else ""
                self._say(
                    f"acpctl: {self.agent_name} has said nothing for {quiet:.0f} s{own_log}; "
                    f"still waiting (Ctrl-C cancels); its log: {conn.log_path()}"
                )


async def _initialize(conn: RelayConnection, host: ClientHost) -> None:
    await conn.request(
        acp.INITIALIZE,
        {
            "protocolVersion": acp.PROTOCOL_VERSION,
            "clientCapabilities": host.capabilities(),
            "clientInfo": {"name": "acpctl", "title": "acpctl terminal", "version": __version__},
        },
    )


async def run_terminal(
    options: Options,
    agent_name: str,
    silence_s: float,
    agent_env: Mapping[str, str],
    sandbox: Policy | None = None,
) -> int:
    interactive = options.prompt is None and options.piped is None and sys.stdin.isatty()
    renderer = RENDERERS[options.format]()
    policy = options.policy
    if policy == "ask" and not sys.stdin.isatty():
        policy = "approve-reads"
    elicit = elicit_on_terminal if sys.stdin.isatty() else None
    host = ClientHost([options.cwd], policy, ask_on_terminal, sandbox, elicit)
    conn = RelayConnection(host, renderer)
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:
        if conn.turn is not None:
            conn.turn.interrupt()
        else:  # at the chat prompt: leave, ending the relay cleanly first
            conn._spawn(_leave(conn))

    await conn.start(agent_name, options.history, options.through_host, options.cwd)
    try:
        with status(f"starting {agent_name}..."):  # claude-agent-acp takes 5-10 s here
            await _initialize(conn, host)
            conn.session_id = renderer.session_id = await _open_session(conn, options, agent_name)
        loop.add_signal_handler(signal.SIGINT, on_sigint)
        if not interactive:
            turn = Turn(conn, agent_name, silence_s, agent_env)
            stop = await turn.run(
                _prompt_blocks(options.prompt or "", options.piped), options.timeout
            )
            if conn.output_closed:
                return EXIT_OK
            try:
                renderer.finish(stop)
            except BrokenPipeError:
                conn.close_output()
                return EXIT_OK
            return _exit_code(turn, stop, host)
        new_turn = functools.partial(Turn, conn, agent_name, silence_s, agent_env)
        return await _chat(conn, renderer, options, new_turn, f"acpctl: session {conn.session_id}")
    except RpcError as exc:
        print(f"acpctl: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if exc.code == acp.RESOURCE_NOT_FOUND else EXIT_ERROR
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await conn.close()


async def _leave(conn: RelayConnection) -> None:
    """Ctrl-C at the chat prompt: the relay ended cleanly, the terminal as it was found
    (readline holds it in the reading thread, which os._exit does not wait for), exit 130."""
    print(file=sys.stderr)
    await conn.close()
    _restore_terminal(conn.saved_terminal)
    os._exit(EXIT_CANCELLED)


def _terminal_state() -> list[Any] | None:
    """The terminal's settings on stdin, to put back on the way out; None off a terminal."""
    try:
        import termios

        return termios.tcgetattr(sys.stdin.fileno())
    except Exception:  # no termios, no terminal (termios.error), a closed stdin
        return None


def _restore_terminal(state: list[Any] | None) -> None:
    if state is None:
        return
    import termios

    with contextlib.suppress(Exception):
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, state)


def _exit_code(turn: Turn, stop: str | None, host: ClientHost) -> int:
    if turn.timed_out:
        return EXIT_TIMEOUT
    if stop is None:
        return EXIT_CANCELLED if turn.cancelled else EXIT_ERROR
    if stop == acp.END_TURN and host.denied:
        print(f"acpctl: {host.denied_note()}", file=sys.stderr)
        return EXIT_DENIED
    return STOP_EXIT.get(stop, EXIT_ERROR)


async def _chat(
    conn: RelayConnection,
    renderer: Renderer,
    options: Options,
    new_turn: Callable[[], Turn],
    banner: str,
) -> int:
    """A read-prompt loop with line editing and a history file; Ctrl-D or Ctrl-C leaves.
    `banner` says where the chat is, before its first prompt."""

    with contextlib.suppress(ImportError):
        import readline

        history = paths.ensure_private_dir(paths.state_dir()) / "chat_history"
        with contextlib.suppress(OSError):
            readline.read_history_file(history)
    print(f"{banner}; Ctrl-C cancels a turn, Ctrl-D leaves, /help", file=sys.stderr)
    code = EXIT_OK
    conn.saved_terminal = _terminal_state()
    try:
        while True:
            conn.prompt_up = True
            try:
                line = await typed_lines.chat_line(PROMPT)
            except (EOFError, KeyboardInterrupt):
                print(file=sys.stderr)
                break
            finally:
                conn.prompt_answered()
            if not line.strip():
                continue
            if line.strip() in CHAT_COMMANDS:
                if not _chat_command(conn, line.strip()):
                    break
                continue
            turn = new_turn()
            stop = await turn.run(_prompt_blocks(line, None), options.timeout)
            renderer.finish(stop)
            if turn.abandon.is_set():
                code = EXIT_CANCELLED
                break
    finally:
        _restore_terminal(conn.saved_terminal)
    with contextlib.suppress(Exception):
        readline.write_history_file(history)
    return code


CHAT_COMMANDS = ("/help", "/commands", "/quit")
CHAT_HELP = """\
  /help      this list
  /commands  the agent's own slash commands (sent to it as you type them)
  /quit      leave (as Ctrl-D does)
Anything else, /-commands included, goes to the agent. Ctrl-C cancels a turn."""


def _chat_command(conn: RelayConnection, command: str) -> bool:
    """One of acpctl's own chat commands; False: leave."""
    if command == "/quit":
        return False
    if command == "/help":
        print(CHAT_HELP, file=sys.stderr)
    elif not conn.commands:
        print("acpctl: the agent has published no commands", file=sys.stderr)
    else:
        for item in conn.commands:
            print(f"  /{item.get('name')}  {item.get('description') or ''}", file=sys.stderr)
    return True


def main(options: Options) -> int:
    cfg = config.load()
    if options.session and not options.agent:  # the stored session's own agent
        options.agent = _stored(options.session).agent
    agent = discovery.resolve(cfg, options.agent)
    spec = agent.as_spec()  # not installed: a clear error before anything starts
    agent_env = {**os.environ, **spec.env}
    try:
        # The agent's terminals run in its sandbox, as the agent does.
        confined = for_agent(
            cfg.sandbox_for(agent.name),
            agent.state_dirs,
            options.cwd,
            agent.sandbox_env,
            spec.env.get("HOME"),
        )
        if confined is not None and (in_tmp := home_in_tmp()) is not None:
            sys.stderr.write(f"acpctl: warning: {in_tmp}\n")
        return asyncio.run(
            run_terminal(options, agent.name, cfg.silence_warning_s, agent_env, confined)
        )
    except KeyboardInterrupt:
        return EXIT_CANCELLED


def _stored(text: str) -> SessionMeta:
    store = SessionStore()
    try:
        return store.read_meta(SessionIndex(store).resolve(text))
    except LookupError as exc:
        raise UsageError(str(exc)) from exc


def fork(text: str, name: str | None) -> str:
    """`acpctl sessions fork`: a fork of a stored session through its agent's relay (the
    agent's own fork, else acpctl's), named `name`; its id."""
    parent = _stored(text)
    discovery.resolve(config.load(), parent.agent).as_spec()  # not installed: say so now

    async def forked() -> str:
        host = ClientHost([parent.cwd], "deny-all", ask_on_terminal)
        conn = RelayConnection(host, RENDERERS["quiet"]())
        await conn.start(parent.agent, cwd=parent.cwd)
        try:
            with status(f"starting {parent.agent}..."):
                await _initialize(conn, host)
                params = {"sessionId": parent.id, "cwd": parent.cwd, "mcpServers": []}
                result = await conn.request(acp.SESSION_FORK, params)
            return str(result["sessionId"])
        finally:
            await conn.close()

    session_id = asyncio.run(forked())
    if name:
        SessionStore().rename(session_id, name)
    return session_id


def attach(meta: SessionMeta, observe: bool, format: str) -> int:
    """`acpctl sessions attach`: this terminal joined to a session the session host holds,
    as a controller (prompts, cancels, answers the agent's permission requests) or an
    observer: its history, then everything that happens in it, whoever asks."""
    cfg = config.load()
    if not observe and not sys.stdin.isatty():
        print(
            "acpctl: no terminal to prompt from or answer on: attaching as an observer",
            file=sys.stderr,
        )
        observe = True
    return asyncio.run(_attached(meta, observe, format, cfg.silence_warning_s))


async def _attached(meta: SessionMeta, observe: bool, format: str, silence_s: float) -> int:
    renderer = RENDERERS[format]()
    host = ClientHost([meta.cwd], "ask", ask_on_terminal, elicit=elicit_on_terminal)
    conn = RelayConnection(host, renderer)
    conn.session_id = meta.id  # the replay that answers the attach is ours to show
    # Through the host as an editor's `run --acp` goes (one started when none runs, which
    # takes the session up from the store): the link says when the host goes and comes back.
    await conn.start(meta.agent, through_host=True, cwd=meta.cwd)
    try:
        await _initialize(conn, host)
        role = acp.OBSERVER if observe else acp.CONTROLLER
        result = await conn.request(
            acp.SESSION_ATTACH,
            {
                "sessionId": meta.id,
                "role": role,
                "historyPolicy": "full",
                "clientInfo": {"name": "acpctl sessions attach", "version": __version__},
            },
        )
        others = ", ".join(
            f"{c.get('name')} ({c.get('role')})" for c in result.get("connectedClients") or []
        )
        banner = f"\nacpctl: attached to {meta.id} as {result.get('role')}" + (
            f"; also here: {others}" if others else ""
        )
        if observe:
            return await _until_gone(conn, f"{banner}; Ctrl-C leaves")
        conn._spawn(_left_when_the_host_goes(conn, list(conn.tasks)))
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(
            signal.SIGINT, lambda: conn.turn.interrupt() if conn.turn else conn._spawn(_leave(conn))
        )
        env = dict(os.environ)
        options = Options(
            agent=meta.agent,
            prompt=None,
            cwd=meta.cwd,
            session=meta.id,
            continue_=False,
            policy="ask",
            format=format,
            timeout=None,
            piped=None,
        )
        new_turn = functools.partial(Turn, conn, meta.agent, silence_s, env)
        return await _chat(conn, renderer, options, new_turn, banner)
    except RpcError as exc:
        print(f"acpctl: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if exc.code == acp.RESOURCE_NOT_FOUND else EXIT_ERROR
    finally:
        await conn.close()


async def _until_gone(conn: RelayConnection, banner: str) -> int:
    """Watch until Ctrl-C (which the banner says once it is so: 0), or until the host goes
    (said: 1)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    print(banner, file=sys.stderr)
    reading = list(conn.tasks)
    waiting = asyncio.ensure_future(stop.wait())
    await asyncio.wait({waiting, *reading}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    loop.remove_signal_handler(signal.SIGINT)
    if stop.is_set():
        return EXIT_OK
    print(f"\nacpctl: {conn.ended()}", file=sys.stderr)
    return EXIT_ERROR


async def _left_when_the_host_goes(conn: RelayConnection, reading: list[asyncio.Task[Any]]) -> None:
    """A controller at its prompt waits in a thread that nothing can wake: when the host
    goes, say so, and leave as Ctrl-C leaves (the terminal as it was), with status 1."""
    await asyncio.wait(reading)
    if conn.closing or conn.turn is not None:  # we left; or the turn's failure says it
        return
    print(f"\nacpctl: {conn.ended()}", file=sys.stderr)
    _restore_terminal(conn.saved_terminal)
    os._exit(EXIT_ERROR)
