"""Issue 3 and 4 end to end with a third-party ACP client: `acpctl install acpx` writes the
entry, and acpx (npm, pinned) then runs turns through `acpctl run --acp` in separate
processes, landing in acpctl's history."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.npm_agents import npm_bin

pytestmark = [pytest.mark.e2e, pytest.mark.npm]


def test_acpx_runs_agents_through_acpctl(home: Path, tmp_path: Path) -> None:
    acpx = npm_bin("acpx")
    installed = run_cli("install", "acpx")
    assert installed.returncode == 0, installed.stderr
    entry = json.loads((home / ".acpx" / "config.json").read_text())["agents"]["acpctl-demo"]
    assert entry["argv"][-4:] == ["run", "--acp", "--agent", "demo"]
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ)

    def acpx_run(*args: str) -> subprocess.CompletedProcess[str]:
        # --ttl 60: acpx's background queue owner stays between the turns (with a short
        # one, a turn could reach it while it shuts down: QUEUE_OWNER_CLOSED under load);
        # `sessions close` at the end ends it.
        return subprocess.run(
            [str(acpx), "--ttl", "60", *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    created = acpx_run("acpctl-demo", "sessions", "new")
    assert created.returncode == 0, created.stderr + created.stdout
    first = acpx_run("--approve-all", "acpctl-demo", "think and edit hello")
    assert first.returncode == 0, first.stderr + first.stdout
    output = first.stdout + first.stderr
    assert "You said: think and edit hello" in output and "end_turn" in output
    second = acpx_run("--format", "quiet", "acpctl-demo", "once more")
    assert second.returncode == 0 and "You said: once more" in second.stdout
    sessions = json.loads(run_cli("sessions", "list", "--json").stdout)
    assert len(sessions) == 1 and sessions[0]["turns"] == 2
    assert sessions[0]["cwd"] == str(work)
    acpx_run("acpctl-demo", "sessions", "close")
