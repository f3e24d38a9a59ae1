"""Issue 20: the corpus of real failures (tests/corpus, recorded by
`python -m tests.corpus.record` from the real npm agents against failing stand-ins of the
model API and broken environments) replayed through doctor's matcher. Each fixture must be
diagnosed as the failure it was recorded for, and each signature must name exactly the
agents its fixtures came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acpctl.agents.signatures import SIGNATURES, diagnose, match
from tests.corpus import CORPUS, FIXTURES, evidence, load


def test_the_corpus_covers_the_failure_classes() -> None:
    failures = {load(path)["failure"] for path in FIXTURES}
    for wanted in ("http-401", "http-403", "http-404", "http-429", "http-529", "http-500"):
        assert wanted in failures
    for wanted in ("refused", "stalled", "node-too-old", "npx-offline", "not-executable"):
        assert wanted in failures
    agents = {load(path)["agent"] for path in FIXTURES}
    assert {"claude-agent-acp 0.23.1", "claude-agent-acp 0.101.0", "pi 0.73.1"} <= agents


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_every_recorded_failure_is_diagnosed(path: Path) -> None:
    fixture = load(path)
    found = diagnose(evidence(fixture))
    assert found is not None, f"{path.name}: no signature matches what the agent said"
    signature, line = found
    assert signature.id == fixture["expected"], f"{path.name}: matched {line!r}"


@pytest.mark.parametrize("signature", SIGNATURES, ids=lambda s: s.id)
def test_each_signature_names_the_agents_it_was_seen_with(signature: Any) -> None:
    seen = {load(p)["agent"] for p in FIXTURES if load(p)["expected"] == signature.id}
    assert set(signature.seen_with) == seen
    # the few no agent here produces carry examples from public reports instead
    assert seen or signature.examples
    for example in signature.examples:
        assert match(example) is signature, example
    assert signature.diagnosis and signature.fix


def test_an_ordinary_turn_matches_no_signature() -> None:
    """The log of a healthy claude-agent-acp turn (its [session/create] phases) and
    acpctl's own lines are no failure."""
    healthy = load(CORPUS / "banner.json")["agent_stderr"]
    lines = [line for line in healthy if "not JSON-RPC" not in line]
    assert lines and diagnose(lines) is None, diagnose(lines)
