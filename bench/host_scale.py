"""The session host under many clients and many sessions (issue 28): fan-out of one
session's turn to 0, 10 and 50 attached observers (the turn's time at the prompting client,
and when the last observer has the turn's last update), and the host's memory per idle
session (its own RSS, the agent's apart), on the demo agent over loopback WebSockets.
Fan-out sizes are interleaved in every repetition.

    python bench/host_scale.py [--reps 5] [--sessions 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import ACPCTL_COMMAND, as_installed, now

FANOUT = (0, 10, 50)
TURNS = 10
MiB = 1 << 20


class Client:
    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.next_id = 0

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        msg_id = self.next_id
        await self.socket.send_str(
            json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        )
        while True:
            message = json.loads((await self.socket.receive()).data)
            if message.get("id") == msg_id and "method" not in message:
                return dict(message)

    async def until_chunk(self, mark: str) -> None:
        """Until an agent_message_chunk with `mark` (the demo agent echoes the prompt a word
        a chunk: the mark ends the turn's last)."""
        while True:
            message = json.loads((await self.socket.receive()).data)
            update = message.get("params", {}).get("update", {})
            content = update.get("content")
            if isinstance(content, dict) and mark in str(content.get("text")):
                return


async def fanout(http: Any, url: str, headers: dict[str, str], observers: int) -> list[float]:
    owner = Client(await http.ws_connect(url, headers=headers))
    await owner.call("initialize", {"protocolVersion": 1})
    session = (await owner.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"][
        "sessionId"
    ]
    watchers = []
    for _ in range(observers):
        watcher = Client(await http.ws_connect(url, headers=headers))
        await watcher.call("initialize", {"protocolVersion": 1})
        await watcher.call(
            "session/attach", {"sessionId": session, "role": "observer", "historyPolicy": "none"}
        )
        watchers.append(watcher)
    times = []
    for turn in range(TURNS):
        mark = f"end{turn}x"
        begin = now()
        seen = [asyncio.ensure_future(w.until_chunk(mark)) for w in watchers]
        await owner.call(
            "session/prompt",
            {"sessionId": session, "prompt": [{"type": "text", "text": "hello " * 50 + mark}]},
        )
        if seen:
            await asyncio.gather(*seen)
        times.append(now() - begin)
    for client in [owner, *watchers]:
        await client.socket.close()
    return times


async def idle_sessions(
    http: Any, url: str, headers: dict[str, str], host_pid: int, count: int
) -> float:
    host = psutil.Process(host_pid)
    client = Client(await http.ws_connect(url, headers=headers))
    await client.call("initialize", {"protocolVersion": 1})
    await client.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    before = host.memory_info().rss
    for _ in range(count):
        await client.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    after = host.memory_info().rss
    await client.socket.close()
    return float(after - before) / count


async def main(args: argparse.Namespace) -> None:
    import aiohttp

    process = subprocess.Popen(
        [*ACPCTL_COMMAND, "serve", "--listen", "127.0.0.1:0", "--idle-stop", "0"],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    url = ""
    while not url:
        line = process.stderr.readline().decode()
        assert line, "acpctl serve ended"
        if "listening on ws://" in line:
            url = line.split("listening on ", 1)[1].split()[0] + "/demo"
    token = subprocess.run(
        [*ACPCTL_COMMAND, "serve", "--show-token"], capture_output=True, text=True, check=True
    ).stdout.strip()
    headers = {"Authorization": f"Bearer {token}"}
    results: dict[int, list[float]] = {n: [] for n in FANOUT}
    try:
        async with aiohttp.ClientSession() as http:
            # First, on a fresh host: memory freed by the fan-out would be reused.
            per_session = await idle_sessions(http, url, headers, process.pid, args.sessions)
            for rep in range(args.reps):
                for observers in FANOUT if rep % 2 == 0 else reversed(FANOUT):
                    results[observers] += await fanout(http, url, headers, observers)
                print(f"fan-out: repetition {rep + 1} of {args.reps}", file=sys.stderr)
    finally:
        process.terminate()
        process.wait(30)
    base = statistics.median(results[0])
    print("| observers | a turn, until the last observer has it (min / median) | ratio to none |")
    print("|---|---|---|")
    for observers, values in results.items():
        median = statistics.median(values)
        print(
            f"| {observers} | {min(values) * 1000:.1f} / {median * 1000:.1f} ms | "
            f"{median / base:.2f}x |"
        )
    print(
        f"\nThe host's memory per idle session: {per_session / 1024:.1f} KiB "
        f"({args.sessions} sessions opened on the demo agent; the agent's own memory apart)."
    )
    print(f"{args.reps} repetitions of {TURNS} turns, fan-out sizes interleaved.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=1000)
    as_installed()
    with tempfile.TemporaryDirectory(prefix="acpb", dir="/tmp") as root:
        for variable in ("ACPCTL_CONFIG_DIR", "ACPCTL_DATA_DIR", "ACPCTL_STATE_DIR"):
            os.environ[variable] = os.path.join(root, variable.lower()[7:11])
        os.environ.pop("ACPCTL_SESSION_DIR", None)
        asyncio.run(main(parser.parse_args()))
