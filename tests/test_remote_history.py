"""Issue 40, 8: a remote agent's history on the user's machine. What the link relays is
recorded in this machine's store (runner/remote_history.py), so that sessions list, show,
search, usage, run --continue and run --session see remote sessions; a link to a host that
records in this very store records nothing twice."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli, run_cli
from tests.test_host import LISTENING, serving
from tests.test_remote import add_remote

pytestmark = pytest.mark.e2e


@pytest.fixture
def elsewhere(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A host with a store of its own (as on another machine), and the agent `far` on it;
    the remote store's directory."""
    remote_data = home / "remote-data"
    local_data = os.environ["ACPCTL_DATA_DIR"]
    monkeypatch.setenv("ACPCTL_DATA_DIR", str(remote_data))
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0")
    with serving(monkeypatch, *args, until=LISTENING) as (_, found, _):
        monkeypatch.setenv("ACPCTL_DATA_DIR", local_data)  # this machine's, from here on
        token_file = home / "host.token"
        token_file.write_text(cli("serve", "--show-token").stdout)
        add_remote("far", url=found.group(1).decode() + "/demo", token_file=str(token_file))
        yield remote_data / "sessions"


def turn(*args: str) -> str:
    done = run_cli("run", "--agent", "far", *args, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_remote_agents_sessions_are_in_this_machines_history(elsewhere: Path) -> None:
    assert "You said: hello remote" in turn("hello remote")
    [listed] = json.loads(cli("sessions", "list", "--json").stdout)
    assert listed["agent"] == "far" and listed["turns"] == 1
    shown = cli("sessions", "show", listed["id"]).stdout
    assert "> hello remote" in shown and "You said: hello remote" in shown
    # --continue finds it here, and the remote host resumes it there.
    assert "You said: and again" in turn("--continue", "and again")
    [again] = json.loads(cli("sessions", "list", "--json").stdout)
    assert again["id"] == listed["id"] and again["turns"] == 2
    assert "You said: and once more" in turn("--session", listed["id"], "and once more")
    found = json.loads(cli("sessions", "search", "remote", "--json").stdout)
    assert {hit["session"] for hit in found} == {listed["id"]}
    [usage] = json.loads(cli("usage", "--by", "agent", "--json").stdout)
    assert usage["agent"] == "far" and usage["turns"] == 3
    # The remote host keeps its own copy.
    assert sorted(p.name for p in elsewhere.iterdir() if not p.name.startswith(".")) == [
        listed["id"]
    ]
