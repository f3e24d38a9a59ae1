"""The session host's door under hostile load (issues 41 and 51), against the same host
quiet.

- Getting in: a client with the right token opens a WebSocket and has initialize answered,
  20 times: quiet; while 2,000 sockets without a token, from its own address (127.0.0.1),
  are reopened as fast as the host closes them (half begin a request and never end it);
  while requests with a wrong token come as fast as they are answered; and against a host
  with its own TLS while 1,200 sockets hold half a ClientHello. Every flood runs the whole
  time the client tries (tests/flood.py, a process of its own, as an attacker's is), and
  the host runs at RLIMIT_NOFILE 1,024, a desktop's default. How often it got in within
  2 s, the median and the 95th percentile.
- Memory per idle client: the host's resident memory grown by 1,000 clients that have
  initialized and stay (on the unix socket), divided by 1,000.
- Answers while another floods: one client's session/list, quiet, and while another client
  on the same agent sends 50,000 session/set_mode requests as fast as it can.
- Memory: the host's resident memory after 3,000 HTTP initializes with the right token.

Every flood is on 127.0.0.1, bounded in count and time. Each repetition measures the quiet
baseline and the flood in turn, on a fresh host.

    python bench/door.py [--reps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import ACPCTL_COMMAND, percentile, private_home

GET_IN_WITHIN_S = 2.0
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})


FLOOD = Path(__file__).resolve().parent.parent / "tests" / "flood.py"
OPEN_FILES = 1024


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


@contextlib.contextmanager
def listening(tls: tuple[Path, Path] | None = None) -> Iterator[tuple[str, str, int]]:
    """A host on a free loopback port (its own TLS with `tls`, a certificate and its key),
    at RLIMIT_NOFILE 1,024: its URL, the controller token and its pid."""
    secure = ["--tls-cert", str(tls[0]), "--tls-key", str(tls[1])] if tls else []
    process = subprocess.Popen(
        [*ACPCTL_COMMAND, "serve", "--listen", "127.0.0.1:0", "--idle-stop", "0", *secure],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_limited,
    )
    assert process.stderr is not None
    while "ws" not in (line := process.stderr.readline()) or "://127" not in line:
        assert line, "acpctl serve ended"
    url = line[line.index("ws") :].split()[0]
    token = subprocess.run(
        [*ACPCTL_COMMAND, "serve", "--show-token"], capture_output=True, text=True, check=True
    ).stdout.strip()
    # Its log lines are read on, so that a flood of them never blocks the host.
    drain = subprocess.Popen(["cat"], stdin=process.stderr, stdout=subprocess.DEVNULL)
    try:
        yield url, token, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        drain.wait(10)


async def get_in(
    http: aiohttp.ClientSession, url: str, token: str, trusted: ssl.SSLContext | bool = True
) -> float | None:
    """Seconds to open the WebSocket and have initialize answered; None: not within 2 s."""
    began = time.perf_counter()

    async def initialized() -> bool:
        headers = {"Authorization": f"Bearer {token}"}
        async with http.ws_connect(url, headers=headers, ssl=trusted) as socket:
            await socket.send_str(INITIALIZE)
            answer = await socket.receive()
            return answer.type == aiohttp.WSMsgType.TEXT and '"result"' in answer.data

    try:
        if not await asyncio.wait_for(initialized(), GET_IN_WITHIN_S):
            return None
    except (asyncio.TimeoutError, aiohttp.ClientError, OSError):
        return None
    return time.perf_counter() - began


@contextlib.contextmanager
def flooding(mode: str, port: int, count: int) -> Iterator[None]:
    """tests/flood.py against `port`, from now until the block ends."""
    process = subprocess.Popen(
        [sys.executable, str(FLOOD), mode, str(port), str(count), "300"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "flooding"
        yield
    finally:
        process.kill()
        process.wait()


async def getting_in(
    url: str, token: str, flood: str, trusted: ssl.SSLContext | bool = True, tries: int = 20
) -> list[float | None]:
    times: list[float | None] = []
    async with aiohttp.ClientSession() as http:

        async def wrong_tokens() -> None:
            wrong = {"Authorization": "Bearer wrong"}
            while True:
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(url.replace("ws:", "http:"), headers=wrong) as got:
                        await got.read()

        flooder = asyncio.ensure_future(wrong_tokens()) if flood == "wrong tokens" else None
        for _ in range(tries):
            times.append(await get_in(http, url, token, trusted))
        if flooder is not None:
            flooder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flooder
    return times


async def memory_per_client(pid: int, count: int = 1000) -> str:
    """KiB the host grew by, an idle client: `count` unix-socket clients initialized and
    held (or as many as the host took, said)."""
    from acpctl import jsonrpc
    from acpctl.remote.host_socket import open_host_socket

    host = psutil.Process(pid)
    held = []
    before: int = host.memory_info().rss
    for _ in range(count):
        try:
            reader, writer = await open_host_socket(start=False)
            writer.write(jsonrpc.encode(jsonrpc.request(0, "_acpctl/connect", {"agent": None})))
            connected = await reader.readline()
            writer.write(INITIALIZE.encode() + b"\n")
            if b'"error"' in connected or not await reader.readline():
                break
        except OSError:
            break
        held.append(writer)
    after: int = host.memory_info().rss
    for writer in held:
        writer.close()
    per = (after - before) / max(len(held), 1) / 1024
    return f"{per:.1f} KiB" + ("" if len(held) == count else f" ({len(held)} of {count} held)")


async def answers_while(url: str, token: str, flooding: bool) -> list[float]:
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http:
        flooder = await http.ws_connect(url, headers=headers)
        other = await http.ws_connect(url, headers=headers)
        for socket in (flooder, other):
            await socket.send_str(INITIALIZE)
            await socket.receive()
        new = {"jsonrpc": "2.0", "id": -1, "method": "session/new"}
        await flooder.send_str(json.dumps({**new, "params": {"cwd": "/tmp", "mcpServers": []}}))
        session = json.loads((await flooder.receive()).data)["result"]["sessionId"]
        mode = {"sessionId": session, "modeId": "echo"}

        async def flood() -> None:
            for n in range(50_000):
                message = {"jsonrpc": "2.0", "id": n, "method": "session/set_mode", "params": mode}
                await flooder.send_str(json.dumps(message))

        async def drain() -> None:
            async for _ in flooder:
                pass

        tasks = [asyncio.ensure_future(flood()), asyncio.ensure_future(drain())] if flooding else []
        await asyncio.sleep(0.2)
        took = []
        for n in range(60):
            began = time.perf_counter()
            ask = {"jsonrpc": "2.0", "id": n + 1, "method": "session/list", "params": {}}
            await other.send_str(json.dumps(ask))
            await asyncio.wait_for(other.receive(), 30)
            took.append(time.perf_counter() - began)
            await asyncio.sleep(0.02)
        for task in tasks:
            task.cancel()
        await flooder.close()
        await other.close()
        return took


async def initialize_flood(url: str, token: str, pid: int, count: int) -> float:
    """MiB the host grew by over `count` HTTP initializes (20 at a time)."""
    host = psutil.Process(pid)
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json",
    }
    async with aiohttp.ClientSession() as http:

        async def one() -> None:
            with contextlib.suppress(aiohttp.ClientError):
                async with http.post(
                    url.replace("ws:", "http:"), data=INITIALIZE, headers=headers
                ) as answer:
                    await answer.read()

        for _ in range(10):
            await asyncio.gather(*(one() for _ in range(20)))  # the agent started, warmed
        before: int = host.memory_info().rss
        for _ in range(count // 20):
            await asyncio.gather(*(one() for _ in range(20)))
        after: int = host.memory_info().rss
        return (after - before) / 2**20


def shown(times: list[float | None]) -> str:
    got = [t for t in times if t is not None]
    if not got:
        return f"0/{len(times)} in"
    median, p95 = statistics.median(got) * 1000, percentile(got, 0.95) * 1000
    return f"{len(got)}/{len(times)} in, median {median:.0f} ms, p95 {p95:.0f} ms"


def self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[str]] = {}
    quiet_p95: list[float] = []
    flood_p95: list[float] = []
    grown: list[float] = []
    per_client: list[str] = []
    with private_home(), tempfile.TemporaryDirectory() as scratch:
        tls = self_signed(Path(scratch))
        trusted = ssl.create_default_context(cafile=str(tls[0]))
        for _ in range(args.reps):
            for flood in ("quiet", "2,000 reopened, same address", "wrong tokens"):
                with listening() as (url, token, _):
                    port = int(url.rsplit(":", 1)[1].split("/")[0])
                    with (
                        flooding("reopen", port, 2000)
                        if flood.startswith("2,000")
                        else contextlib.nullcontext()
                    ):
                        times = asyncio.run(getting_in(url, token, flood))
                rows.setdefault(f"getting in, {flood}", []).append(shown(times))
            for flood in ("quiet", "1,200 half-open handshakes"):
                with listening(tls) as (url, token, _):
                    port = int(url.rsplit(":", 1)[1].split("/")[0])
                    with (
                        flooding("half-tls", port, 1200)
                        if flood.startswith("1,200")
                        else contextlib.nullcontext()
                    ):
                        times = asyncio.run(getting_in(url, token, flood, trusted))
                rows.setdefault(f"getting in over TLS, {flood}", []).append(shown(times))
            with listening() as (url, token, _):
                quiet_p95.append(percentile(asyncio.run(answers_while(url, token, False)), 0.95))
            with listening() as (url, token, _):
                flood_p95.append(percentile(asyncio.run(answers_while(url, token, True)), 0.95))
            with listening() as (url, token, pid):
                grown.append(asyncio.run(initialize_flood(url, token, pid, 3000)))
            with listening() as (url, token, pid):
                per_client.append(asyncio.run(memory_per_client(pid)))
    print("| measure | each repetition |")
    print("|---|---|")
    for name, cells in rows.items():
        print(f"| {name} (within {GET_IN_WITHIN_S:g} s) | {'; '.join(cells)} |")
    ratios = [f / q for f, q in zip(flood_p95, quiet_p95, strict=True)]
    print(
        f"| answers p95, quiet | min {min(quiet_p95) * 1000:.1f} ms, "
        f"median {statistics.median(quiet_p95) * 1000:.1f} ms |"
    )
    print(
        f"| answers p95, another client flooding 50k | min {min(flood_p95) * 1000:.1f} ms, "
        f"median {statistics.median(flood_p95) * 1000:.1f} ms "
        f"({statistics.median(ratios):.1f}x quiet) |"
    )
    print(f"| host grown by 3,000 initializes | {', '.join(f'{g:.1f} MiB' for g in grown)} |")
    print(f"| memory an idle client (1,000 held) | {', '.join(per_client)} |")


if __name__ == "__main__":
    main()
