"""The handshake of one connection: `initialize` on both hops (the version, the
capabilities acpctl adds), a successful `authenticate`, and what the agent said it can do.

The connection owns one Handshake; the backend replays it to every restarted agent, and a
restarted agent that refuses it is not used. The agent's capabilities are read here, in
the one way capabilities.py reads them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.capabilities import AgentCapabilities
from acpctl.jsonrpc import JsonObject, RpcError

# What acpctl serves from its store whatever the agent supports.
SESSION_CAPABILITIES_SERVED = ("list", "resume", "close", "delete", "fork")

Call = Callable[[str, Any], Awaitable[JsonObject]]


def negotiated_version(offered: Any) -> Any:
    """The protocol version to speak: the lower of what the peer offers and what acpctl's
    own handlers implement (a non-integer is passed on for the peer to refuse)."""
    if isinstance(offered, int) and not isinstance(offered, bool):
        return min(offered, acp.PROTOCOL_VERSION)
    return offered


def served_capabilities(agent: Any, shared: bool = False) -> JsonObject:
    """The agent's capabilities plus load, list, resume, close, delete and fork, which
    acpctl serves from its store; and, on the session host (`shared`), attach."""
    capabilities = dict(agent) if isinstance(agent, dict) else {}
    capabilities["loadSession"] = True
    session_caps = capabilities.get("sessionCapabilities")
    session_caps = dict(session_caps) if isinstance(session_caps, dict) else {}
    for name in SESSION_CAPABILITIES_SERVED:
        if not isinstance(session_caps.get(name), dict):
            session_caps[name] = {}
    if shared:
        session_caps["attach"] = {"roles": [acp.CONTROLLER, acp.OBSERVER]}
    capabilities["sessionCapabilities"] = session_caps
    return capabilities


def as_v1_initialize(params: JsonObject) -> JsonObject:
    """An editor's initialize in v1's fields. A v2 editor (the draft in the TypeScript SDK
    2.x) names them `info` and `capabilities`; acpctl asks the agent for v1, so they are
    converted as the SDK's AgentProtocolRouter converts them when it downgrades: what v1
    cannot say (v2's filesystem and terminal capabilities) is off, elicitation kept."""
    offered = params.get("protocolVersion")
    if not isinstance(offered, int) or offered <= acp.PROTOCOL_VERSION:
        return params
    capabilities = params.get("capabilities")
    capabilities = capabilities if isinstance(capabilities, dict) else {}
    auth = capabilities.get("auth")
    auth = auth if isinstance(auth, dict) else {}
    v1_auth: JsonObject = {"terminal": auth.get("terminal") is not None}
    if auth.get("_meta") is not None:
        v1_auth["_meta"] = auth["_meta"]
    v1_capabilities: JsonObject = {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
        "session": {"configOptions": {"boolean": {}}},
        "plan": {},
        "auth": v1_auth,
    }
    for key in ("elicitation", "_meta"):
        if capabilities.get(key) is not None:
            v1_capabilities[key] = capabilities[key]
    converted: JsonObject = {"protocolVersion": offered, "clientCapabilities": v1_capabilities}
    info = params.get("info")
    if isinstance(info, dict) and isinstance(info.get("name"), str):
        converted["clientInfo"] = info
    if params.get("_meta") is not None:
        converted["_meta"] = params["_meta"]
    return converted


def unsupported_version(error: JsonObject, asked: Any, offered: Any) -> JsonObject:
    """The agent's -32022 (unsupported protocol version) said plainly: an agent that
    speaks only v2 refuses acpctl's 1, which the editor never asked for."""
    data = error.get("data")
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list) or not supported:
        return error
    versions = ", ".join(str(version) for version in supported)
    message = (
        f"the agent speaks only ACP {versions} and refused {asked}: acpctl speaks ACP "
        f"v{acp.PROTOCOL_VERSION}, so it asks every agent for {asked}"
    )
    if isinstance(offered, int) and offered != asked:
        message += f" (the editor offered {offered})"
    return {**error, "message": message}


class Handshake:
    def __init__(self) -> None:
        # As the editor sent them (the version capped): replayed after a restart.
        self.initialize_params: JsonObject | None = None
        self.offered: Any = None  # the version the editor offered
        self.authenticate_params: JsonObject | None = None
        self.capabilities = AgentCapabilities()  # the agent's own, before acpctl adds its own
        # The first client's answer, as it got it: the session host's later clients get it.
        self.answer: JsonObject | None = None

    @property
    def started(self) -> bool:
        """Whether the editor has sent initialize."""
        return self.initialize_params is not None

    def to_agent(self, params: JsonObject) -> JsonObject:
        """The editor's initialize params (v1's, as_v1_initialize) as the agent gets them
        (kept for replays)."""
        self.offered = params.get("protocolVersion")
        self.initialize_params = {
            **params,
            "protocolVersion": negotiated_version(params.get("protocolVersion")),
        }
        return self.initialize_params

    def to_editor(self, response: JsonObject, shared: bool = False) -> JsonObject:
        """The agent's initialize answer as the editor gets it; its capabilities kept. An
        agent that answers a newer version than it was asked for speaks another protocol:
        the handshake fails, rather than its traffic being relayed as v1's."""
        asked = (self.initialize_params or {}).get("protocolVersion")
        error = response.get("error")
        if isinstance(error, dict) and error.get("code") == acp.UNSUPPORTED_PROTOCOL_VERSION:
            return {**response, "error": unsupported_version(error, asked, self.offered)}
        result = response.get("result")
        if not isinstance(result, dict):
            return response
        answered = result.get("protocolVersion")
        if isinstance(answered, int) and isinstance(asked, int) and answered > asked:
            return jsonrpc.error(
                response.get("id"),
                acp.INTERNAL_ERROR,
                f"acpctl speaks ACP v{asked}; the agent answered {answered}",
                {"agentProtocolVersion": answered},
            )
        self._absorb(result)
        self.answer = {
            **response,
            "result": {
                **result,
                "protocolVersion": negotiated_version(result.get("protocolVersion")),
                "agentCapabilities": served_capabilities(result.get("agentCapabilities"), shared),
            },
        }
        return self.answer

    def logged_in(self, params: JsonObject | None) -> None:
        """A successful authenticate (params) or logout (None): what a restart replays."""
        self.authenticate_params = params

    async def replay(self, call: Call) -> None:
        """Initialize (and authenticate) a restarted agent as the editor first did. Raises
        RpcError when the agent refuses either: it must not be used then."""
        assert self.initialize_params is not None
        result = jsonrpc.unwrap(await call(acp.INITIALIZE, self.initialize_params))
        if not isinstance(result, dict):
            raise RpcError(acp.INTERNAL_ERROR, "initialize answered without a result object")
        self._absorb(result)
        if self.authenticate_params is not None:
            jsonrpc.unwrap(await call(acp.AUTHENTICATE, self.authenticate_params))

    def _absorb(self, result: JsonObject) -> None:
        self.capabilities = AgentCapabilities(result)

    def agent_can(self, capability: str) -> bool:
        """Whether the agent's own capabilities offer `capability` (capabilities.py)."""
        return self.capabilities.can(capability)

    def queues_prompts(self) -> bool:
        return self.capabilities.queues_prompts()
