"""Issue 40, 5: exactly one session host per state directory. A second `serve`, with or
without --listen, or a racing auto-start, is refused with the running host's pid and
address, and never removes the running host's socket; `--replace` restarts it in one step,
its sessions kept."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from acpctl import paths
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


def status() -> dict[str, object] | None:
    shown = cli("serve", "--status", "--json")
    return json.loads(shown.stdout) if shown.returncode == 0 else None


def until_status(timeout: float = 20) -> dict[str, object]:
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
            time.sleep(0.5)  # the loser has had time to fail, or to take the socket
            ended = [p for p in (first, second) if p.poll() is not None]
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

        async def open_session() -> str:
            from tests.test_host import unix_client

            async with unix_client("demo") as client:
                await client.request("initialize", {"protocolVersion": 1})
                new = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
                return str(new["result"]["sessionId"])

        session = run(open_session())
        refused = subprocess.run(
            acpctl_argv("serve", "--listen", "127.0.0.1:0"),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert refused.returncode == 1
        assert f"(pid {first.pid}, listening on {paths.host_socket()})" in refused.stderr
        assert "acpctl serve --replace" in refused.stderr
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


# Issue 40, 7: attach never waits forever for a host that went away.


@pytest.mark.parametrize("observe", [False, True], ids=["controller", "observer"])
def test_attach_says_the_host_went_away_and_exits_1(state: Path, observe: bool) -> None:
    from tests.test_status_line import PseudoTerminal

    host = serve()
    try:
        until_status()

        async def open_session() -> str:
            from tests.test_host import unix_client

            async with unix_client("demo") as client:
                await client.request("initialize", {"protocolVersion": 1})
                new = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
                session = str(new["result"]["sessionId"])
                prompt = [{"type": "text", "text": "hello"}]
                await client.request("session/prompt", {"sessionId": session, "prompt": prompt})
                return session

        session = run(open_session())
        argv = acpctl_argv("sessions", "attach", session, *(["--observe"] if observe else []))
        terminal = PseudoTerminal(argv, state)
        terminal.until(b"you> " if not observe else b"Ctrl-C leaves")
        host.kill()
        host.wait(10)
        terminal.until(b"the session host went away")
        assert terminal.ended(timeout=10) == 1
    finally:
        stop_host(host)
