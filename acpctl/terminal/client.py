"""`acpctl run` on a terminal: a prompt, or a chat, in a session of a child `acpctl run
--acp` (terminal/relay_connection.py), so every turn goes through the same runner
(supervision, history store) as an editor's, and the sessions are shared. Attaching to a
stored session, and forking one, is terminal/attach.py's.

Exit codes: 0 end_turn, 1 error (and max_tokens, max_turn_requests), 2 usage, 3 timeout,
4 refusal, 5 a permission was denied, 130 cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from acpctl import config, paths
from acpctl import protocol as acp
from acpctl.agents import discovery, transcripts
from acpctl.errors import UsageError
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.sandbox import Policy, for_agent, home_in_tmp
from acpctl.store.index import SessionIndex
from acpctl.store.sessions import SessionMeta, SessionStore
from acpctl.terminal import controls
from acpctl.terminal.host import ClientHost
from acpctl.terminal.questions import ask_on_terminal, elicit_on_terminal
from acpctl.terminal.relay_connection import (
    PROMPT,
    RelayConnection,
    initialize,
)
from acpctl.terminal.render import RENDERERS, Renderer, status
from acpctl.terminal.typed import typed_lines

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TIMEOUT, EXIT_REFUSAL, EXIT_DENIED = 0, 1, 2, 3, 4, 5
EXIT_CANCELLED = 130
STOP_EXIT = {acp.END_TURN: EXIT_OK, acp.REFUSAL: EXIT_REFUSAL, acp.CANCELLED: EXIT_CANCELLED}


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
        self.failed: RpcError | None = None  # the prompt's error answer, said on its own line
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
        self.conn.new_turn()
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
            try:
                result = request.result()
            except RpcError as exc:  # the turn failed, not the chat: said, not raised
                self.failed = exc
                self._say(f"acpctl: error: {exc.message}")
                return None
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
            if conn.questions:  # the agent waits for the person, not the other way round
                noticed = time.monotonic()
                continue
            quiet = time.monotonic() - conn.heard
            if quiet >= self.silence_s and not self.cancelled:
                noticed = time.monotonic()
                said = transcripts.last_api_error(self.agent_env, conn.session_id or "")
                own_log = f"; its own log says: {said}" if said else ""
                self._say(
                    f"acpctl: {self.agent_name} has said nothing for {quiet:.0f} s{own_log}; "
                    f"still waiting (Ctrl-C cancels); its log: {conn.log_path()}"
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
            conn._spawn(leave(conn))

    await conn.start(agent_name, options.history, options.through_host, options.cwd)
    try:
        with status(f"starting {agent_name}..."):  # claude-agent-acp takes 5-10 s here
            await initialize(conn, host)
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
        return await chat(conn, renderer, options, new_turn, f"acpctl: session {conn.session_id}")
    except RpcError as exc:
        print(f"acpctl: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if exc.code == acp.RESOURCE_NOT_FOUND else EXIT_ERROR
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await conn.close()


async def leave(conn: RelayConnection) -> None:
    """Ctrl-C at the chat prompt: the relay ended cleanly, the terminal as it was found
    (readline holds it in the reading thread, which os._exit does not wait for), exit 130."""
    print(file=sys.stderr)
    await conn.close()
    restore_terminal(conn.saved_terminal)
    os._exit(EXIT_CANCELLED)


def terminal_state() -> list[Any] | None:
    """The terminal's settings on stdin, to put back on the way out; None off a terminal."""
    try:
        import termios

        return termios.tcgetattr(sys.stdin.fileno())
    except Exception:  # no termios, no terminal (termios.error), a closed stdin
        return None


def restore_terminal(state: list[Any] | None) -> None:
    if state is None:
        return
    import termios

    with contextlib.suppress(Exception):
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, state)


def _exit_code(turn: Turn, stop: str | None, host: ClientHost) -> int:
    if turn.failed is not None:
        return EXIT_USAGE if turn.failed.code == acp.RESOURCE_NOT_FOUND else EXIT_ERROR
    if turn.timed_out:
        return EXIT_TIMEOUT
    if stop is None:
        return EXIT_CANCELLED if turn.cancelled else EXIT_ERROR
    if stop == acp.END_TURN and host.denied:
        print(f"acpctl: {host.denied_note()}", file=sys.stderr)
        return EXIT_DENIED
    return STOP_EXIT.get(stop, EXIT_ERROR)


async def chat(
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
    conn.saved_terminal = terminal_state()
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
        restore_terminal(conn.saved_terminal)
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
        options.agent = stored(options.session).agent
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


def stored(text: str) -> SessionMeta:
    store = SessionStore()
    try:
        return store.read_meta(SessionIndex(store).resolve(text))
    except LookupError as exc:
        raise UsageError(str(exc)) from exc
