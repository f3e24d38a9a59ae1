"""What a notification's service worker asks of the host over HTTP (host/web/sw.js), with
the device's two secrets like any request of the page (the cookie, and the key in its
header): the question a push named, when the push carried no agent text (POST
/push/question); and a one-time answer chosen on the notification (POST /push/answer).

An answer is idempotent: a question already settled (answered elsewhere, or by the same
tap sent twice) is told so with 409 and nothing changes. Only the one-time options the
notification carried can be chosen there; the history records the device, "from a
notification". A linked host's question (host/linked_hosts.py) is pushed and answered the
same way, the answer forwarded to that host."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from aiohttp import web

from acpctl import protocol as acp
from acpctl.host.agents import AgentPool
from acpctl.host.answers import answer_with, detached_client, option_of
from acpctl.host.door import Door, refuse
from acpctl.host.notify import ONE_TIME, Notifier, linked_push_payload, push_payload
from acpctl.host.registry import Caller
from acpctl.jsonrpc import JsonObject, RpcError

QUESTION_PATH = "/push/question"
ANSWER_PATH = "/push/answer"
MAX_BODY = 4096


def add_routes(
    app: web.Application, door: Door, pool: AgentPool, notifier: Notifier, log: logging.Logger
) -> None:
    async def question(request: web.Request) -> web.StreamResponse:
        caller = door.refusal(request)
        if isinstance(caller, web.Response):
            return caller
        sent = await _body(request, door)
        found = notifier.question(sent.get("question"))
        linked = notifier.linked_question(sent.get("question"))
        if caller.device is None or (found is None and linked is None):
            return refuse(404, "nothing waits by that id any more")
        if linked is not None:
            said = linked_push_payload(sent["question"], *linked)
        else:
            assert found is not None
            said = push_payload(sent["question"], *found)
        return _private(web.json_response(said))

    async def answer(request: web.Request) -> web.StreamResponse:
        caller = door.refusal(request)
        if isinstance(caller, web.Response):
            return caller
        sent = await _body(request, door)
        refused = _answer(pool, notifier, caller, sent)
        if refused is not None:
            log.info("a notification's answer refused: %s", refused.text)
            return refused
        log.info("session host: %s answered from a notification", caller.device)
        return _private(web.json_response({"answered": sent["optionId"]}))

    app.router.add_post(QUESTION_PATH, question)
    app.router.add_post(ANSWER_PATH, answer)


def _answer(
    pool: AgentPool, notifier: Notifier, caller: Caller, sent: dict[str, Any]
) -> web.Response | None:
    """The device's answer given to the agent, or why not."""
    if caller.device is None or caller.role != acp.CONTROLLER:
        return refuse(403, "only a paired controller device answers from a notification")
    linked = notifier.linked_question(sent.get("question"))
    if linked is not None:
        return _answer_linked(pool, caller, sent, *linked)
    found = notifier.question(sent.get("question"))
    if found is None:
        return refuse(409, "this question was already answered, or no longer waits")
    pushed, waiting = found
    chosen = option_of(waiting.message, sent.get("optionId"))
    if chosen is None or chosen.get("kind") not in ONE_TIME:
        return refuse(400, "a notification answers with a one-time allow or reject only")
    hosted = next((h for h in pool.agents.values() if h.conn is pushed.conn), None)
    if hosted is None:
        return refuse(409, "the agent that asked has stopped")
    client = detached_client(caller.device, "notification", "acpctl notification")
    answer_with(hosted, pushed.editor_id, waiting, chosen, client)
    return None


def _answer_linked(
    pool: AgentPool, caller: Caller, sent: dict[str, Any], host: str, entry: JsonObject
) -> web.Response | None:
    """A linked host's question answered from a notification: forwarded there, as the
    page's answer is (host/linked_hosts.py)."""
    choices = [c for c in entry.get("choices") or [] if isinstance(c, dict)]
    chosen = next((c for c in choices if c.get("optionId") == sent.get("optionId")), None)
    if chosen is None or chosen.get("kind") not in ONE_TIME:
        return refuse(400, "a notification answers with a one-time allow or reject only")
    if pool.linked is None:
        return refuse(409, "the host that asked is no longer linked")
    client = detached_client(caller.device, "notification", "acpctl notification")
    answer = {"host": host, "question": entry.get("question"), "optionId": chosen["optionId"]}
    try:
        pool.linked.forward(answer, client)
    except RpcError as exc:
        return refuse(409, exc.message)
    return None


async def _body(request: web.Request, door: Door) -> dict[str, Any]:
    try:
        data = await asyncio.wait_for(request.content.read(MAX_BODY), door.body_timeout_s)
        sent = json.loads(data)
    except (asyncio.TimeoutError, ValueError, RecursionError):
        return {}
    return sent if isinstance(sent, dict) else {}


def _private(response: web.Response) -> web.Response:
    response.headers["Cache-Control"] = "no-store"
    return response
