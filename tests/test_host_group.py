"""Issue 53, 2: the host's controls in one group. `acpctl host start` runs the host,
`acpctl host stop` stops it gracefully (a running turn finishes first) or `--now` (it is
cancelled), and says which; `serve` still works and says what it is called now."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
import pytest

from acpctl import protocol as acp
from tests.conftest import cli, run
from tests.test_host import RawClient, unix_client
from tests.test_one_host import until_status
from tests.test_pairing import Page
from tests.test_pairing import page as page  # the fixture: a host listening on 127.0.0.1

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


LOCAL_ONLY = (acp.HOST_STOP, acp.HOST_PAIR, acp.HOST_ROTATE_TOKEN, acp.HOST_REVOKE)


def test_the_hosts_local_controls_are_not_reached_from_the_network(page: Page) -> None:
    """Attack: a client on TCP (a controller's token, a paired controller device) asks the
    host to stop, to pair a device, to rotate a token or to revoke a device. Those are the
    unix socket's alone (host/control.py's LOCAL): none takes effect, whoever asks."""
    from tests.test_pairing import device_socket, paired, paired_address

    _, code = paired_address("--name", "phone")
    token = cli("host", "show-token").stdout.strip()
    pid = until_status()["pid"]

    async def scenario() -> None:
        async with aiohttp.ClientSession() as http:
            credential, key = await paired(http, page, code)
            headers = {"Authorization": f"Bearer {token}"}
            async with http.ws_connect(page.url("/acp"), headers=headers) as socket:
                editor = RawClient(socket)
                await editor.request(acp.INITIALIZE, {"protocolVersion": 1})
                for method in LOCAL_ONLY:
                    answered = await editor.request(
                        method, {"now": True, "role": "controller", "name": "phone"}
                    )
                    assert "error" in answered, (method, answered)
        async with device_socket(page, credential, key) as phone:
            for method in LOCAL_ONLY:
                answered = await phone.request(method, {"now": True, "name": "phone"})
                assert "error" in answered, (method, answered)

    run(scenario())
    assert until_status()["pid"] == pid  # still running: not stopped
    assert cli("host", "show-token").stdout.strip() == token  # not rotated
    listed = json.loads(cli("host", "devices", "--json").stdout)
    assert [d["name"] for d in listed] == ["phone"]  # not revoked, none paired


def test_the_push_endpoints_take_a_devices_secrets_from_its_own_page_only(page: Page) -> None:
    """Attack: the device's cookie and key sent to /push/answer and /push/question from
    another site, from the same host's other port (which a browser sends the cookie to),
    with no Origin, or the cookie without the key: each is refused before anything is
    looked up."""
    from tests.test_pairing import COOKIE, paired, paired_address

    _, code = paired_address("--name", "phone")
    _, watching = paired_address("--name", "tablet", "--observer")

    async def scenario() -> None:
        async with aiohttp.ClientSession() as http:
            credential, key = await paired(http, page, code)
            observer, observer_key = await paired(http, page, watching)
            headers = {
                "Cookie": f"{COOKIE}={observer}",
                "Origin": page.base,
                acp.DEVICE_KEY_HEADER: observer_key,
            }
            body = {"question": "q", "optionId": "allow"}
            async with http.post(page.url("/push/answer"), json=body, headers=headers) as got:
                assert got.status == 403  # an observer device answers nothing
            other_port = page.base.rsplit(":", 1)[0] + ":1"
            tries = [
                ({"Origin": "https://evil.example"}, key, 403),
                ({"Origin": other_port}, key, 403),
                ({}, key, 401),
                ({"Origin": page.base}, "", 401),
                ({"Origin": page.base}, "not-the-key", 401),
            ]
            for path in ("/push/answer", "/push/question"):
                for extra, presented, status in tries:
                    headers = {"Cookie": f"{COOKIE}={credential}", **extra}
                    if presented:
                        headers[acp.DEVICE_KEY_HEADER] = presented
                    body = {"question": "q", "optionId": "allow"}
                    async with http.post(page.url(path), json=body, headers=headers) as got:
                        assert got.status == status, (path, extra, presented, got.status)
                # With both secrets from the page itself: let in, and told nothing waits.
                headers = {
                    "Cookie": f"{COOKIE}={credential}",
                    "Origin": page.base,
                    acp.DEVICE_KEY_HEADER: key,
                }
                async with http.post(
                    page.url(path), json={"question": "q"}, headers=headers
                ) as got:
                    assert got.status in (404, 409), (path, got.status)

    run(scenario())
