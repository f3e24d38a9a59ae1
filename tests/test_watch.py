"""Issue 19 (item 1): `acpctl sessions watch` follows a session another process is
running, from its last turn until that run ends; permission requests and their answers are
in the history, so watch and show render them."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import acpctl_argv, run_cli

pytestmark = pytest.mark.e2e


def test_watch_follows_a_running_session_until_its_run_ends(home: Path) -> None:
    assert run_cli("run", "--agent", "demo", "an earlier turn").returncode == 0
    (session,) = json.loads(run_cli("sessions", "list", "--json").stdout)
    running = subprocess.Popen(
        acpctl_argv("run", "--agent", "demo", "-c", "--approve-all", "edit, then slow"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not any(
            session["id"] in run.get("sessions", [])
            for run in json.loads(run_cli("ps", "--json").stdout)
        ):
            assert time.monotonic() < deadline, "the run never opened the session"
            time.sleep(0.05)
        watched = run_cli("sessions", "watch", "--latest", timeout=60)
        assert watched.returncode == 0, watched.stderr
        assert running.wait(timeout=30) == 0
    finally:
        running.kill()
    turn = watched.stdout.split("\n", 2)[2]  # after the header
    assert "an earlier turn" not in turn  # the last turn only
    assert "> edit, then slow" in turn
    assert "? permission asked: Edit" in turn and "answered: allow" in turn
    assert "[end_turn]" in turn and turn.rstrip().endswith("(the run ended)")
    again = run_cli("sessions", "watch", str(session["id"]))
    assert again.returncode == 1 and "no acpctl run or session host has it open" in again.stdout
    shown = run_cli("sessions", "show", str(session["id"]))
    assert "an earlier turn" in shown.stdout and "answered: allow" in shown.stdout
    assert run_cli("sessions", "watch", "x", "--latest").returncode == 2


def test_watch_follows_the_events_file_when_it_is_replaced_by_rename(home: Path) -> None:
    """A rename over events.jsonl (a repair, an import) gives a new file: watch reads it
    from its last turn, not from an offset into the old one (a shorter rewrite showed
    nothing more, ever)."""
    import io
    import os
    import threading

    from acpctl.store.sessions import EVENTS_FILE, SessionMeta, SessionStore
    from acpctl.terminal.watch import follow

    store = SessionStore()
    meta = SessionMeta(id="w1", agent="demo", command=[], cwd="/p")
    writer = store.create(meta)
    writer.update(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "before"}}
    )
    writer.turn_end("end_turn")
    writer.close()
    path = store.session_dir("w1") / EVENTS_FILE
    out = io.StringIO()
    running = threading.Event()
    running.set()
    watching = threading.Thread(target=follow, args=(store, meta, out, running.is_set))
    watching.start()
    try:
        deadline = time.monotonic() + 10
        while "before" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        replacement = path.with_name("events.new")
        chunk = {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "after rename"},
        }
        line = json.dumps({"ts": 1.0, "type": "update", "update": chunk})
        replacement.write_text(line + "\n")  # a rewrite shorter than what was read
        os.replace(replacement, path)
        while "after rename" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        running.clear()
        watching.join(10)
    assert "after rename" in out.getvalue(), out.getvalue()
