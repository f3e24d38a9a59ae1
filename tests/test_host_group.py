"""Issue 53, 2: the host's controls in one group. `acpctl host start` runs the host,
`acpctl host stop` stops it gracefully (a running turn finishes first) or `--now` (it is
cancelled), and says which; `serve` still works and says what it is called now."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from acpctl import protocol as acp
from tests.conftest import cli, run
from tests.test_host import unix_client
from tests.test_one_host import until_status

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("now", [False, True], ids=["graceful", "now"])
def test_host_stop_lets_a_running_turn_finish_or_cancels_it_now(
    home: Path, monkeypatch: pytest.MonkeyPatch, now: bool
) -> None:
    # A unix socket path has ~107 bytes: the state directory goes somewhere short.
    state = Path(tempfile.mkdtemp(prefix="acph", dir="/tmp"))
    monkeypatch.setenv("ACPCTL_STATE_DIR", str(state))
    host = subprocess.Popen(
        [sys.executable, "-m", "acpctl", "host", "start", "--idle-stop", "0"],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        pid = until_status()["pid"]
        assert pid == host.pid

        async def scenario() -> tuple[str, subprocess.CompletedProcess[str]]:
            async with unix_client() as editor:
                await editor.request(acp.INITIALIZE, {"protocolVersion": 1})
                new = await editor.request(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
                await editor.send_prompt(new["result"]["sessionId"], "slow")
                await editor.until(lambda m: m.get("method") == acp.SESSION_UPDATE)
                args = ("host", "stop", "--now") if now else ("host", "stop")
                stopping = asyncio.ensure_future(asyncio.to_thread(cli, *args))
                ended = await editor.until(lambda m: m.get("id") == 7, 60)
                return ended["result"]["stopReason"], await stopping

        stop_reason, stopped = run(scenario(), timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        assert host.wait(30) == 0
        assert f"the session host (pid {pid}) stopped" in stopped.stderr
        if now:
            assert stop_reason == "cancelled"
            assert "1 running turn(s) cancelled" in stopped.stderr
        else:
            assert stop_reason == "end_turn"  # it finished, then the host went
            assert "1 running turn(s) may finish first" in stopped.stderr
        assert cli("host", "status").returncode == 1  # gone
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)
        assert host.stderr is not None
        host.stderr.close()
