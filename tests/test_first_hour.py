"""Issue 45: the first hour, round three, as a new user meets it: no traceback in normal
use, checks where the mistake is made, doctor quiet about what heals itself, and the small
inconsistencies. (Its first item, the status line, is tests/test_status_line.py; its hints,
tests/test_suggested_commands.py.)"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acpctl import paths
from tests.conftest import acpctl_argv, cli, run
from tests.test_host import serving


@pytest.mark.e2e
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_stopping_serve_with_a_client_connected_prints_no_traceback(
    home: Path, monkeypatch: pytest.MonkeyPatch, stop: signal.Signals
) -> None:
    with serving(monkeypatch) as (host, _, _):

        async def connected_then_stopped() -> None:
            reader, writer = await asyncio.open_unix_connection(str(paths.host_socket()))
            writer.write(b'{"jsonrpc":"2.0","id":0,"method":"_acpctl/connect","params":{}}\n')
            writer.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":')
            writer.write(b'{"protocolVersion":1}}\n')
            await reader.readline()
            await reader.readline()
            host.send_signal(stop)
            await reader.read()  # until the host closes the connection
            writer.close()

        run(connected_then_stopped())
        assert host.wait(20) == 0
        assert host.stderr is not None
        said = host.stderr.read().decode()
    assert "Traceback" not in said and "CancelledError" not in said, said
    assert "stopping on " + stop.name in said


@pytest.mark.e2e
@pytest.mark.parametrize("way", ["direct", "through the host"], indirect=True)
def test_a_closed_pipe_leaves_quietly_and_cancels_the_turn(way: str, tmp_path: Path) -> None:
    """`acpctl run "slow: pipe" | head -c 10` printed "Task exception was never retrieved"
    with the host (3 runs of 3), and left the turn running there for nobody."""
    for _ in range(3):
        acpctl = subprocess.Popen(
            acpctl_argv("run", "slow: pipe"),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert acpctl.stdout is not None
        head = subprocess.run(["head", "-c", "10"], stdin=acpctl.stdout, capture_output=True)
        acpctl.stdout.close()
        _, said = acpctl.communicate(timeout=60)
        assert head.stdout == b"You said: "
        assert b"Task exception" not in said and b"Traceback" not in said, said
    if way == "through the host":
        deadline = time.monotonic() + 10
        while True:
            status = json.loads(cli("serve", "--status", "--json").stdout)
            running = [s for a in status["agents"] for s in a["sessions"] if s["running"]]
            if not running:
                break
            assert time.monotonic() < deadline, f"turns still running for nobody: {running}"
            time.sleep(0.2)


# 4. Checks where the mistake is made.


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ws://10.1.2.3:8765/acp", "is not encrypted and 10.1.2.3 is not this machine"),
        ("http://devbox:8765/acp", "is not encrypted and devbox is not this machine"),
        ("wss://", "--url names no host"),
        ("wss:///acp", "--url names no host"),
        ("ftp://devbox/acp", "--url must start with ws://, wss://, http://, https://"),
        ("devbox:8765", "--url must start with"),
    ],
)
def test_agents_add_refuses_a_url_that_run_would_refuse(home: Path, url: str, said: str) -> None:
    added = cli("agents", "add", "far", "--url", url)
    assert added.returncode == 2, added.stderr
    assert said in added.stderr
    assert "fix the file by hand" not in added.stderr  # nothing was written: no file to fix
    assert not (home / "config" / "config.toml").exists()


def test_agents_add_takes_a_url_run_takes(home: Path) -> None:
    for url in ("wss://devbox:8765/acp", "ws://127.0.0.1:8765/acp", "http://localhost:1/acp"):
        assert cli("agents", "add", "far", "--url", url).returncode == 0


def test_a_hand_edited_bad_url_still_says_fix_the_file(home: Path) -> None:
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[agents.far]\nurl = "ftp://devbox/acp"\n')
    listed = cli("agents", "list")
    assert listed.returncode == 2
    assert "[agents.far] url must start with" in listed.stderr
    assert "fix the file by hand" in listed.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--listen", "nonsense"),
        ("--listen", "127.0.0.1:99999"),
        ("--listen", "10.1.2.3:8765"),  # no TLS off loopback
        ("--tls-cert", "cert.pem"),
        ("--header-timeout", "0"),
    ],
)
def test_serve_usage_errors_exit_2(home: Path, args: tuple[str, ...]) -> None:
    refused = cli("serve", *args)
    assert refused.returncode == 2, refused.stderr
    assert "acpctl: error: " in refused.stderr


# 5. doctor warns only about what needs the user.


def test_an_index_behind_the_files_is_no_warning(home: Path) -> None:
    from acpctl.doctor.checks.storage import check_storage
    from acpctl.store.index import SessionIndex
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore()
    meta = SessionMeta(id="s1", agent="demo", command=[], cwd="/tmp")
    store.create(meta).close()
    SessionIndex(store).readable()  # indexed
    meta.turns, meta.title = 1, "a turn since"  # as a run records it, after the listing
    store.write_meta(meta)
    [finding] = check_storage()
    assert finding.status == "ok", finding
    assert "takes in 1 change(s) at the next listing" in finding.message


# 6. The attach display: one banner; another client's turn never lands on the prompt.


@pytest.mark.e2e
@pytest.mark.parametrize("way", ["through the host"], indirect=True)
def test_attach_keeps_another_clients_turn_off_its_prompt(way: str, tmp_path: Path) -> None:
    from tests.test_status_line import PseudoTerminal

    def prompt(*args: str) -> None:
        argv = acpctl_argv("run", "--format", "quiet", *args)
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr

    prompt("first")
    [session] = json.loads(cli("sessions", "list", "--json").stdout)
    terminal = PseudoTerminal(acpctl_argv("sessions", "attach", session["id"]), tmp_path)
    terminal.until(b"you> ")
    terminal.type(b"half typ")
    prompt("--session", session["id"], "from elsewhere")
    terminal.until(b"You said: from elsewhere")
    terminal.until(b"you> half typ")  # the prompt is back, with what was typed
    terminal.type(b"ed\n")
    terminal.until(b"You said: half typed")
    terminal.until(b"you> ")
    terminal.type(b"\x04")
    assert terminal.ended() == 0
    rows = [row for row in terminal.rows() if row]
    assert sum("attached to" in row for row in rows) == 1, rows
    assert sum("Ctrl-D leaves" in row for row in rows) == 1, rows
    theirs = next(i for i, row in enumerate(rows) if "> from elsewhere" in row)
    assert rows[theirs] == "> from elsewhere", rows  # on a line of its own
    assert rows[theirs + 1] == "You said: from elsewhere", rows
    assert rows[theirs + 2] == "you> half typed", rows


def test_agents_install_says_did_you_mean(home: Path) -> None:
    refused = cli("agents", "install", "claud", "--yes")
    assert refused.returncode == 2
    assert "'claud' is not in the catalog; did you mean 'claude'?" in refused.stderr


def test_sessions_export_takes_latest(home: Path) -> None:
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore()
    for sid, updated in (("older", "2026-01-01T00:00:00Z"), ("newer", "2026-02-01T00:00:00Z")):
        meta = SessionMeta(id=sid, agent="demo", command=[], cwd="/tmp", updated=updated)
        store.create(meta).close()
    exported = cli("sessions", "export", "--latest", "--format", "json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["session"]["id"] == "newer"
    assert cli("sessions", "export").returncode == 2  # neither a session nor --latest
    assert cli("sessions", "export", "older", "--latest").returncode == 2


def test_print_systemd_warns_of_a_temporary_python(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = tmp_path / "venv" / "bin" / "python"
    monkeypatch.setattr(sys, "executable", str(python))
    for flag in ("--print-systemd", "--print-launchd"):
        printed = cli("serve", flag)
        assert printed.returncode == 0
        assert str(python) in printed.stdout
        assert f"warning: {python} is in a temporary directory: the service breaks" in (
            printed.stderr
        )


@pytest.mark.e2e
def test_serve_listen_says_how_to_get_the_token(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = re.compile(rb"(.*)listening on ws://.*\n.*(acpctl host show-token)")
    with serving(monkeypatch, "--listen", "127.0.0.1:0", until=said) as (_, found, _):
        hinted = found.group(2).decode().split()
        assert found.group(1) == b"acpctl: session host: "  # not "acpctl: acpctl serve: "
        assert cli(*hinted[1:]).stdout.strip()  # the command it names prints the token


@pytest.mark.e2e
@pytest.mark.parametrize(
    "table",
    [{"ssh": "nosuch.invalid"}, {"url": "wss://nosuch.invalid:8765/acp"}],
    ids=["ssh", "wss"],
)
def test_a_remote_host_that_does_not_resolve_fails_at_once(
    home: Path, table: dict[str, str]
) -> None:
    """It took 21 s (the first connection's retries) to say what one look-up says."""
    from tests.raw_peer import raw_editor
    from tests.test_remote import add_remote

    add_remote("far", **table)

    async def editor() -> dict[str, object]:
        async with raw_editor("--agent", "far") as client:
            # Well inside the 20 s that a first connection retries what may come back.
            answer: dict[str, object] = await asyncio.wait_for(
                client.call("initialize", {"protocolVersion": 1}), 10
            )
            return answer

    error = run(editor())["error"]
    assert isinstance(error, dict) and error["code"] == -32010
    assert "nosuch.invalid" in error["message"] and "resolve" in error["message"], error


# 7. The docs' second half: the host, attach and remote agents, as commands
# (tests/test_docs.py runs them); the one that turns the host on:


def test_agents_host_turns_the_host_on_and_off(home: Path) -> None:
    from acpctl import config

    config_file = home / "config" / "config.toml"
    config_file.parent.mkdir(parents=True)
    config_file.write_text('# mine\n[agents.mine]\ncommand = "my-agent"\n')
    assert cli("agents", "host", "on").returncode == 0
    assert config.load().through_host("anything")
    assert cli("agents", "host", "off", "mine").returncode == 0
    loaded = config.load()
    assert loaded.through_host("claude") and not loaded.through_host("mine")
    assert config_file.read_text().startswith("# mine\n")  # the user's comment stays
    refused = cli("agents", "host", "on", "claude")  # not in config.toml: no table to set
    assert refused.returncode == 2 and "without a name it applies to every agent" in refused.stderr
    assert cli("agents", "host", "maybe").returncode == 2


def test_sessions_show_says_the_context_windows_fill_at_each_turns_end(home: Path) -> None:
    """Issue 43, 4: the fill a usage_update reports (used of size), in `sessions show`."""
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore()
    writer = store.create(SessionMeta(id="s1", agent="demo", command=[], cwd="/tmp"))
    writer.update(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    )
    writer.update({"sessionUpdate": "usage_update", "used": 50_000, "size": 200_000})
    writer.turn_end("end_turn", None)
    writer.close()
    shown = cli("sessions", "show", "s1").stdout
    assert "[end_turn] · context 25% of 200k" in shown, shown


def test_agents_add_keeps_a_relative_path_as_an_absolute_one(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 53, 5: `agents add mine -- python3 agent.py` stored `agent.py` as given, and
    every run from another directory (an editor's project) failed."""
    from acpctl.config import load

    (tmp_path / "agent.py").write_text("")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "agent.sh").write_text("")
    monkeypatch.chdir(tmp_path)
    assert cli("agents", "add", "mine", "--", "python3", "agent.py", "--acp").returncode == 0
    spec = load().agents["mine"]
    assert (spec.command, spec.args) == ("python3", (str(tmp_path / "agent.py"), "--acp"))
    assert cli("agents", "add", "other", "--", "bin/agent.sh").returncode == 0
    assert load().agents["other"].command == str(tmp_path / "bin" / "agent.sh")
