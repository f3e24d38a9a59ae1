"""What a doctor check found: ok, a warning or a problem, with its fix and evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Finding:
    check: str
    status: str  # ok, warning, problem
    message: str
    fix: str = ""
    evidence: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status,
            "message": self.message,
            "fix": self.fix or None,
            "evidence": self.evidence,
        }


def ok(check: str, message: str) -> Finding:
    return Finding(check, "ok", message)
