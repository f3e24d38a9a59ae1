"""Issue 20 (items 2 and 3): a silent agent is reported while its prompt runs, in the run
log and on the terminal; failed requests are kept per run, and doctor and logs report
them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from acpctl.runner import incidents
from tests.conftest import TEST_AGENTS, run_cli, write_executable

pytestmark = pytest.mark.e2e


def add_fake(home: Path, tmp_path: Path, name: str, mode: str, extra: str = "") -> None:
    script = write_executable(
        tmp_path / f"{name}.sh",
        f"#!/bin/sh\n{extra}FAKE_AGENT_MODE={mode} exec {sys.executable} "
        f"{TEST_AGENTS / 'fake_agent.py'}\n",
    )
    assert run_cli("agents", "add", name, "--", str(script)).returncode == 0


def incident_records(home: Path, agent: str) -> list[dict[str, object]]:
    files = sorted((home / "state" / "logs").glob(f"{agent}-*{incidents.SUFFIX}"))
    return [r for path in files for r in incidents.read(path)]


def test_a_silent_prompt_is_reported_while_it_runs(home: Path, tmp_path: Path) -> None:
    config = home / "config" / "config.toml"
    add_fake(home, tmp_path, "quiet", "silent", "FAKE_SILENCE_S=2.5 ")
    config.write_text("silence_warning_s = 1\n" + config.read_text())  # top level
    result = run_cli("run", "--agent", "quiet", "hello", timeout=60)
    assert result.returncode == 0, result.stderr
    # the terminal: a word each second of silence, with the way out and the log
    notices = [line for line in result.stderr.splitlines() if "has said nothing" in line]
    assert notices and "quiet has said nothing for 1 s" in notices[0]
    assert "Ctrl-C cancels" in notices[0] and ".log" in notices[0]
    # the run log (an editor's log shows these lines too)
    log = sorted((home / "state" / "logs").glob("quiet-*.log"))[-1].read_text()
    assert "the agent has said nothing for 1 s" in log
    kinds = [r["kind"] for r in incident_records(home, "quiet")]
    assert "silence" in kinds and kinds[-1] == "silent_turn_end"
    assert incident_records(home, "quiet")[-1]["stopReason"] == "end_turn"
    report = json.loads(run_cli("doctor", "--json", "--agent", "quiet").stdout)
    silent = [f for f in report if "went silent" in str(f["message"])]
    assert silent and "ended: end_turn" in str(silent[0]["message"])


def test_a_quiet_watchdog_says_nothing(home: Path, tmp_path: Path) -> None:
    config = home / "config" / "config.toml"
    add_fake(home, tmp_path, "quiet", "silent", "FAKE_SILENCE_S=2.5 ")
    config.write_text("silence_warning_s = 0\n" + config.read_text())
    result = run_cli("run", "--agent", "quiet", "hello", timeout=60)
    assert result.returncode == 0 and "has said nothing" not in result.stderr
    assert [r["kind"] for r in incident_records(home, "quiet")] == ["worked"]  # no silence


def test_failed_prompts_are_kept_and_reported_with_their_signature(
    home: Path, tmp_path: Path
) -> None:
    add_fake(home, tmp_path, "broken", "fail")
    for _ in range(2):
        result = run_cli("run", "--agent", "broken", "hello", timeout=60)
        assert result.returncode == 1 and "404" in result.stderr
    failed = [r for r in incident_records(home, "broken") if r["kind"] == "error"]
    assert [(r["method"], r["code"]) for r in failed] == [("session/prompt", -32603)] * 2
    assert "claude-nope not found" in str(failed[0]["message"])
    report = json.loads(run_cli("doctor", "--json", "--agent", "broken").stdout)
    found = [f for f in report if "2 prompt(s) to broken failed" in str(f["message"])]
    assert found and len(found[0]["evidence"]) == 2
    assert "session/prompt failed (-32603)" in found[0]["evidence"][0]
    logs = run_cli("logs", "--agent", "broken")
    assert "session/prompt failed (-32603)" in logs.stdout
    assert "failed requests and silences" in logs.stderr


def test_a_bad_silence_setting_is_one_clear_line(home: Path) -> None:
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('silence_warning_s = "soon"\n')
    result = run_cli("agents", "list", "--no-probe")
    assert result.returncode == 2 and "silence_warning_s must be a number" in result.stderr


def test_a_silent_agent_is_explained_by_its_own_log(home: Path, tmp_path: Path) -> None:
    """Claude Code retries a refused key for minutes without a word, but logs each attempt
    in its transcript: the watchdog's line, the terminal and doctor say what it logged."""
    config = home / "config" / "config.toml"
    add_fake(home, tmp_path, "retrying", "retrying", "FAKE_SILENCE_S=2.5 ")
    config.write_text("silence_warning_s = 1\n" + config.read_text())
    result = run_cli("run", "--agent", "retrying", "hello", timeout=60)
    assert result.returncode == 0, result.stderr
    said = "its own log says: 401 invalid x-api-key (attempt 4 of 10"
    assert said in result.stderr
    log = sorted((home / "state" / "logs").glob("retrying-*.log"))[-1].read_text()
    assert said in log
    silences = [r for r in incident_records(home, "retrying") if r["kind"] == "silence"]
    assert str(silences[0]["agent_said"]).startswith("401 invalid x-api-key")
    report = json.loads(run_cli("doctor", "--json", "--agent", "retrying").stdout)
    found = [f for f in report if "went silent" in str(f["message"])]
    assert "rejected the agent's API key" in str(found[0]["message"])
    assert "ANTHROPIC_API_KEY" in str(found[0]["fix"])
