"""A waiting question answered by a client that was not asked it on a connection: a push
notification's choice (host/push_routes.py), or another host's page through its link
(`_acpctl/answer`, host/control.py). The answer comes as from a client of its own, asked
like the others, that leaves no connection behind (what it would be told goes nowhere):
the agent gets it, the clients asked are told who answered, and the history records it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.channel import memory_pair
from acpctl.runner.clients import Client
from acpctl.runner.idmap import ReverseRequest

if TYPE_CHECKING:
    from acpctl.host.agents import AgentPool, HostedAgent

MAX_NAME = 80  # a device's or a host's name as another host says it


def waiting_question(
    pool: AgentPool, question: Any
) -> tuple[HostedAgent, int, ReverseRequest] | None:
    """The question `question` names (notify.question_id), while it waits for a person."""
    agent, _, number = str(question).rpartition("/")
    if not number.isdigit():
        return None
    for hosted in pool.agents.values():
        request = hosted.conn.ids.pending(int(number)) if hosted.name == agent else None
        if request is not None and request.session is not None and request.method in acp.QUESTIONS:
            return hosted, int(number), request
    return None


def option_of(message: JsonObject, option_id: Any) -> JsonObject | None:
    """The permission request's option `option_id`."""
    params = message.get("params")
    options = params.get("options") if isinstance(params, dict) else None
    for option in options if isinstance(options, list) else []:
        if isinstance(option, dict) and option.get("optionId") == option_id:
            return option
    return None


def detached_client(device: str | None, via: str, name: str, through: str | None = None) -> Client:
    """A client that answers without a connection (a notification's choice, another host's
    page): named as who answered, and how; what it would be told goes nowhere."""
    channel, _ = memory_pair()
    channel.close()
    client = Client(channel, device=device, via=via, through=through)
    client.info = {"name": name}
    return client


def answer_with(
    hosted: HostedAgent, editor_id: int, request: ReverseRequest, option: JsonObject, client: Client
) -> None:
    """`option` chosen by `client` (made by the caller: who answered, and how)."""
    request.asked.append(client)
    choice = {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
    hosted.server.questions.answered(client, jsonrpc.result(editor_id, choice))


def answered_here(pool: AgentPool, caller: Client | None, params: JsonObject) -> JsonObject:
    """HOST_ANSWER for a question of this host's (another host's page through its link; on
    the unix socket, `caller` is None: its permissions are the check)."""
    if caller is not None and not caller.may_control:
        raise RpcError(acp.NOT_AUTHORISED, "not authorised: an observer does not answer")
    found = waiting_question(pool, params.get("question"))
    if found is None:
        raise RpcError(
            acp.RESOURCE_NOT_FOUND, "this question was already answered, or no longer waits"
        )
    hosted, editor_id, request = found
    option = option_of(request.message, params.get("optionId"))
    if request.method != acp.REQUEST_PERMISSION or option is None:
        raise RpcError(acp.INVALID_PARAMS, "answer a permission with one of its options")
    by, through = (_name(params.get(key)) for key in ("by", "through"))
    device = by if params.get("device") is True else None
    via = "notification" if params.get("via") == "notification" else "link"
    name = (by if device is None else None) or "a client"
    answer_with(hosted, editor_id, request, option, detached_client(device, via, name, through))
    return {"answered": option["optionId"]}


def _name(value: Any) -> str | None:
    """A name another host says (a device's, its own): one printable line, bounded."""
    if not isinstance(value, str) or not value.strip():
        return None
    return "".join(c for c in value if c.isprintable())[:MAX_NAME] or None
