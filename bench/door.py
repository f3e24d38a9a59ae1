"""The session host's door under hostile load (issue 41), against the same host quiet.

- Getting in: a client with the right token opens a WebSocket and has initialize
  answered, quiet, then while 1,000 sockets without a token are held open (half of them
  having asked once and been refused), then after 200 requests with a wrong token. How
  often it got in within 2 s, and how long it took.
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
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import ACPCTL_COMMAND, percentile, private_home

GET_IN_WITHIN_S = 2.0
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})


@contextlib.contextmanager
def listening() -> Iterator[tuple[str, str, int]]:
    """A host on a free loopback port: its URL, the controller token and its pid."""
    process = subprocess.Popen(
        [*ACPCTL_COMMAND, "serve", "--listen", "127.0.0.1:0", "--idle-stop", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    while "ws://" not in (line := process.stderr.readline()):
        assert line, "acpctl serve ended"
    url = line[line.index("ws://") :].split()[0]
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


async def get_in(http: aiohttp.ClientSession, url: str, token: str) -> float | None:
    """Seconds to open the WebSocket and have initialize answered; None: not within 2 s."""
    began = time.perf_counter()

    async def initialized() -> bool:
        headers = {"Authorization": f"Bearer {token}"}
        async with http.ws_connect(url, headers=headers) as socket:
            await socket.send_str(INITIALIZE)
            answer = await socket.receive()
            return answer.type == aiohttp.WSMsgType.TEXT and '"result"' in answer.data

    try:
        if not await asyncio.wait_for(initialized(), GET_IN_WITHIN_S):
            return None
    except (asyncio.TimeoutError, aiohttp.ClientError, OSError):
        return None
    return time.perf_counter() - began


async def getting_in(url: str, token: str, flood: str, tries: int = 8) -> list[float | None]:
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    held: list[asyncio.StreamWriter] = []
    times: list[float | None] = []
    async with aiohttp.ClientSession() as http:
        for _ in range(tries):
            if flood == "sockets":
                for n in range(1000 // tries):
                    with contextlib.suppress(OSError):
                        _, writer = await asyncio.open_connection("127.0.0.1", port)
                        if n % 2:
                            writer.write(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                        held.append(writer)
            elif flood == "wrong tokens":
                for _ in range(200 // tries):
                    with contextlib.suppress(aiohttp.ClientError):
                        wrong = {"Authorization": "Bearer wrong"}
                        async with http.get(url.replace("ws:", "http:"), headers=wrong) as got:
                            await got.read()
            times.append(await get_in(http, url, token))
    for writer in held:
        writer.close()
    return times


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
    slowest = f", slowest {max(got) * 1000:.0f} ms" if got else ""
    return f"{len(got)}/{len(times)} in{slowest}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[str]] = {}
    quiet_p95: list[float] = []
    flood_p95: list[float] = []
    grown: list[float] = []
    with private_home():
        for _ in range(args.reps):
            for flood in ("quiet", "sockets", "wrong tokens"):
                with listening() as (url, token, _):
                    times = asyncio.run(getting_in(url, token, flood))
                rows.setdefault(f"getting in, {flood}", []).append(shown(times))
            with listening() as (url, token, _):
                quiet_p95.append(percentile(asyncio.run(answers_while(url, token, False)), 0.95))
            with listening() as (url, token, _):
                flood_p95.append(percentile(asyncio.run(answers_while(url, token, True)), 0.95))
            with listening() as (url, token, pid):
                grown.append(asyncio.run(initialize_flood(url, token, pid, 3000)))
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


if __name__ == "__main__":
    main()
