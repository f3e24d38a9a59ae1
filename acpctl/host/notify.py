"""Being told something waits. When an agent's question for a person (a permission, an
elicitation) has waited unanswered for on_waiting_after_s, the session host pushes it to
each paired device that subscribed (Web Push: host/push.py), and runs config.toml's
[serve] on_waiting command. The command runs without a shell, with a JSON summary on its
stdin, and is ended after on_waiting_timeout_s: any notifier then reaches the phone, `ntfy
publish`, Gotify's CLI, a mail command, `notify-send`.

A pushed question gets an id (random, kept while it waits): the notification's service
worker fetches the question by it, and answers it by it (host/push_routes.py).

The summary says which session, which agent, what is asked (the tool call's title, the
question's message), and the page's address for the session, where it is answered. What
is asked is the agent's text: a notifier shows it, and must not run it. The command's
output goes to the host's log, a line of it at most."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlencode

from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject
from acpctl.processes import signal_child
from acpctl.runner.context import Connection
from acpctl.runner.idmap import ReverseRequest
from acpctl.serve_config import ServeSettings

if TYPE_CHECKING:
    from acpctl.host.push import Pusher

MAX_SAID = 300  # characters of what the agent asks, in the summary
# A linked host's question's summary: the keys of its entry (waiting_summary's there).
SUMMARY_KEYS = ("sessionId", "title", "cwd", "agent", "kind", "asked", "waitingSince", "options")
MAX_RUNNING = 4  # notifiers at once: past it, a question's notice is dropped, and logged
# The options a notification may carry as its buttons: one-time answers only; a standing
# permission ("always") is chosen on the page, where it is shown for what it is.
ONE_TIME = ("allow_once", "reject_once")


class Pushed(NamedTuple):
    """A question pushed to the devices, by its id: where it waits."""

    conn: Connection
    agent: str
    editor_id: int
    asked_at: float

    def request(self) -> ReverseRequest | None:
        """The question, while it waits; None once settled."""
        return self.conn.ids.pending(self.editor_id)


class LinkedPushed(NamedTuple):
    """A linked host's question pushed to the devices (host/linked_hosts.py): which host,
    and its id there."""

    host: str
    question: str


class Notifier:
    def __init__(
        self, settings: ServeSettings, log: logging.Logger, pusher: Pusher | None = None
    ) -> None:
        self.settings = settings
        self.log = log
        self.pusher = pusher
        self.running: set[asyncio.Task[Any]] = set()
        self.pushed: dict[str, Pushed] = {}
        self.linked_pushed: dict[str, LinkedPushed] = {}
        # A linked host's question as it waits now (host, its id there), else None: the
        # linked hosts' watch says (host/main.py sets it when a host is linked).
        self.still_waiting: Callable[[str, str], JsonObject | None] = lambda host, q: None
        # The host's page, where the question is answered: [serve] page_url, else the TCP
        # listener's address once it listens; None without a listener.
        self.page_url: str | None = settings.page_url

    def watch(self, conn: Connection, agent: str) -> None:
        """The agent's questions are watched, when a command is configured or a device may
        subscribe to pushes."""
        if self.settings.on_waiting or self.pusher is not None:
            conn.on_question = lambda editor_id: self._asked(conn, agent, editor_id)

    def question(self, question_id: Any) -> tuple[Pushed, ReverseRequest] | None:
        """A pushed question by its id, while it waits."""
        pushed = self.pushed.get(question_id) if isinstance(question_id, str) else None
        request = pushed.request() if pushed is not None else None
        if pushed is None or request is None or request.session is None:
            return None
        return pushed, request

    def linked_question(self, question_id: Any) -> tuple[str, JsonObject] | None:
        """A pushed question of a linked host's by its id, while it waits: the host, and
        its entry there (HOST_WAITING's, with its `question` and `choices`)."""
        pushed = self.linked_pushed.get(question_id) if isinstance(question_id, str) else None
        entry = self.still_waiting(*pushed) if pushed is not None else None
        return (pushed.host, entry) if pushed is not None and entry is not None else None

    def linked_asked(self, host: str, entry: JsonObject) -> None:
        """A linked host's question, new: told as this host's are, once it has waited."""
        if self.settings.on_waiting or self.pusher is not None:
            asyncio.get_running_loop().call_later(
                self.settings.on_waiting_after_s,
                self._linked_due,
                host,
                str(entry.get("question")),
            )

    def _linked_due(self, host: str, question: str) -> None:
        entry = self.still_waiting(host, question)
        if entry is None:
            return  # answered (or gone) meanwhile
        summary = {key: entry.get(key) for key in SUMMARY_KEYS if key in entry}
        summary["host"] = host
        if self.page_url is not None:
            summary["url"] = f"{self.page_url}/"  # its card is on the page's overview
        said = None
        if self.pusher is not None and self.pusher.subscribed():
            self.linked_pushed = {
                k: p for k, p in self.linked_pushed.items() if self.still_waiting(*p) is not None
            }
            question_id = secrets.token_urlsafe(16)
            self.linked_pushed[question_id] = LinkedPushed(host, question)
            said = linked_push_payload(question_id, host, entry)
        self._tell(summary, said)

    def _asked(self, conn: Connection, agent: str, editor_id: int) -> None:
        asked_at = time.time()
        asyncio.get_running_loop().call_later(
            self.settings.on_waiting_after_s, self._due, conn, agent, editor_id, asked_at
        )

    def _due(self, conn: Connection, agent: str, editor_id: int, asked_at: float) -> None:
        request = conn.ids.pending(editor_id)
        if request is None or request.session is None:
            return  # answered (or withdrawn) meanwhile
        summary = waiting_summary(agent, request.session, request.message, asked_at)
        if self.page_url is not None:
            summary["url"] = session_address(self.page_url, agent, request.session.id)
        said = None
        if self.pusher is not None and self.pusher.subscribed():
            self.pushed = {k: p for k, p in self.pushed.items() if p.request() is not None}
            question_id = secrets.token_urlsafe(16)
            self.pushed[question_id] = pushed = Pushed(conn, agent, editor_id, asked_at)
            said = push_payload(question_id, pushed, request)
        self._tell(summary, said)

    def _tell(self, summary: JsonObject, said: JsonObject | None) -> None:
        """The push `said` to the subscribed devices (None: none), and the on_waiting
        command run with `summary`."""
        if said is not None and self.pusher is not None:
            if not self.settings.push_agent_text:  # the worker fetches the rest
                said = {key: said[key] for key in ("question", "agent", "tag")}
            self._spawn(self.pusher.send(said))
        if not self.settings.on_waiting:
            return
        if len(self.running) >= MAX_RUNNING:
            self.log.warning("on_waiting: %d notifiers still run; this one is dropped", MAX_RUNNING)
            return
        self._spawn(self._run(summary))

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def _run(self, summary: JsonObject) -> None:
        argv = list(self.settings.on_waiting)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            self.log.warning("on_waiting: %s could not start: %s", argv[0], exc)
            return
        try:
            said, _ = await asyncio.wait_for(
                process.communicate(json.dumps(summary).encode() + b"\n"),
                self.settings.on_waiting_timeout_s,
            )
        except asyncio.TimeoutError:
            signal_child(process, signal.SIGKILL)
            await process.wait()
            self.log.warning(
                "on_waiting: %s ran longer than %g s and was ended",
                argv[0],
                self.settings.on_waiting_timeout_s,
            )
            return
        first = said.decode("utf-8", "replace").strip().splitlines()[:1]
        self.log.info(
            "on_waiting: %s exited %s for session %s%s",
            argv[0],
            process.returncode,
            summary["sessionId"],
            f": {first[0][:200]!r}" if first else "",
        )


def push_payload(question_id: str, pushed: Pushed, request: ReverseRequest) -> JsonObject:
    """What a push carries (encrypted to the device), and what the worker fetches when it
    carried less: the notification's title, body, the session's address on the page, and
    the one-time answers as its actions."""
    record = request.session
    summary = waiting_summary(pushed.agent, record, request.message, pushed.asked_at)
    project = str(summary["cwd"] or "").rstrip("/").rsplit("/", 1)[-1]
    params = request.message.get("params")
    options = params.get("options") if isinstance(params, dict) else None
    return {
        "question": question_id,
        "agent": pushed.agent,
        "tag": f"{summary['sessionId']}",
        "title": f"{pushed.agent} asks" + (f" in {project}" if project else ""),
        "body": summary["asked"],
        "url": session_address("", pushed.agent, str(summary["sessionId"])),
        "waitingSince": pushed.asked_at,
        "actions": one_time_actions(options),
    }


def linked_push_payload(question_id: str, host: str, entry: JsonObject) -> JsonObject:
    """push_payload for a linked host's question, from its entry there: its one-time
    answers as actions, the page's overview (where its card is) as its address."""
    agent = str(entry.get("agent") or "an agent")
    project = str(entry.get("cwd") or "").rstrip("/").rsplit("/", 1)[-1]
    return {
        "question": question_id,
        "agent": agent,
        "tag": f"{host}:{entry.get('sessionId')}",
        "title": f"{agent} asks on {host}" + (f" in {project}" if project else ""),
        "body": str(entry.get("asked") or "")[:MAX_SAID],
        "url": "/",
        "waitingSince": entry.get("waitingSince"),
        "actions": one_time_actions(entry.get("choices")),
    }


def one_time_actions(options: Any) -> list[JsonObject]:
    """A notification's buttons: a permission's first one-time allow, then its first
    one-time reject (a standing one is chosen on the page)."""
    listed = options if isinstance(options, list) else []
    actions = []
    for kind in ONE_TIME:
        chosen = next(
            (
                option
                for option in listed
                if isinstance(option, dict)
                and option.get("kind") == kind
                and isinstance(option.get("optionId"), str)
            ),
            None,
        )
        if chosen is not None:
            name = str(chosen.get("name") or chosen["optionId"])[:MAX_SAID]
            actions.append({"action": chosen["optionId"], "title": name})
    return actions


def session_address(page_url: str, agent: str, session_id: str) -> str:
    """The page opened at the session, where its question is shown and answered. Its name
    is in the fragment, which browsers send to no server and no proxy log."""
    return f"{page_url}/#{urlencode({'agent': agent, 'session': session_id})}"


def question_id(agent: str, editor_id: int) -> str:
    """A waiting question's id in HOST_WAITING: its agent and its id at the host
    (host/answers.py finds it by it)."""
    return f"{agent}/{editor_id}"


def waiting_summary(agent: str, record: Any, message: JsonObject, asked_at: float) -> JsonObject:
    """What a notifier gets on its stdin: the session, the agent, what is asked."""
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    method = message.get("method")
    if method == acp.REQUEST_PERMISSION:
        tool = params.get("toolCall")
        tool = tool if isinstance(tool, dict) else {}
        kind, asked = "permission", tool.get("title") or tool.get("kind") or "a tool call"
        options = [o.get("name") for o in params.get("options") or [] if isinstance(o, dict)]
    else:
        kind, asked = "question", params.get("message") or "a question"
        options = []
    summary: JsonObject = {
        "sessionId": record.id,
        "title": record.meta.title,
        "cwd": record.meta.cwd,
        "agent": agent,
        "kind": kind,
        "asked": str(asked)[:MAX_SAID],
        "waitingSince": asked_at,
    }
    if options:
        summary["options"] = [str(option)[:MAX_SAID] for option in options]
    return summary
