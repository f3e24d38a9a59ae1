"""Being told something waits (config.toml's [serve] on_waiting). When an agent's question
for a person (a permission, an elicitation) has waited unanswered for on_waiting_after_s,
the session host runs the configured command. It runs without a shell, with a JSON summary
on its stdin, and is ended after on_waiting_timeout_s. Any notifier then reaches the
phone: `ntfy publish`, Gotify's CLI, a mail command, `notify-send`.

The summary says which session, which agent, what is asked (the tool call's title, the
question's message), and the page's address for the session, where it is answered. What
is asked is the agent's text: a notifier shows it, and must not run it. The command's
output goes to the host's log, a line of it at most."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any
from urllib.parse import urlencode

from acpctl import protocol as acp
from acpctl.config import ServeSettings
from acpctl.jsonrpc import JsonObject
from acpctl.runner.context import Connection

MAX_SAID = 300  # characters of what the agent asks, in the summary
MAX_RUNNING = 4  # notifiers at once: past it, a question's notice is dropped, and logged


class Notifier:
    def __init__(self, settings: ServeSettings, log: logging.Logger) -> None:
        self.settings = settings
        self.log = log
        self.running: set[asyncio.Task[None]] = set()
        # The host's page, where the question is answered: [serve] page_url, else the TCP
        # listener's address once it listens; None without a listener.
        self.page_url: str | None = settings.page_url

    def watch(self, conn: Connection, agent: str) -> None:
        """The agent's questions are watched, when a command is configured."""
        if self.settings.on_waiting:
            conn.on_question = lambda editor_id: self._asked(conn, agent, editor_id)

    def _asked(self, conn: Connection, agent: str, editor_id: int) -> None:
        asked_at = time.time()
        asyncio.get_running_loop().call_later(
            self.settings.on_waiting_after_s, self._due, conn, agent, editor_id, asked_at
        )

    def _due(self, conn: Connection, agent: str, editor_id: int, asked_at: float) -> None:
        request = conn.ids.pending(editor_id)
        if request is None or request.session is None:
            return  # answered (or withdrawn) meanwhile
        if len(self.running) >= MAX_RUNNING:
            self.log.warning("on_waiting: %d notifiers still run; this one is dropped", MAX_RUNNING)
            return
        summary = waiting_summary(agent, request.session, request.message, asked_at)
        if self.page_url is not None:
            summary["url"] = session_address(self.page_url, agent, request.session.id)
        task = asyncio.ensure_future(self._run(summary))
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
            process.kill()
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


def session_address(page_url: str, agent: str, session_id: str) -> str:
    """The page opened at the session, where its question is shown and answered. Its name
    is in the fragment, which browsers send to no server and no proxy log."""
    return f"{page_url}/#{urlencode({'agent': agent, 'session': session_id})}"


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
