"""Memory of `acpctl run --acp` (its own process, not the agent's) with the demo agent:
after initialize, with 50 sessions open (each after a short turn), over 1,000 sessions
opened, given a turn and closed one after another (RSS after every 250), and while the
agent streams a turn of 200,000 updates (about 40 MiB) to an editor that reads none of it
for a second and a half (how far acpctl reads ahead of its editor). Each configuration
(history on, `--no-history`) runs in its own process, interleaved over repetitions; min
and median.

    python bench/memory.py [--reps 3] [--open 50] [--cycle 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import ACPCTL, Peer, private_home

MiB = 2**20
UNREAD = 200_000


async def session_with_a_turn(peer: Peer) -> str:
    sid = (await peer.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"]
    await peer.call(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
    )
    return str(sid)


async def measure(argv: list[str], open_count: int, cycle: int) -> dict[str, float]:
    peer = await Peer.start(argv)
    process = psutil.Process(peer.process.pid)
    await peer.call("initialize", {"protocolVersion": 1})
    rss = {"after initialize": process.memory_info().rss / MiB}
    for _ in range(open_count):
        await session_with_a_turn(peer)
    rss[f"{open_count} sessions open"] = process.memory_info().rss / MiB
    for index in range(1, cycle + 1):
        sid = await session_with_a_turn(peer)
        await peer.call("session/close", {"sessionId": sid})
        if index % (cycle // 4) == 0:
            rss[f"{index} opened and closed"] = process.memory_info().rss / MiB
    sid = (await peer.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": f"burst {UNREAD}"}]}
    turn = peer.send("session/prompt", prompt)
    await asyncio.sleep(1.5)
    rss[f"a turn of {UNREAD:,} updates the editor does not read"] = process.memory_info().rss / MiB
    await peer.response(turn)
    await peer.close()
    return rss


async def main(args: argparse.Namespace) -> None:
    configs = {"history": ACPCTL, "--no-history": [*ACPCTL, "--no-history"]}
    results: dict[str, dict[str, list[float]]] = {name: {} for name in configs}
    for rep in range(args.reps):
        for name in configs if rep % 2 == 0 else reversed(configs):
            for label, value in (await measure(configs[name], args.open, args.cycle)).items():
                results[name].setdefault(label, []).append(value)
    labels = list(results["history"])
    print("| RSS of acpctl (MiB, min / median) | history on | --no-history |\n|---|---|---|")
    for label in labels:
        cells = [
            f"{min(results[name][label]):.1f} / {statistics.median(results[name][label]):.1f}"
            for name in configs
        ]
        print(f"| {label} | {' | '.join(cells)} |")
    print(f"\n{args.reps} repetitions, the configurations interleaved.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--open", type=int, default=50)
    parser.add_argument("--cycle", type=int, default=1000)
    with private_home():
        asyncio.run(main(parser.parse_args()))
