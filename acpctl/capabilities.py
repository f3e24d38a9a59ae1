"""What an agent said it can do, read from its initialize answer in one way for every
reader: the relay's handshake (runner/handshake.py), the link to a remote agent, doctor."""

from __future__ import annotations

from typing import Any

from acpctl import protocol as acp


class AgentCapabilities:
    def __init__(self, initialize_result: Any = None) -> None:
        result = initialize_result if isinstance(initialize_result, dict) else {}
        capabilities = result.get("agentCapabilities")
        self.raw: dict[str, Any] = dict(capabilities) if isinstance(capabilities, dict) else {}

    def can(self, capability: str) -> bool:
        """`load` (loadSession), or a session capability (resume, list, fork, close,
        delete, attach...): offered as an object, as ACP says."""
        if capability == "load":
            return self.raw.get("loadSession") is True
        session = self.raw.get("sessionCapabilities")
        return isinstance(session, dict) and isinstance(session.get(capability), dict)

    def offered(self) -> list[str]:
        """Every session capability offered: load first, then the rest by name."""
        session = self.raw.get("sessionCapabilities")
        named = (
            sorted(k for k, v in session.items() if isinstance(v, dict))
            if isinstance(session, dict)
            else []
        )
        return (["load"] if self.can("load") else []) + named

    def queues_prompts(self) -> bool:
        """Whether the agent takes a prompt while one runs (claude-agent-acp says so in
        `_meta.claudeCode.promptQueueing`); acpctl queues them itself for the others."""
        meta = self.raw.get("_meta")
        vendor = meta.get("claudeCode") if isinstance(meta, dict) else None
        return isinstance(vendor, dict) and vendor.get("promptQueueing") is True


def advertises_resumable(result: dict[str, Any]) -> bool:
    """Whether an initialize answer advertises resumable delivery: in `_meta` (a v1 answer
    of acpctl's host), or in `capabilities.transport` (a v2 answer, and hosts before 0.5:
    read for one release, so that an older host still resumes)."""
    for holder, key in (
        (result.get("_meta"), acp.TRANSPORT_META),
        (result.get("capabilities"), "transport"),
    ):
        transport = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(transport, dict) and "resumable" in transport:
            return True
    return False
