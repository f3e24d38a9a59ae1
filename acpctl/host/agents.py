"""The agents the session host runs: one relay connection per agent name (its backend,
supervised as `run --acp` supervises it; its sessions; its clients), started when the first
client asks for the agent and stopped when it has had no client and no running turn for
the idle time. Its sessions stay in the store, loadable by the next start.

An agent stopped that way, if a client used it within the spare time, is replaced by a
spare: a fresh process of it, started and initialized as the last client initialized it,
holding no session, so that the next editor's first thread does not wait for the agent's
start-up. No session is opened ahead: session/new is the agent's own cost. A backend that
starts a process per session (pi) starts one ahead for the cwd of the agent's newest
session (Backend.warm_up)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.devices import Devices
from acpctl.host.notify import Notifier, question_id, waiting_summary
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.processes import is_stopped, tree_rss
from acpctl.runner.clients import Client, tell
from acpctl.runner.connection import wire
from acpctl.runner.context import Connection, HostAnswer
from acpctl.runner.idmap import ReverseRequest
from acpctl.runner.main import Resolved, resolve
from acpctl.runner.runlog import open_log
from acpctl.runner.server import AcpServer
from acpctl.sandbox import Policy, home_in_tmp
from acpctl.store.sessions import SessionMeta, SessionStore

if TYPE_CHECKING:
    from acpctl.host.linked_hosts import LinkedHosts

DEFAULT_IDLE_S = 600.0
DEFAULT_SPARE_S = 3600.0


class AgentChanged(AcpctlError):
    """config.toml now resolves the agent to another command than the one running, and
    that one still has clients or a turn: the new one is not started beside it."""


@dataclass(eq=False)
class HostedAgent:
    name: str
    command: tuple[Any, ...]  # what it was resolved to: kind, argv, env
    server: AcpServer
    log: logging.Logger
    # A sandboxed agent runs a process per set of roots (its sandbox is fixed at its
    # start): the directory its first client came from, its first root.
    start_dir: str | None = None
    idle_since: float = field(default_factory=time.monotonic)
    last_used: float = field(default_factory=time.monotonic)  # when a client last left
    spare_until: float = 0.0  # a spare no client has used is kept until then
    started: float = field(default_factory=time.time)
    stopped_since: float | None = None  # when its process was first seen stopped (SIGSTOP)

    @property
    def conn(self) -> Connection:
        return self.server.conn

    @property
    def key(self) -> str:
        return _key(self.name, self.conn.sandbox)

    def status(self) -> JsonObject:
        """What `acpctl host status` shows of it."""
        pid = self.conn.backend.pid
        sandbox = self.conn.sandbox
        return {
            "agent": self.name,
            "sandbox": [str(root) for root in sandbox.roots] if sandbox else None,
            "spare": self.spare_until > 0,
            "started": self.started,
            "agentPid": pid,
            "rss": tree_rss(pid),
            "notRespondingSince": self.not_responding_since(),
            "clients": len(self.conn.clients),
            "sessions": [
                {
                    "sessionId": record.id,
                    "clients": [client.label(role) for client, role in record.clients.items()],
                    "running": any(r is record for r in self.server.turns.running.values()),
                }
                for record in self.conn.sessions
            ],
        }

    def not_responding_since(self) -> float | None:
        """Since when (epoch seconds) the agent has not responded, or None: its process is
        stopped (SIGSTOP: first seen then), or a turn has waited on it with no word for
        config.toml's silence_warning_s (a deadlock)."""
        if is_stopped(self.conn.backend.pid):
            self.stopped_since = self.stopped_since or time.time()
            return self.stopped_since
        self.stopped_since = None
        silence_s = self.conn.silence_s
        heard = [record.heard for record in self.server.turns.running.values()]
        quiet = time.monotonic() - min(heard) if heard and silence_s > 0 else 0.0
        return time.time() - quiet if quiet >= silence_s > 0 else None

    def busy(self) -> bool:
        """A client is connected, or a turn runs (a prompt outlives its client), or it is a
        spare still wanted."""
        return bool(
            self.conn.clients or self.server.turns.running or time.monotonic() < self.spare_until
        )


MAX_RECENT = 500  # sessions read for the agents and projects the history knows
MAX_PROJECTS = 50
MAX_LISTED_RECENT = 20  # sessions the history holds that no agent does, listed after the live
RECENT_FOR_S = 10.0  # how long the history's recent sessions are listed as last read
SESSIONS_TOLD_EVERY_S = 1.0


class AgentPool:
    def __init__(
        self,
        store: SessionStore,
        log: logging.Logger,
        idle_s: float,
        exit_when_idle: bool,
        spare_s: float = 0.0,
        notifier: Notifier | None = None,
        devices: Devices | None = None,
    ) -> None:
        self.store = store
        self.devices = devices  # the paired devices, which a client may ask to see
        self.log = log
        self.notifier = notifier  # [serve] on_waiting, told of each agent's questions
        self.idle_s = idle_s  # 0: never stopped for idleness
        self.spare_s = spare_s  # how long after its last client an agent has a spare
        # Set once no agent has run for idle_s, when the host is to exit then.
        self.exit_when_idle = exit_when_idle
        self.idle = asyncio.Event()
        self.agents: dict[str, HostedAgent] = {}
        self._starting = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None
        self._empty_since = time.monotonic()
        # The host's methods any client may ask (host/control.py's CLIENTS), on every
        # agent's connection.
        self.client_methods: dict[str, HostAnswer] = {}
        # The linked hosts' questions and sessions (host/linked_hosts.py), when any is linked.
        self.linked: LinkedHosts | None = None
        self._changes_due: set[str] = set()  # the changes the clients are yet to be told
        self._sessions_told = 0.0  # when SESSIONS_CHANGED was last told (monotonic)
        # The history's recent sessions as HOST_SESSIONS lists them, when they were read,
        # and how many were asked: read again after RECENT_FOR_S, or for more.
        self._recent: tuple[float, int, list[Any]] | None = None

    async def get(self, name: str | None, client_dir: str | None = None) -> HostedAgent:
        """The running agent `name` (None: the default agent), started when it is not. A
        sandboxed agent: the one whose roots start at `client_dir` (the client's directory,
        said over the unix socket); for a client that says none (WebSocket, HTTP, the page),
        the one whose roots are config.toml's alone, never the host's own directory."""
        async with self._starting:
            resolved = resolve(name, client_dir, remote=client_dir is None)
            spec = resolved.spec
            key = _key(spec.name, resolved.sandbox)
            hosted = self.agents.get(key)
            if hosted is not None and hosted.command != _command(resolved):
                if hosted.busy():
                    raise AgentChanged(
                        f"agent {spec.name} changed in config.toml while it has clients; "
                        "it restarts as changed once they have gone"
                    )
                hosted.log.info("agent %s changed in config.toml: restarting it", spec.name)
                await self._stop(hosted)
                hosted = None
            if hosted is None:
                hosted = self._start(resolved, client_dir)
                self.agents[key] = hosted
            hosted.idle_since = time.monotonic()  # not reaped before its client is served
            return hosted

    def start_reaping(self) -> None:
        if self.idle_s > 0:
            self._reaper = asyncio.ensure_future(self._reap())

    def _start(self, resolved: Resolved, start_dir: str | None) -> HostedAgent:
        """The agent as config.toml and the catalog resolve it now (its process starts at
        its first client's initialize, or a spare's)."""
        spec, argv, limits, _, sandbox, env = resolved
        name, kind = spec.name, spec.kind
        log, log_path = open_log(name, f"acpctl.serve.{name}")
        log.info("session host: agent %s (%s), log %s", name, " ".join(argv), log_path)
        if sandbox is not None:
            log.info("agent %s runs in a sandbox: %s", name, sandbox.describe())
            if (in_tmp := home_in_tmp()) is not None:
                log.warning("%s", in_tmp)
        conn = wire(
            name, kind, argv, env, log, log_path, self.store, limits, shared=True, sandbox=sandbox
        )
        if self.notifier is not None:
            self.notifier.watch(conn, name)
        conn.on_waiting_changed = lambda: self.changed(acp.WAITING_CHANGED)
        conn.on_sessions_changed = lambda: self.changed(acp.SESSIONS_CHANGED)
        conn.host_methods = self.client_methods
        return HostedAgent(name, _command(resolved), AcpServer(conn), log, start_dir)

    def status(self) -> list[JsonObject]:
        return [hosted.status() for hosted in self.agents.values()]

    def waiting(self, own: bool = False) -> JsonObject:
        """HOST_WAITING: every question for a person unanswered, across the agents, the
        oldest first (what a client attaches to a session to answer)."""
        found = [
            {
                **waiting_summary(hosted.name, request.session, request.message, request.asked_at),
                "question": question_id(hosted.name, editor_id),
                **choices(request.message),
            }
            for hosted in self.agents.values()
            for editor_id, request in _questions(hosted.conn)
        ]
        if not own and self.linked is not None:
            found += self.linked.waiting()
        return {"waiting": sorted(found, key=lambda entry: float(entry["waitingSince"]))}

    def projects(self) -> JsonObject:
        """HOST_PROJECTS: the agents to start a session with (config.toml's default
        first, then those it configures, those the host runs and those the history names)
        and the projects the history knows, the most recent first."""
        from acpctl import config
        from acpctl.store.index import SessionIndex

        listed = SessionIndex(self.store).query(limit=MAX_RECENT)
        recent = [session.meta for session in listed if session.problem is None]
        cfg = config.load()
        agents = [
            cfg.default_agent or "demo",
            *cfg.agents,
            *(hosted.name for hosted in self.agents.values()),
            *(meta.agent for meta in recent),
        ]
        projects = [meta.cwd for meta in recent]
        return {
            "agents": list(dict.fromkeys(agents)),
            "projects": list(dict.fromkeys(projects))[:MAX_PROJECTS],
        }

    def sessions(self, own: bool = False) -> JsonObject:
        """HOST_SESSIONS: the sessions the host holds, across the agents: running (a turn
        at the agent), waiting (a question for a person), or idle; then the history's
        most recent others (`live`: false), which joining opens again."""
        from acpctl.store.index import SessionIndex

        listed = []
        for hosted in self.agents.values():
            asking = {id(request.session) for _, request in _questions(hosted.conn)}
            running = {id(record) for record in hosted.server.turns.running.values()}
            silent_since = hosted.not_responding_since()
            for record in hosted.conn.sessions:
                state = "waiting" if id(record) in asking else "idle"
                if state == "idle" and id(record) in running:
                    state = "running"
                entry = _listed(hosted.name, record.meta, state, len(record.clients))
                if silent_since is not None:
                    entry["notRespondingSince"] = silent_since
                listed.append(entry)
        live = {entry["sessionId"] for entry in listed}
        wanted = MAX_LISTED_RECENT + len(live) // 50 * 50 + 50  # the live change, in steps
        now = time.monotonic()
        if (
            self._recent is None
            or now - self._recent[0] > RECENT_FOR_S
            or (self._recent[1] < wanted)
        ):
            # The index is read (and refreshed) at most every RECENT_FOR_S, however many
            # pages ask: an idle page costs nothing that grows with the history.
            self._recent = (now, wanted, SessionIndex(self.store).query(limit=wanted))
        stored = self._recent[2][:wanted]
        recent = [
            _listed(session.meta.agent, session.meta, "idle", 0, live=False)
            for session in stored
            if session.problem is None
            and session.meta.id not in live
            and session.meta.subagent_of is None  # reached through the session that ran it
        ]
        if self.linked is None or own:
            return {"sessions": listed + recent[:MAX_LISTED_RECENT]}
        linked = self.linked.sessions()
        told = listed + linked + recent[:MAX_LISTED_RECENT]
        return {"sessions": told, "linkedHosts": self.linked.names()}

    def running_turns(self) -> int:
        return sum(len(hosted.server.turns.running) for hosted in self.agents.values())

    def changed(self, what: str) -> None:
        """A question was asked or settled somewhere (WAITING_CHANGED: told at the end of
        this turn of the event loop), or a session opened, closed, began or ended a turn
        (SESSIONS_CHANGED: told at most every SESSIONS_TOLD_EVERY_S, so that a stream of
        short turns costs the pages one list a second): the clients that asked are told."""
        if what in self._changes_due:
            return
        self._changes_due.add(what)
        delay = 0.0
        if what == acp.SESSIONS_CHANGED:
            delay = max(0.0, self._sessions_told + SESSIONS_TOLD_EVERY_S - time.monotonic())
        asyncio.get_running_loop().call_later(delay, self._tell_changed, what)

    def _tell_changed(self, what: str) -> None:
        """The change told with what changed (the waiting questions, or the sessions), made
        and encoded once for every client that asked, so that none needs to ask again."""
        self._changes_due.discard(what)
        if what == acp.SESSIONS_CHANGED:
            self._sessions_told = time.monotonic()
        told = [c for h in self.agents.values() for c in h.conn.clients if c.wants_changes]
        for own in (False, True):  # a linked host is told this host's own (not transitive)
            these = [c for c in told if c.linked is own]
            if these:
                now = self.sessions(own) if what == acp.SESSIONS_CHANGED else self.waiting(own)
                tell(these, jsonrpc.notification(what, now))

    def tell_every_client(self, message: JsonObject) -> None:
        for hosted in self.agents.values():
            tell(list(hosted.conn.clients), message)

    async def serve(self, hosted: HostedAgent, client: Client) -> None:
        """Serve `client` on the agent until it goes."""
        hosted.spare_until = 0.0  # used: a spare no more
        try:
            await hosted.server.serve(client)
        finally:
            hosted.idle_since = hosted.last_used = time.monotonic()

    async def _reap(self) -> None:
        """Stop the agents idle for idle_s (checked a few times within it)."""
        while True:
            await asyncio.sleep(max(self.idle_s / 4, 0.05))
            now = time.monotonic()
            for hosted in list(self.agents.values()):
                if hosted.busy():
                    hosted.idle_since = now
                elif now - hosted.idle_since >= self.idle_s:
                    hosted.log.info("no client for %.0f s: stopping the agent", self.idle_s)
                    async with self._starting:
                        if not hosted.busy():
                            await self._stop(hosted)
                            await self._spare(hosted, now)
            if self.agents:
                self._empty_since = now
            elif self.exit_when_idle and now - self._empty_since >= self.idle_s:
                self.log.info("no agent for %.0f s: the host exits", self.idle_s)
                self.idle.set()

    async def _spare(self, stopped: HostedAgent, now: float) -> None:
        """A spare in place of `stopped`, when a client used it within the spare time."""
        params = stopped.conn.handshake.initialize_params
        wanted_until = stopped.last_used + self.spare_s
        if params is None or now >= wanted_until or stopped.spare_until:
            return
        try:
            spare = self._start(
                resolve(stopped.name, stopped.start_dir, remote=stopped.start_dir is None),
                stopped.start_dir,
            )
        except AcpctlError as exc:
            self.log.info("no spare for %s: %s", stopped.name, exc)
            return
        spare.last_used = stopped.last_used
        spare.spare_until = wanted_until
        try:
            answer = await spare.server.handshaking.prepare(params)
        except (RpcError, OSError) as exc:
            answer = {"error": str(exc)}
        if "result" not in answer:
            spare.log.info("the spare of %s did not start: %s", spare.name, answer.get("error"))
            await spare.server.shutdown()
            return
        cwd = self._last_cwd(stopped.name)
        if cwd is not None:
            await spare.conn.backend.warm_up(cwd)
        spare.log.info("a spare of %s is ready (pid %s)", spare.name, spare.conn.backend.pid)
        self.agents[spare.key] = spare

    def _last_cwd(self, agent: str) -> str | None:
        """Where the agent's newest session ran: the project an editor opens again."""
        from acpctl.store.index import SessionIndex  # sqlite3: for the spare only

        newest = SessionIndex(self.store).query(agent=agent, limit=1)
        return newest[0].meta.cwd if newest and newest[0].problem is None else None

    async def _stop(self, hosted: HostedAgent) -> None:
        if self.agents.get(hosted.key) is hosted:
            del self.agents[hosted.key]
        await hosted.server.shutdown()

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for hosted in list(self.agents.values()):
            await self._stop(hosted)


def _command(resolved: Resolved) -> tuple[Any, ...]:
    """What an agent was resolved to run (kind, command line, env): a change in config.toml
    changes it."""
    spec, argv, *_ = resolved
    return (spec.kind, tuple(argv), tuple(sorted(spec.env.items())))


def _listed(
    agent: str, meta: SessionMeta, state: str, clients: int, live: bool = True
) -> JsonObject:
    return {
        "agent": agent,
        "sessionId": meta.id,
        "title": meta.title,
        "cwd": meta.cwd,
        "state": state,
        "live": live,
        "clients": clients,
        "updatedAt": meta.updated,
    }


def _questions(conn: Connection) -> list[tuple[int, ReverseRequest]]:
    """The agent's questions for a person still unanswered in its sessions, by their ids."""
    asking = conn.ids.waiting(
        lambda request: request.session is not None and request.method in acp.QUESTIONS
    )
    return [(i, request) for i in asking if (request := conn.ids.pending(i))]


def choices(message: JsonObject) -> JsonObject:
    """A permission's options, as another host's page answers them (HOST_ANSWER)."""
    params = message.get("params")
    options = params.get("options") if isinstance(params, dict) else None
    if message.get("method") != acp.REQUEST_PERMISSION or not isinstance(options, list):
        return {}
    keys = ("optionId", "name", "kind")
    return {"choices": [{k: o.get(k) for k in keys} for o in options if isinstance(o, dict)]}


def _key(name: str, sandbox: Policy | None) -> str:
    """An agent's place in the pool: its name, and a sandboxed one's roots."""
    return name if sandbox is None else " ".join([name, *map(str, sandbox.roots)])
