"""The clients of one agent connection. `run --acp` has one, the editor on stdio; the session
host (`acpctl serve`) has as many as connect, each attached to the sessions it opened or
joined, as a controller (prompts, cancels, answers permissions) or an observer (sees only).

Every request id a client sends lives in that client's own namespace: `key` makes it
unique on the connection."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.jsonrpc import JsonObject, RpcError
from acpctl.jsonrpc.channel import Channel

_numbers = itertools.count(1)

# A client's request id, unique on the connection: (client number, the id's key).
RequestKey = tuple[int, tuple[bool, Any]]


def declared_elicitation(capabilities: Any) -> frozenset[str]:
    """The elicitation modes an initialize's clientCapabilities declares: each of `form`
    and `url` given as an object (null or absent: not declared)."""
    declared = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(declared, dict):
        return frozenset()
    return frozenset(mode for mode in ("form", "url") if isinstance(declared.get(mode), dict))


@dataclass(eq=False)  # compared, and hashed, by identity
class Client:
    channel: Channel
    # What the client's credentials allow: an observer's token never acts.
    may_control: bool = True
    number: int = field(default_factory=lambda: next(_numbers))
    info: JsonObject = field(default_factory=dict)  # its initialize's clientInfo
    # It sent session/attach, so it knows the proposal's own update kinds
    # (permission_resolved, client_disconnected); an ACP v1 client would refuse them.
    knows_attach: bool = False
    # Its initialize was answered with an error: every other request is refused (the
    # session list of acpctl's store included), until an initialize succeeds.
    handshake_failed: bool = False
    # acpctl's link (remote/link.py), which asked in its `_acpctl/connect`: its load and
    # attach answers say how many stored updates the replay covered (REPLAYED_META).
    link: bool = False
    # It asked for the person's recorded answers in replays (acp.RECORDED_META).
    wants_recorded: bool = False
    # The attach proposal's clientId: the client's own name for itself (its session/attach,
    # or its initialize's clientInfo), echoed wherever the client is named.
    client_id: str | None = None
    # The paired device it came in as (acpctl host pair): named wherever the client is.
    device: str | None = None
    # The elicitation modes its initialize declared (clientCapabilities.elicitation): an
    # agent's question of another mode is never sent to it.
    elicitation_modes: frozenset[str] = frozenset()
    # It asked to be told when the questions waiting for a person change (the page).
    wants_changes: bool = False
    # How it came, when not as a connection: "notification" (a push's answer,
    # host/push_routes.py), named wherever the client is.
    via: str | None = None
    # The linked host it answered through (`_acpctl/answer` from another host's page).
    through: str | None = None
    # Another host's connection, watching this one's questions and sessions (its own
    # only: acp.LINKED_META).
    linked: bool = False

    def can_answer(self, method: str, params: Any) -> bool:
        """Whether this client declared what answering the agent's request needs: any may
        answer a permission; an elicitation needs its mode (form when none is said)."""
        if method != acp.ELICITATION_CREATE:
            return True
        mode = params.get("mode", "form") if isinstance(params, dict) else "form"
        return mode in self.elicitation_modes

    def key(self, msg_id: Any) -> RequestKey:
        return (self.number, jsonrpc.id_key(msg_id))

    def label(self, role: str | None = None) -> JsonObject:
        """How the other clients are told of this one (resolvedBy, connectedClients)."""
        label: JsonObject = {
            "name": str(self.info.get("name") or f"client {self.number}"),
        }
        if isinstance(self.info.get("version"), str):
            label["version"] = self.info["version"]
        if self.client_id is not None:
            label["clientId"] = self.client_id
        if self.device is not None:
            label["device"] = self.device
        if self.via is not None:
            label["via"] = self.via
        if self.through is not None:
            label["through"] = self.through
        if role is not None:
            label["role"] = role
        return label


def tell(clients: list[Client], message: JsonObject) -> None:
    """One message to several clients, encoded once."""
    if clients:
        line = jsonrpc.encode(message)
        for client in clients:
            client.channel.write(line)


def cancel_request(editor_id: Any) -> JsonObject:
    """What tells a client that a request it was asked needs no answer any more."""
    return jsonrpc.notification(acp.CANCEL_REQUEST, {"requestId": editor_id})


MAX_CLIENT_ID = 256  # characters


def checked_client_id(value: Any) -> str:
    """A clientId as a client may choose it: a non-empty string of printable characters,
    not too long to echo to every other client."""
    if (
        not isinstance(value, str)
        or not value
        or len(value) > MAX_CLIENT_ID
        or not value.isprintable()
    ):
        raise RpcError(
            acp.INVALID_PARAMS,
            f"clientId must be a string of 1 to {MAX_CLIENT_ID} printable characters",
        )
    return value


def attach_role(client: Client, asked: Any) -> str:
    """The role a client gets in a session: what it asked for (controller by default), never
    more than its credentials allow."""
    if not client.may_control or asked == acp.OBSERVER:
        return acp.OBSERVER
    return acp.CONTROLLER
