"""Issue 20: real npm agents against a model API stand-in that fails on purpose, live: what
the terminal shows while it happens and what doctor diagnoses afterwards (the recorded
corpus in tests/corpus covers every failure class; these two run for real each time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acpctl.agents.signatures import SIGNATURES
from tests.conftest import run_cli
from tests.corpus import record
from tests.model_stub import ModelStub

pytestmark = [pytest.mark.e2e, pytest.mark.npm]


@pytest.mark.parametrize(
    ("key", "failure", "shown"),
    [
        # silent on ACP and stderr while it retries; its own transcript says why
        ("claude-current", "http-401", "its own log says: 401 invalid x-api-key (attempt"),
        # a JSON-RPC error at once
        ("pi", "http-404", "not_found_error"),
    ],
)
def test_a_failing_model_api_is_shown_and_diagnosed(
    home: Path, key: str, failure: str, shown: str
) -> None:
    agent = record.agents()[key]
    expected = {s.id: s for s in SIGNATURES}[record.API_FAILURES[failure][1]]
    with ModelStub() as stub:
        stub.fail_always = record.API_FAILURES[failure][0]
        assert run_cli("agents", "add", key, *agent.setup(home, stub.url)).returncode == 0
        config = home / "config" / "config.toml"
        config.write_text("silence_warning_s = 3\n" + config.read_text())
        result = run_cli("run", "--agent", key, "--timeout", "9", "Say hi", timeout=90)
        assert result.returncode in (1, 3) and shown in result.stderr, result.stderr
        report = json.loads(run_cli("doctor", "--json", "--agent", key, timeout=90).stdout)
    found = [f for f in report if "in recent runs" in str(f["message"])]
    assert found and expected.diagnosis in str(found[0]["message"]), found
    assert found[0]["fix"] == expected.fix
