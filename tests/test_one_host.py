"""Issue 40, 5: exactly one session host per state directory. A second `serve`, with or
without --listen, or a racing auto-start, is refused with the running host's pid and
address, and never removes the running host's socket; `--replace` restarts it in one step,
its sessions kept."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acpctl import cursors_wire, paths
from tests.conftest import acpctl_argv, cli, run
from tests.test_host import stop_host

pytestmark = pytest.mark.e2e


@pytest.fixture
def state(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # A unix socket path has ~107 bytes: the state directory goes somewhere short.
    directory = Path(tempfile.mkdtemp(prefix="acps", dir="/tmp"))
    monkeypatch.setenv("ACPCTL_STATE_DIR", str(directory))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        acpctl_argv("serve", *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


async def open_session(prompt: str | None = None) -> str:
    """A demo session on the host's unix socket (with one turn, given a prompt)."""
    from tests.test_host import unix_client

    async with unix_client("demo") as client:
        await client.request("initialize", {"protocolVersion": 1})
        new = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        session = str(new["result"]["sessionId"])
        if prompt is not None:
            blocks = [{"type": "text", "text": prompt}]
            await client.request("session/prompt", {"sessionId": session, "prompt": blocks})
        return session


def status() -> dict[str, object] | None:
    shown = cli("serve", "--status", "--json")
    return json.loads(shown.stdout) if shown.returncode == 0 else None


def until_status(timeout: float = 60) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while (found := status()) is None:
        assert time.monotonic() < deadline, "no host answers"
        time.sleep(0.1)
    return found


def test_two_hosts_started_at_once_are_one(state: Path) -> None:
    for round_ in range(5):
        first, second = serve(), serve()
        try:
            running = until_status()
            deadline = time.monotonic() + 60
            while not (ended := [p for p in (first, second) if p.poll() is not None]):
                assert time.monotonic() < deadline, f"round {round_}: neither host gave way"
                time.sleep(0.05)
            assert len(ended) == 1, f"round {round_}: {[p.poll() for p in (first, second)]}"
            [winner] = [p for p in (first, second) if p.poll() is None]
            assert running["pid"] == winner.pid
            assert paths.host_socket().exists()  # the loser left the winner's socket
            assert status() is not None
            assert ended[0].returncode == 1
            assert ended[0].stderr is not None
            said = ended[0].stderr.read()
            assert f"a session host already runs here (pid {winner.pid}" in said, said
        finally:
            for process in (first, second):
                stop_host(process)


def test_a_second_serve_with_listen_is_refused_then_replace_adds_it(state: Path) -> None:
    first = serve()
    try:
        until_status()

        session = run(open_session())
        refused = subprocess.run(
            acpctl_argv("serve", "--listen", "127.0.0.1:0"),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert refused.returncode == 1
        assert f"(pid {first.pid}, listening on {paths.host_socket()})" in refused.stderr
        assert "acpctl host start --replace" in refused.stderr
        assert status() is not None and first.poll() is None  # untouched

        second = serve("--replace", "--listen", "127.0.0.1:0")
        try:
            assert first.wait(30) == 0  # stopped as on Ctrl-C
            running = until_status()
            assert running["pid"] == second.pid
            listening = running["listening"]
            assert isinstance(listening, list)
            assert re.match(r"ws://127\.0\.0\.1:\d+/acp", listening[0]["address"])
            stored = json.loads(cli("sessions", "list", "--json").stdout)
            assert [s["id"] for s in stored] == [session]  # kept, in the store
        finally:
            stop_host(second)
    finally:
        stop_host(first)


# Issue 40, 1 and 7: attach goes through the link, as an editor's run --acp does: it says
# when the host goes and comes back, and never waits forever.


@pytest.mark.parametrize("observe", [False, True], ids=["controller", "observer"])
def test_attach_outlives_a_killed_host_and_takes_its_session_up_again(
    state: Path, observe: bool
) -> None:
    from tests.conftest import stop_running_host
    from tests.test_status_line import PseudoTerminal

    host = serve()
    try:
        until_status()
        session = run(open_session(prompt="hello"))
        argv = acpctl_argv("sessions", "attach", session, *(["--observe"] if observe else []))
        terminal = PseudoTerminal(argv, state)
        terminal.until(b"you> " if not observe else b"Ctrl-C leaves")
        # Issue 53, 3: attach reaches the host through the link in its own process, with no
        # child `run --acp` between (a second interpreter's start, a hop for each message).
        import psutil

        assert psutil.Process(terminal.process.pid).children(recursive=True) == []
        host.kill()  # no word to its clients: as a crash
        host.wait(10)
        terminal.until(b"the link dropped at")
        # The link started a host again, which took the session up from the store.
        terminal.until(b"the link is back after")
        terminal.until(b"1 session(s) reloaded)")
        assert until_status()["pid"] != host.pid
        if observe:
            terminal.process.send_signal(signal.SIGINT)  # the pty is not its controlling tty
        else:
            terminal.type(b"after the outage\r")
            terminal.until(b"You said: after the outage")
            terminal.until(b"you> ")  # the turn is over: the prompt reads the Ctrl-D
            terminal.type(b"\x04")  # Ctrl-D leaves
        assert terminal.ended(timeout=20) == 0
    finally:
        stop_host(host)
        stop_running_host()


@pytest.mark.parametrize("observe", [False, True], ids=["controller", "observer"])
def test_attach_says_the_host_stopped_and_exits_1_past_the_outage_limit(
    state: Path, home: Path, observe: bool
) -> None:
    from tests.test_status_line import PseudoTerminal

    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("outage_limit_s = 1\n")
    host = serve()
    try:
        until_status()
        session = run(open_session(prompt="hello"))
        argv = acpctl_argv("sessions", "attach", session, *(["--observe"] if observe else []))
        terminal = PseudoTerminal(argv, state)
        terminal.until(b"you> " if not observe else b"Ctrl-C leaves")
        host.send_signal(signal.SIGTERM)
        terminal.until(b"the session host is stopping (SIGTERM)")
        assert host.wait(20) == 0
        terminal.until(b"the session host stopped")
        assert terminal.ended(timeout=20) == 1
        assert status() is None  # the link started no host after a stop
    finally:
        stop_host(host)


def test_attach_stays_through_a_crash_mid_turn_and_says_the_link_is_down_to_a_prompt(
    state: Path,
) -> None:
    """Issue 53, 5: the host killed mid-turn: the turn's error on a line of its own (it was
    printed on the answer's line), and attach stays, since the link came back (it exited
    1). A prompt typed while the host is away says the link is down, not only that it
    waits for the agent; it goes through once a host is back."""
    from tests.conftest import stop_running_host
    from tests.test_status_line import PseudoTerminal

    host = serve()
    later: subprocess.Popen[str] | None = None
    try:
        until_status()
        session = run(open_session(prompt="hello"))
        argv = acpctl_argv("sessions", "attach", session)
        terminal = PseudoTerminal(argv, state, columns=100, rows=30)
        terminal.until(b"you> ")
        terminal.type(b"slow: the long one\r")
        terminal.until(b"You said:")
        host.kill()  # mid-turn, no word to its clients
        host.wait(10)
        terminal.until(b"acpctl: error: the link to the session host dropped before the answer")
        assert any(row.startswith("acpctl: error:") for row in terminal.rows())
        terminal.until(b"reloaded)")
        terminal.until(b"you> ")
        until_status()
        # Stopped (not crashed): the link starts no host again; a prompt waits for one.
        assert cli("host", "stop").returncode == 0
        terminal.until(b"the link dropped at")
        # No turn runs: no grace to speak of (it said "running turns get 30 s").
        stopping = "acpctl: the session host is stopping (acpctl host stop)"
        assert stopping in terminal.rows()
        terminal.type(b"while it is away\r")
        terminal.until(b"link down since")
        later = serve()
        terminal.until(b"You said: while it is away")
        terminal.until(b"you> ")
        terminal.type(b"\x04")
        assert terminal.ended(timeout=20) == 0
    finally:
        stop_host(host)
        if later is not None:
            stop_host(later)
        stop_running_host()


# Issue 40, 6: a graceful stop lets running turns finish, and tells every client.


async def _prompt_while_the_host_stops(
    host: subprocess.Popen[str], text: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A slow turn on the unix socket, the host sent SIGTERM while it streams: the turn's
    answer, and what else came."""
    import signal

    from tests.test_host import unix_client

    async with unix_client("demo") as client:
        await client.request("initialize", {"protocolVersion": 1})
        new = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
        session = new["result"]["sessionId"]
        prompt = [{"type": "text", "text": text}]
        params = {"sessionId": session, "prompt": prompt}
        await client.send({"jsonrpc": "2.0", "id": 7, "method": "session/prompt", "params": params})
        await client.until(lambda m: m.get("method") == "session/update")  # it streams
        host.send_signal(signal.SIGTERM)
        answer = await client.until(lambda m: m.get("id") == 7 and "method" not in m)
        return answer, client.messages


def test_sigterm_lets_a_running_turn_finish_within_the_grace(state: Path) -> None:
    host = serve("--stop-grace", "20")
    try:
        until_status()
        answer, messages = run(_prompt_while_the_host_stops(host, "slow: finish me"))
        assert answer["result"]["stopReason"] == "end_turn"  # not cancelled
        told = [m for m in messages if m.get("method") == "_acpctl/stopping"]
        assert told and cursors_wire.without(told[0])["params"] == {
            "signal": "SIGTERM",
            "graceSeconds": 20,
        }
        assert host.wait(20) == 0
        assert host.stderr is not None
        said = host.stderr.read()
        assert "stopping on SIGTERM; 1 running turn(s) get 20 s to finish" in said, said
    finally:
        stop_host(host)


def test_past_the_grace_the_turn_is_cancelled(state: Path) -> None:
    host = serve("--stop-grace", "0.3")
    try:
        until_status()
        answer, _ = run(_prompt_while_the_host_stops(host, "slow: too slow"))
        assert answer["result"]["stopReason"] == "cancelled"
        assert host.wait(20) == 0
    finally:
        stop_host(host)


@pytest.mark.parametrize("way", ["through the host"], indirect=True)
def test_a_run_through_the_host_finishes_its_turn_and_says_the_host_stops(
    way: str, tmp_path: Path
) -> None:
    import signal

    import psutil

    running = subprocess.Popen(
        acpctl_argv("run", "slow: through"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert running.stdout is not None
    assert running.stdout.read(len("You said:")) == "You said:"  # the turn streams
    host = psutil.Process(int(until_status()["pid"]))  # type: ignore[call-overload]
    host.send_signal(signal.SIGTERM)
    rest, said = running.communicate(timeout=30)
    assert running.returncode == 0, said
    assert rest.rstrip().endswith("slow: through")  # the whole answer
    assert "the session host is stopping (SIGTERM): running turns get 30 s to finish" in said
    host.wait(20)


@pytest.mark.parametrize("way", ["through the host"], indirect=True)
def test_a_killed_run_is_not_listed_as_a_client_while_a_living_one_is(
    way: str, tmp_path: Path
) -> None:
    """Issue 53, 5: a `run --acp` killed with its editor (SIGKILL: it cannot say it leaves)
    stayed listed as a connected client for the connection's 60 s grace. The host knows the
    process that holds a local connection (the kernel names the socket's peer), so its exit
    ends the connection at once; a living editor's client stays listed."""
    from acp.schema import Implementation

    from tests.acp_peer import connect

    def clients() -> list[str]:
        listed = json.loads(cli("sessions", "list", "--json").stdout)
        return sorted(name for s in listed if s.get("live") for name in s["live"]["clients"])

    async def opened(name: str) -> tuple[Any, Any]:
        manager = connect()
        conn, process, _ = await manager.__aenter__()
        await conn.initialize(
            protocol_version=1, client_info=Implementation(name=name, version="1")
        )
        await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        return manager, process

    async def scenario() -> None:
        kept, _ = await opened("kept-editor")
        killed, process = await opened("killed-editor")
        assert await asyncio.to_thread(clients) == ["kept-editor", "killed-editor"]
        process.kill()
        deadline = time.monotonic() + 30  # half the grace the connection had before
        while (listed := await asyncio.to_thread(clients)) != ["kept-editor"]:
            assert time.monotonic() < deadline, listed
            await asyncio.sleep(0.1)
        with contextlib.suppress(Exception):
            await killed.__aexit__(None, None, None)
        await kept.__aexit__(None, None, None)

    run(scenario())


# Issue 40, 7: every view sees the host's sessions.


def test_sessions_list_and_watch_see_what_the_host_holds(state: Path) -> None:
    host = serve()
    try:
        until_status()

        async def listing(*args: str) -> subprocess.CompletedProcess[str]:
            return await asyncio.to_thread(cli, "sessions", "list", *args)  # it runs a loop

        async def scenario() -> None:
            from tests.test_host import unix_client

            async with unix_client("demo") as client:
                info = {"name": "my-editor", "version": "1"}
                await client.request("initialize", {"protocolVersion": 1, "clientInfo": info})
                new = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
                session = new["result"]["sessionId"]
                listed = json.loads((await listing("--json")).stdout)
                assert listed[0]["live"] == {"running": False, "clients": ["my-editor"]}
                watcher = await asyncio.create_subprocess_exec(
                    *acpctl_argv("sessions", "watch", session),
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                prompt = [{"type": "text", "text": "slow: watched"}]
                params = {"sessionId": session, "prompt": prompt}
                message = {"jsonrpc": "2.0", "id": 9, "method": "session/prompt", "params": params}
                await client.send(message)
                await client.until(lambda m: m.get("method") == "session/update")
                table = (await listing()).stdout
                assert "running at the host: my-editor" in table, table
                await client.until(lambda m: m.get("id") == 9)
                assert watcher.stdout is not None
                before = b""
                while b"You said: slow: watched" not in before:  # the watcher has the turn
                    line = await asyncio.wait_for(watcher.stdout.readline(), 30)
                    assert line, before
                    before += line
                host.send_signal(signal.SIGTERM)
                rest, said = await asyncio.wait_for(watcher.communicate(), 20)
                shown = before + rest
                assert watcher.returncode == 0, said  # it followed a live session
                assert b"You said: slow: watched" in shown
                assert shown.rstrip().endswith(b"(the run ended)")

        run(scenario())
        assert host.wait(20) == 0
        assert "live" in json.loads(cli("sessions", "list", "--json").stdout)[0]
        assert json.loads(cli("sessions", "list", "--json").stdout)[0]["live"] is None
    finally:
        stop_host(host)


# Issue 40, 9: the environment is never silently different.


@pytest.mark.parametrize("way", ["through the host"], indirect=True)
def test_a_client_whose_environment_differs_from_the_hosts_is_told(
    way: str, tmp_path: Path
) -> None:
    import os

    def turn(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            acpctl_argv("run", "hello"),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **extra},
        )

    first = turn()  # starts the host, from this environment
    assert first.returncode == 0 and "note:" not in first.stderr, first.stderr
    other = turn(ACME_BASE_URL="http://127.0.0.1:9/secret-value")
    assert other.returncode == 0, other.stderr
    assert "note: demo runs in the session host, with the host's environment" in other.stderr
    assert "differs from this one in ACME_BASE_URL:" in other.stderr
    assert "acpctl host start --replace" in other.stderr
    assert "secret-value" not in other.stderr  # names only, never values
    assert "note:" not in turn(TERM="dumb", COLUMNS="7").stderr  # what differs in any shell


# Issue 43, 2 (left out last stop): the chat's prompt and a question both read the
# terminal. A question asked while the prompt waits (another client's turn) takes the
# next line; once it is answered elsewhere, the next line is the chat's again.


async def _editors_turn_asks(terminal: Any, session: str, answer_here: bool) -> dict[str, Any]:
    """Another client's turn in `session` asks a permission of every controller, the
    attached terminal at its prompt too; the terminal answers it (typed `1`), or the
    editor does and the terminal's question is dropped. The editor's turn's end."""
    from tests.test_host import unix_client

    async with unix_client("demo") as editor:
        await editor.request("initialize", {"protocolVersion": 1})
        await editor.request("session/attach", {"sessionId": session, "historyPolicy": "none"})
        await editor.send_prompt(session, "edit")
        asked = await editor.until(lambda m: m.get("method") == "session/request_permission")
        await asyncio.to_thread(terminal.until, b"choice> ")
        if answer_here:
            terminal.type(b"1\r")
            await editor.until(lambda m: m.get("method") == "$/cancel_request")
        else:
            allow = {"outcome": {"outcome": "selected", "optionId": "allow"}}
            await editor.send({"jsonrpc": "2.0", "id": asked["id"], "result": allow})
            await asyncio.to_thread(terminal.until, b"answered elsewhere")
        ended: dict[str, Any] = await editor.until(lambda m: m.get("id") == 7 and "result" in m)
        return ended


def test_a_question_asked_at_the_attached_chats_prompt_takes_the_next_line(state: Path) -> None:
    from tests.test_status_line import PseudoTerminal

    host = serve()
    try:
        until_status()
        session = run(open_session(prompt="hello"))
        terminal = PseudoTerminal(acpctl_argv("sessions", "attach", session), state, rows=40)
        terminal.until(b"you> ")
        answered = run(_editors_turn_asks(terminal, session, answer_here=True))
        assert answered["result"]["stopReason"] == "end_turn"
        dropped = run(_editors_turn_asks(terminal, session, answer_here=False))
        assert dropped["result"]["stopReason"] == "end_turn"
        terminal.type(b"/quit\r")  # the chat's: the dropped question reads no more
        assert terminal.ended(timeout=20) == 0
        assert b"You said: 1" not in terminal.seen  # the answer never went to the agent
        shown = cli("sessions", "show", session).stdout
        assert "answered: allow, by acpctl sessions attach" in shown, shown
    finally:
        stop_host(host)


def test_a_host_without_a_listener_hands_out_tokens_and_says_no_turn_runs_as_it_stops(
    state: Path,
) -> None:
    """Issue 53, 5: `serve --show-token` against a host started without --listen said the
    tokens file "is gone while the session host runs": that host never held one. And its
    stop said "0 running turn(s) get 30 s"."""
    host = serve()
    try:
        until_status()
        shown = cli("serve", "--show-token")
        assert shown.returncode == 0, shown.stderr
        assert len(shown.stdout.strip()) >= 40
    finally:
        stop_host(host)
    logged = "".join(p.read_text() for p in (state / "logs").rglob("serve-*.log"))
    assert "no turn is running" in logged and "0 running turn(s)" not in logged
