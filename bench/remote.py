"""A remote agent against the local relay (issue 29), on loopback.

- A prompt turn (the demo agent, one short answer): `run --acp` with the agent behind it
  (the local relay), against `run --acp` for a remote agent, which links to `acpctl serve`
  over WebSocket or Streamable HTTP (the same demo agent behind the host).
- Streaming: a turn of `flood 20000` (20,000 chunks as fast as the agent makes them), the
  same three ways, as chunks a second.
- Reconnect: a WebSocket remote through a TCP proxy that cuts the connection; from the cut
  to the answer of a prompt sent at that moment (it waits for the link to be live again).

Every configuration is interleaved in each repetition (in order, then reversed).

    python bench/remote.py [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from host import add_agent, host, listening_url, run_acp
from rawpeer import (
    ACPCTL_COMMAND,
    DEMO,
    Peer,
    agents_add,
    interleaved,
    now,
    percentile,
    private_home,
)

from tests.fault_proxy import FaultProxy

TURNS = 40
FLOOD = 20000
CUTS = 10
CONFIGS = ("local relay", "remote, WebSocket", "remote, Streamable HTTP")


def add_remote(name: str, url: str, token_file: Path) -> None:
    agents_add(name, "--url", url, "--token-file", str(token_file))


async def opened(agent: str, cwd: str) -> tuple[Peer, str]:
    peer = await Peer.start(run_acp(agent))
    await peer.call("initialize", {"protocolVersion": 1})
    answer = await peer.call("session/new", {"cwd": cwd, "mcpServers": []})
    return peer, answer["result"]["sessionId"]


def prompt(session: str, text: str) -> dict[str, Any]:
    return {"sessionId": session, "prompt": [{"type": "text", "text": text}]}


async def turns(agent: str, cwd: str) -> list[float]:
    peer, session = await opened(agent, cwd)
    times = []
    for _ in range(TURNS):
        begin = now()
        answer = await peer.call("session/prompt", prompt(session, "hi"))
        assert "result" in answer, answer
        times.append(now() - begin)
    await peer.close()
    return times


async def streaming(agent: str, cwd: str) -> float:
    """Chunks a second through one flood turn."""
    peer, session = await opened(agent, cwd)
    begin = now()
    answer, before = await peer.response(
        peer.send("session/prompt", prompt(session, f"flood {FLOOD}"))
    )
    elapsed = now() - begin
    assert "result" in answer and before >= FLOOD, (answer, before)
    await peer.close()
    return FLOOD / elapsed


async def reconnects(agent: str, cwd: str, proxy: FaultProxy) -> list[float]:
    """From each cut of an idle link to the answer of a prompt sent at the cut: the
    prompt waits for the link to come back (reconnect, resume), then runs."""
    peer, session = await opened(agent, cwd)
    took = []
    for _ in range(CUTS):
        await asyncio.sleep(0.05)
        proxy.cut()
        cut = now()
        answer = await peer.call("session/prompt", prompt(session, "hi"))
        took.append(now() - cut)
        assert "result" in answer, answer
    await peer.close()
    return took


async def main(reps: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        add_agent("demo-direct", DEMO, {})
        with host(
            "--listen", "127.0.0.1:0", "--idle-stop", "600", "--allow-host", "127.0.0.2"
        ) as process:
            url = await listening_url(process)
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            token = subprocess.run(
                [*ACPCTL_COMMAND, "serve", "--show-token"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            token_file = Path(scratch) / "token"
            token_file.write_text(token)
            add_remote("demo-ws", f"{url}/demo-direct", token_file)
            add_remote("demo-http", f"{url.replace('ws://', 'http://')}/demo-direct", token_file)
            proxy = FaultProxy(port)
            await proxy.start("127.0.0.2", port)
            add_remote("demo-cut", f"ws://127.0.0.2:{port}/acp/demo-direct", token_file)
            agents = dict(zip(CONFIGS, ("demo-direct", "demo-ws", "demo-http"), strict=True))
            turn: dict[str, list[float]] = {config: [] for config in CONFIGS}
            rate: dict[str, list[float]] = {config: [] for config in CONFIGS}
            cuts: list[float] = []
            for rep in range(reps):
                for config in interleaved(rep, list(CONFIGS)):
                    turn[config] += await turns(agents[config], scratch)
                    rate[config].append(await streaming(agents[config], scratch))
                cuts += await reconnects("demo-cut", scratch, proxy)
                print(f"repetition {rep + 1} of {reps}", file=sys.stderr)
            await proxy.stop()
    report(turn, rate, cuts, reps)


def report(
    turn: dict[str, list[float]], rate: dict[str, list[float]], cuts: list[float], reps: int
) -> None:
    base = statistics.median(turn["local relay"])
    print("| a prompt turn, demo agent | min / median / p95 | median - local relay |")
    print("|---|---|---|")
    for config, values in turn.items():
        print(
            f"| {config} | {min(values) * 1000:.2f} / {statistics.median(values) * 1000:.2f} / "
            f"{percentile(values, 0.95) * 1000:.2f} ms | "
            f"{(statistics.median(values) - base) * 1000:+.2f} ms |"
        )
    base_rate = statistics.median(rate["local relay"])
    print(f"\n| streaming, flood {FLOOD} | min / median chunks/s | ratio of medians |")
    print("|---|---|---|")
    for config, values in rate.items():
        print(
            f"| {config} | {min(values):,.0f} / {statistics.median(values):,.0f} | "
            f"{statistics.median(values) / base_rate:.2f}x |"
        )
    print(
        f"\n| reconnect: a cut to a prompt's answer ({len(cuts)} cuts) | min | median | p95 |"
        "\n|---|---|---|---|"
    )
    print(
        f"| remote, WebSocket, through a cutting proxy | {min(cuts) * 1000:.1f} ms | "
        f"{statistics.median(cuts) * 1000:.1f} ms | {percentile(cuts, 0.95) * 1000:.1f} ms |"
    )
    print(f"\n{reps} repetitions, interleaved; {TURNS} turns a connection.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    with private_home():
        started = time.monotonic()
        asyncio.run(main(parser.parse_args().reps))
        print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
