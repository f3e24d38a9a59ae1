"""Relay overhead: acpctl between client and the demo agent, against the agent direct.

Measures, in one run: (a) spawn to initialize response; (b) round trip of a trivial
request (p50, p99); (c) throughput of a stream of agent_message_chunk notifications, with
history recording on and off. Prints a Markdown table with the ratios.

    python bench/relay.py [--chunks 100000] [--pings 2000] [--spawns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import ACPCTL, DEMO, Peer, now, percentile, private_home


async def spawn_to_initialize(argv: list[str]) -> float:
    started = now()
    peer = await Peer.start(argv)
    await peer.call("initialize", {"protocolVersion": 1})
    elapsed = now() - started
    await peer.close()
    return elapsed


async def round_trips(argv: list[str], count: int) -> list[float]:
    peer = await Peer.start(argv)
    await peer.call("initialize", {"protocolVersion": 1})
    times = []
    for _ in range(count):
        started = now()
        await peer.call("_demo/ping", {})
        times.append(now() - started)
    await peer.close()
    return times


async def stream(argv: list[str], chunks: int) -> float:
    """Notifications per second delivered to the client during one flood prompt."""
    peer = await Peer.start(argv)
    await peer.call("initialize", {"protocolVersion": 1})
    session = (await peer.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]
    started = now()
    msg_id = peer.send(
        "session/prompt",
        {
            "sessionId": session["sessionId"],
            "prompt": [{"type": "text", "text": f"flood {chunks}"}],
        },
    )
    _, received = await peer.response(msg_id)
    elapsed = now() - started
    await peer.close()
    assert received == chunks, (received, chunks)
    return chunks / elapsed


async def main(chunks: int, pings: int, spawns: int) -> None:
    direct_init = statistics.median([await spawn_to_initialize(DEMO) for _ in range(spawns)])
    relay_init = statistics.median([await spawn_to_initialize(ACPCTL) for _ in range(spawns)])
    direct_rt = await round_trips(DEMO, pings)
    relay_rt = await round_trips(ACPCTL, pings)
    direct_rate = await stream(DEMO, chunks)
    recorded_rate = await stream(ACPCTL, chunks)
    unrecorded_rate = await stream([*ACPCTL, "--no-history"], chunks)

    ms = 1000.0
    print("| measure | direct | through acpctl | ratio | added |\n|---|---|---|---|---|")
    print(
        f"| spawn to initialize response (median of {spawns}) | {direct_init * ms:.1f} ms "
        f"| {relay_init * ms:.1f} ms | {relay_init / direct_init:.2f}x "
        f"| {(relay_init - direct_init) * ms:+.1f} ms |"
    )
    for label, fraction in (("p50", 0.5), ("p99", 0.99)):
        d, r = percentile(direct_rt, fraction), percentile(relay_rt, fraction)
        print(
            f"| round trip {label} ({pings} requests) | {d * ms:.3f} ms | {r * ms:.3f} ms "
            f"| {r / d:.2f}x | {(r - d) * ms:+.3f} ms |"
        )
    print(
        f"| stream of {chunks} chunks, history on | {direct_rate:,.0f}/s "
        f"| {recorded_rate:,.0f}/s | {recorded_rate / direct_rate:.2f}x | |"
    )
    print(
        f"| stream of {chunks} chunks, history off | {direct_rate:,.0f}/s "
        f"| {unrecorded_rate:,.0f}/s | {unrecorded_rate / direct_rate:.2f}x | |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--pings", type=int, default=2000)
    parser.add_argument("--spawns", type=int, default=10)
    args = parser.parse_args()
    with private_home():
        asyncio.run(main(args.chunks, args.pings, args.spawns))
