"""The corpus of real failures: one JSON fixture per recorded case (record.py says how
they are made), read by tests/test_corpus.py and docs/troubleshooting.md's generator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acpctl.agents.signatures import run_evidence

CORPUS = Path(__file__).resolve().parent
FIXTURES = sorted(CORPUS.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def evidence(fixture: dict[str, Any]) -> list[str]:
    """What doctor reads of a run (its incidents and its log), then what acpctl printed
    on the terminal (the only trace when the agent never started)."""
    return [
        *run_evidence(fixture["incidents"], fixture["agent_stderr"]),
        *fixture["acpctl_stderr"][::-1],
    ]
