"""Issue 41: the host's door holds under hostile load. Nobody without a token locks
anybody out: sockets held without one make way, failed authentications are limited for
failing requests only, and every request (not only a connection's first) has its deadline.
Every flood here is on 127.0.0.1, bounded in count and time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.conftest import cli, run
from tests.test_host import LISTENING, Host, serving

pytestmark = pytest.mark.e2e


@pytest.fixture
def door(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Host]:
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0", "--header-timeout", "1")
    with serving(monkeypatch, *args, until=LISTENING) as (process, found, _):
        controller = cli("serve", "--show-token").stdout.strip()
        observer = cli("serve", "--show-token", "--observer").stdout.strip()
        yield Host(found.group(1).decode(), controller, observer, process)


def port_of(host: Host) -> int:
    return int(host.url.rsplit(":", 1)[1].split("/")[0])


async def gets_in(host: Host, http: aiohttp.ClientSession) -> float:
    """Seconds the right token takes to open the WebSocket and have initialize answered."""
    began = time.monotonic()
    async with http.ws_connect(host.url, headers=host.headers()) as socket:
        await socket.send_str('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}')
        answer = await asyncio.wait_for(socket.receive(), 5)
        assert answer.type == aiohttp.WSMsgType.TEXT and '"result"' in answer.data
    return time.monotonic() - began


def test_a_thousand_sockets_without_a_token_lock_nobody_out(door: Host) -> None:
    """It took 64 (the host's limit): a client with the token got in 0 times in 8."""
    port = port_of(door)

    async def scenario() -> list[float]:
        held: list[asyncio.StreamWriter] = []

        async def flood(count: int) -> None:
            for n in range(count):
                try:
                    _, writer = await asyncio.open_connection("127.0.0.1", port)
                except OSError:
                    continue
                if n % 2:  # half of them ask once, get their 401, and stay
                    writer.write(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                held.append(writer)
                if n % 50 == 0:
                    await asyncio.sleep(0)

        times = []
        async with aiohttp.ClientSession() as http:
            for _ in range(8):
                await flood(125)  # 1,000 in all, held while the client tries
                times.append(await asyncio.wait_for(gets_in(door, http), 10))
        for writer in held:
            writer.close()
        return times

    times = run(scenario(), timeout=120)
    assert len(times) == 8 and max(times) < 1.0, times


def test_a_refused_request_closes_its_connection(door: Host) -> None:
    async def scenario() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(door))
        writer.write(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n")
        answered = await asyncio.wait_for(reader.read(), 5)  # to the end: it was closed
        writer.close()
        return answered

    assert run(scenario()).startswith(b"HTTP/1.1 401")


def test_wrong_tokens_never_lock_out_the_right_one(door: Host) -> None:
    """Ten wrong tokens gave the right one 429 for a minute."""

    async def scenario() -> list[float]:
        wrong = {"Authorization": "Bearer wrong", "Host": f"127.0.0.1:{port_of(door)}"}
        times = []
        async with aiohttp.ClientSession() as http:
            for _ in range(8):
                for _ in range(25):  # 200 in all
                    async with http.get(door.url.replace("ws:", "http:"), headers=wrong) as got:
                        assert got.status in (401, 429)
                times.append(await asyncio.wait_for(gets_in(door, http), 10))
        return times

    times = run(scenario(), timeout=120)
    assert max(times) < 1.0, times


def test_a_kept_alive_connections_next_request_has_the_header_deadline(door: Host) -> None:
    """Slow headers on a keep-alive connection's second request were never timed out."""

    async def scenario() -> float:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(door))
        auth = f"Authorization: Bearer {door.controller}\r\n".encode()
        host = f"Host: 127.0.0.1:{port_of(door)}\r\n".encode()
        writer.write(b"DELETE /acp HTTP/1.1\r\n" + host + auth + b"\r\n")  # answered, kept
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        writer.write(b"GET /acp HTTP/1.1\r\n" + host)  # and the rest never comes
        began = time.monotonic()
        while await asyncio.wait_for(reader.read(1 << 16), 10):
            pass
        writer.close()
        return time.monotonic() - began

    assert run(scenario()) < 5  # the 1 s deadline, not never


def test_a_slow_body_with_the_right_token_has_a_deadline(door: Host) -> None:
    async def scenario() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(door))
        writer.write(
            f"POST /acp HTTP/1.1\r\nHost: 127.0.0.1:{port_of(door)}\r\n"
            f"Authorization: Bearer {door.controller}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n{".encode()
        )
        answered = await asyncio.wait_for(reader.read(), 10)  # 3 s: three header timeouts
        writer.close()
        return answered

    assert run(scenario()).startswith(b"HTTP/1.1 408")


def test_a_hostile_remotes_duplicate_and_unasked_answers_never_reach_the_editor(
    home: Path,
) -> None:
    """Issue 41, 10: they were passed through to the editor."""
    import json

    from aiohttp import web

    from tests.raw_peer import raw_editor
    from tests.test_remote import add_remote

    async def remote(request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        async for frame in socket:
            message = json.loads(frame.data)
            if "id" not in message:
                continue
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1}}
            if message["method"] == "session/new":
                answer["result"] = {"sessionId": "s1"}
            await socket.send_str(json.dumps(answer))
            await socket.send_str(json.dumps(answer))  # again
            await socket.send_str(json.dumps({**answer, "id": 999}))  # to nothing asked
        return socket

    async def scenario() -> list[dict[str, object]]:
        app = web.Application()
        app.router.add_get("/acp", remote)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        add_remote("hostile", url=f"ws://127.0.0.1:{port}/acp")
        try:
            async with raw_editor("--agent", "hostile") as editor:
                await editor.call("initialize", {"protocolVersion": 1})
                await editor.call("session/new", {"cwd": "/tmp", "mcpServers": []})
                # What the remote sent after answer 2 (2 again, 999) comes before answer 3:
                # the link relays in order.
                await editor.call("session/list", {})
                return list(editor.messages)
        finally:
            await runner.cleanup()

    answers = [m for m in run(scenario()) if "method" not in m]
    assert [a["id"] for a in answers] == [1, 2, 3], answers


def test_odd_input_at_the_door_gets_a_clear_answer(door: Host) -> None:
    """Issue 41, 7: an Authorization header that is not UTF-8 got a 500 with a traceback;
    a binary first WebSocket frame closed the socket, though it is to be ignored."""

    async def scenario() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(door))
        writer.write(
            f"GET /acp HTTP/1.1\r\nHost: 127.0.0.1:{port_of(door)}\r\n".encode()
            + b"Authorization: Bearer \xff\xfe\xfd\r\n\r\n"
        )
        answered = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        assert answered.startswith(b"HTTP/1.1 401"), answered[:200]
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(door.url, headers=door.headers()) as socket,
        ):
            await socket.send_bytes(b"\x00binary")
            await socket.send_str('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}')
            answer = await asyncio.wait_for(socket.receive(), 5)
            assert answer.type == aiohttp.WSMsgType.TEXT and '"result"' in answer.data

    run(scenario())


def test_the_demo_agent_refuses_to_resume_a_session_it_never_had() -> None:
    """Issue 41, 7: it answered session/resume for any id."""
    import sys

    async def scenario() -> Any:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "acpctl.demo_agent",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
            b'{"jsonrpc":"2.0","id":2,"method":"session/resume",'
            b'"params":{"sessionId":"never","cwd":"/tmp"}}\n'
        )
        await process.stdin.drain()
        import json

        answers = [json.loads(await process.stdout.readline()) for _ in range(2)]
        process.stdin.close()
        await process.wait()
        return answers[1]

    answer = run(scenario())
    assert answer["error"] == {"code": -32002, "message": "no session never"}, answer


@pytest.mark.parametrize("planted", ["symlink", "owned by another"])
def test_a_planted_host_directory_is_refused_cleanly(
    home: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    """Issue 41, 9: a `<state>/host` linked to another user's directory got the socket of a
    host run as root (that user could swap it), or a traceback run as anyone else."""
    import os
    import shutil
    import subprocess
    import tempfile

    from tests.conftest import acpctl_argv

    state = Path(tempfile.mkdtemp(prefix="acps", dir="/tmp"))
    monkeypatch.setenv("ACPCTL_STATE_DIR", str(state))
    theirs = state / "theirs"
    theirs.mkdir(mode=0o755)
    if os.getuid() == 0:
        os.chown(theirs, 12345, 12345)  # as CI runs: root, and a directory of another user
    elif planted == "owned by another":
        pytest.skip("making a directory another user's needs root")
    if planted == "symlink":
        (state / "host").symlink_to(theirs)
    else:
        theirs.rename(state / "host")
        theirs = state / "host"
    try:
        refused = subprocess.run(acpctl_argv("serve"), capture_output=True, text=True, timeout=30)
        assert refused.returncode == 1, refused.stderr
        assert "Traceback" not in refused.stderr
        said = "is a symbolic link" if planted == "symlink" else "belongs to another user"
        assert said in refused.stderr
        assert list(theirs.iterdir()) == []  # no socket, lock or pid put there
        assert theirs.stat().st_mode & 0o777 == 0o755  # nor its mode changed
    finally:
        shutil.rmtree(state, ignore_errors=True)


def test_a_rotated_token_is_taken_at_once_and_ends_the_old_ones_connections(
    door: Host,
) -> None:
    """Issue 41, 8: no way to rotate a token; a deleted tokens file made --show-token print
    tokens that the running host rejected; `--show-token > token` was world-readable."""
    import os

    from acpctl import paths

    async def scenario() -> None:
        async with aiohttp.ClientSession() as http:
            old = await http.ws_connect(door.url, headers=door.headers())
            await old.send_str('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}')
            assert (await asyncio.wait_for(old.receive(), 5)).type == aiohttp.WSMsgType.TEXT
            rotated = await asyncio.to_thread(cli, "serve", "--rotate-token")
            assert rotated.returncode == 0, rotated.stderr
            assert "1 connection(s) with the old one ended" in rotated.stderr
            closed = await asyncio.wait_for(old.receive(), 5)
            assert closed.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            new = (await asyncio.to_thread(cli, "serve", "--show-token")).stdout.strip()
            assert new != door.controller
            try:
                await http.ws_connect(door.url, headers=door.headers())
                raise AssertionError("the old token still gets in")
            except aiohttp.WSServerHandshakeError as exc:
                assert exc.status == 401
            async with http.ws_connect(door.url, headers=door.headers(new)):
                pass
            # The observer's token was not touched.
            async with http.ws_connect(door.url, headers=door.headers(door.observer)):
                pass

    run(scenario())
    paths.host_tokens().unlink()
    refused = cli("serve", "--show-token")
    assert refused.returncode == 1 and "is gone while the session host" in refused.stderr
    assert not paths.host_tokens().exists()  # not silently replaced
    written = door.process.pid  # any path will do: a fresh one, 0600
    token_file = paths.state_dir() / f"token-{written}"
    assert cli("serve", "--rotate-token").returncode == 0
    assert cli("serve", "--show-token", "--token-file", str(token_file)).returncode == 0
    assert os.stat(token_file).st_mode & 0o777 == 0o600
    assert len(token_file.read_text().strip()) >= 40


def test_initialize_floods_hold_a_bounded_number_of_connections(door: Host) -> None:
    """Issue 41, 4: 20,007 HTTP initializes took the host from 42 to 289 MiB (each logical
    connection kept 60 s). Now a token holds at most 128, the oldest idle one making way."""
    import json

    import psutil

    from acpctl.host.registry import MAX_PER_TOKEN

    host = psutil.Process(door.process.pid)
    url = door.url.replace("ws:", "http:")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    headers = {**door.headers(), "Content-Type": "application/json", "Accept": "application/json"}

    async def flood(count: int) -> list[int]:
        async with aiohttp.ClientSession() as http:

            async def one() -> int:
                async with http.post(url, data=body, headers=headers) as answer:
                    await answer.read()
                    return answer.status

            statuses = []
            for _ in range(count // 20):  # 20 at once, as a busy client might
                statuses += await asyncio.gather(*(one() for _ in range(20)))
            return statuses

    run(flood(200))  # the agent started, the allocator warmed
    before = host.memory_info().rss
    statuses = run(flood(3000), timeout=120)
    grown = host.memory_info().rss - before
    assert set(statuses) == {200}, set(statuses)
    status = json.loads(cli("serve", "--status", "--json").stdout)
    held = sum(agent["clients"] for agent in status["agents"])
    assert held <= MAX_PER_TOKEN, held
    assert grown < 16 << 20, f"the host grew {grown >> 20} MiB"


def test_a_client_flooding_requests_does_not_starve_another(door: Host) -> None:
    """Issue 41, 5: while one client flooded 50k requests, another's answers took 4.7 s
    (here 0.56 s at the 95th percentile before: its request waited behind all of them).
    bench/door.py measures it; this bound is loose, to fail only on the starvation."""
    import json

    async def scenario() -> list[float]:
        async with aiohttp.ClientSession() as http:
            flooder = await http.ws_connect(door.url, headers=door.headers())
            other = await http.ws_connect(door.url, headers=door.headers())
            for socket in (flooder, other):
                await socket.send_str('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}')
                await socket.receive()
            new = {"cwd": "/tmp", "mcpServers": []}
            await flooder.send_str(
                json.dumps({"jsonrpc": "2.0", "id": -1, "method": "session/new", "params": new})
            )
            session = json.loads((await flooder.receive()).data)["result"]["sessionId"]
            mode = {"sessionId": session, "modeId": "echo"}

            async def flood() -> None:
                for n in range(50_000):
                    await flooder.send_str(
                        json.dumps(
                            {
                                "jsonrpc": "2.0",
                                "id": n,
                                "method": "session/set_mode",
                                "params": mode,
                            }
                        )
                    )

            flowing = asyncio.Event()

            async def drain() -> None:
                answered = 0
                async for _ in flooder:
                    answered += 1
                    if answered == 100:  # the flood is under way
                        flowing.set()

            flooding = asyncio.ensure_future(flood())
            draining = asyncio.ensure_future(drain())
            await asyncio.wait_for(flowing.wait(), 60)
            took = []
            for n in range(40):
                began = time.monotonic()
                await other.send_str(
                    json.dumps(
                        {"jsonrpc": "2.0", "id": n + 1, "method": "session/list", "params": {}}
                    )
                )
                await asyncio.wait_for(other.receive(), 10)
                took.append(time.monotonic() - began)
                await asyncio.sleep(0.02)
            flooding.cancel()
            draining.cancel()
            return sorted(took)

    took = run(scenario(), timeout=120)
    assert took[int(len(took) * 0.95)] < 0.2, took


# -- issue 51, 7: a flood from the right client's own address -------------------------------

FLOOD = Path(__file__).parent / "flood.py"


@contextlib.contextmanager
def flooding(mode: str, port: int, count: int) -> Iterator[None]:
    """tests/flood.py against the host on `port`, as a process of its own, once its sockets
    are open; ended after."""
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, str(FLOOD), mode, str(port), str(count), "120"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "flooding"
        yield
    finally:
        process.kill()
        process.wait()


async def _attempts(attempt: Any, tries: int = 5, deadline_s: float = 2.0) -> list[float | None]:
    """`attempt()` `tries` times: each one's seconds, None for one that did not get in
    within `deadline_s` (and why, printed)."""
    times: list[float | None] = []
    for _ in range(tries):
        began = time.monotonic()
        try:
            await asyncio.wait_for(attempt(), deadline_s)
            times.append(time.monotonic() - began)
        except (asyncio.TimeoutError, aiohttp.ClientError, OSError) as exc:
            print("the right client did not get in:", repr(exc))
            times.append(None)
    return times


def test_a_reopen_flood_from_the_right_client_s_own_address_locks_it_out_never(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """2,000 sockets without a token, from 127.0.0.1 as the right client is (behind an ssh
    forward or a proxy everyone is), each reopened as soon as the host closes it, the whole
    time the right client tries: it got in 0, 1 and 3 times in 5. At RLIMIT_NOFILE 1,024."""
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0", "--header-timeout", "1")
    with serving(monkeypatch, *args, until=LISTENING, open_files=1024) as (process, found, _):
        token = cli("serve", "--show-token").stdout.strip()
        host = Host(found.group(1).decode(), token, "", process)

        async def scenario() -> list[float | None]:
            async with aiohttp.ClientSession() as http:
                return await _attempts(lambda: gets_in(host, http))

        with flooding("reopen", port_of(host), 2000):
            times = run(scenario(), timeout=60)
        assert None not in times, times
        assert host.process.poll() is None


def test_half_open_tls_handshakes_are_under_the_door_s_limits(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """1,200 sockets that each send half a ClientHello and hold, against a host with its
    own TLS at RLIMIT_NOFILE 1,024: the right token got in 1 time in 5, and the host wrote
    "Too many open files" tracebacks. Handshakes are now counted, limited and timed."""
    import shutil
    import ssl

    from tests.test_host import self_signed

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = self_signed(tmp_path)
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0", *tls)
    wss = re.compile(rb"listening on (wss://127\.0\.0\.1:\d+/acp)")
    with serving(monkeypatch, *args, until=wss, open_files=1024) as (process, found, state):
        token = cli("serve", "--show-token").stdout.strip()
        host = Host(found.group(1).decode(), token, "", process)
        trusted = ssl.create_default_context(cafile=str(cert))

        async def attempt(http: aiohttp.ClientSession) -> None:
            async with http.ws_connect(host.url, headers=host.headers(), ssl=trusted) as socket:
                await socket.send_str('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}')
                answer = await socket.receive()
                assert answer.type == aiohttp.WSMsgType.TEXT and '"result"' in answer.data

        async def scenario() -> list[float | None]:
            async with aiohttp.ClientSession() as http:
                return await _attempts(lambda: attempt(http))

        with flooding("half-tls", port_of(host), 1200):
            times = run(scenario(), timeout=60)
        assert None not in times, times
        assert host.process.poll() is None
    logged = "".join(p.read_text() for p in (state / "logs").rglob("*.log"))
    assert "Traceback" not in logged and "Too many open files" not in logged


def test_a_client_s_own_burst_of_a_hundred_connections_is_never_cut(door: Host) -> None:
    async def scenario() -> list[float]:
        async with aiohttp.ClientSession() as http:
            return await asyncio.gather(*(gets_in(door, http) for _ in range(100)))

    assert len(run(scenario(), timeout=120)) == 100


def test_a_thousand_idle_authenticated_clients_are_served(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One host serves 1,000 idle clients that have authenticated, at RLIMIT_NOFILE 4,096:
    100 on the controller's token and 100 on the observer's (raw WebSocket), 100 pages on
    each of 4 paired devices (cookie, key and the page's Origin), and 400 on the unix
    socket; then one more gets in. It took 64 TCP connections in all before."""
    import psutil

    from acpctl import protocol as acp
    from tests.test_host import RawClient, unix_client

    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0")
    with serving(monkeypatch, *args, until=LISTENING, open_files=4096) as (process, found, _):
        url = found.group(1).decode()
        base = url.replace("ws://", "http://").removesuffix("/acp")
        controller = cli("serve", "--show-token").stdout.strip()
        observer = cli("serve", "--show-token", "--observer").stdout.strip()
        host = Host(url, controller, observer, process)
        codes = []
        for n in range(4):
            shown = cli("serve", "--pair", "--name", f"phone {n}").stdout
            address = next(line for line in shown.splitlines() if line.startswith("http"))
            codes.append(address.split("#", 1)[1])
        before = psutil.Process(process.pid).memory_info().rss

        async def scenario() -> int:
            async with contextlib.AsyncExitStack() as stack:
                unlimited = aiohttp.TCPConnector(limit=0)  # aiohttp's own: 100 at once
                http = await stack.enter_async_context(aiohttp.ClientSession(connector=unlimited))
                devices = []
                for code in codes:
                    async with http.post(
                        base + "/pair", json={"code": code}, headers={"Origin": base}
                    ) as paired:
                        cookie = paired.cookies["acpctl-device"].value
                        devices.append((cookie, (await paired.json())["key"]))
                http.cookie_jar.clear()

                async def held(**options: Any) -> None:
                    socket = await stack.enter_async_context(http.ws_connect(url, **options))
                    client = RawClient(socket)
                    answer = await client.request(acp.INITIALIZE, {"protocolVersion": 1})
                    assert "result" in answer, answer

                for token in (controller, observer):
                    for _ in range(100):
                        await held(headers={"Authorization": f"Bearer {token}"})
                for cookie, key in devices:
                    page = {"Cookie": f"acpctl-device={cookie}", "Origin": base}
                    protocols = (acp.WEBSOCKET_PAGE, acp.WEBSOCKET_DEVICE_KEY + key)
                    for _ in range(100):
                        await held(headers=page, protocols=protocols)
                for _ in range(400):
                    client = await stack.enter_async_context(unix_client())
                    answer = await client.request(acp.INITIALIZE, {"protocolVersion": 1})
                    assert "result" in answer, answer
                shown = await asyncio.to_thread(cli, "serve", "--status", "--json")
                status = json.loads(shown.stdout)
                assert sum(agent["clients"] for agent in status["agents"]) >= 1000, status
                await gets_in(host, http)  # and one more
                return int(psutil.Process(process.pid).memory_info().rss)

        grown = run(scenario(), timeout=240) - before
        print(f"the host grew {grown / 1000 / 1024:.1f} KiB an idle client")  # bench/door.py
