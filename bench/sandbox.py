"""What the sandbox costs (issue 44): the demo agent through `acpctl run --acp`, in its
bubblewrap sandbox against without one, interleaved in each repetition (in order, then
reversed).

- start: from the spawn of `run --acp` to initialize's answer, then to session/new's (the
  editor's wait before a thread opens; bwrap's setup is on this path);
- a prompt turn, in one connection (TURNS turns a connection).

    python bench/sandbox.py [--reps 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
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

TURNS = 40
CONFIGS = ("without", "sandboxed")


async def start(agent: str, cwd: str) -> tuple[float, float, list[float]]:
    """Times to initialize's answer and to session/new's; then TURNS prompt turns."""
    begin = now()
    peer = await Peer.start([*ACPCTL_COMMAND, "run", "--acp", "--agent", agent])
    initialized = await peer.call("initialize", {"protocolVersion": 1})
    assert "result" in initialized, initialized
    first = now() - begin
    new = await peer.call("session/new", {"cwd": cwd, "mcpServers": []})
    assert "result" in new, new
    opened = now() - begin
    session = new["result"]["sessionId"]
    turns = []
    for _ in range(TURNS):
        began = now()
        turn = await peer.call(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
        )
        assert "result" in turn, turn
        turns.append(now() - began)
    await peer.close()
    return first, opened, turns


def cell(values: list[float]) -> str:
    median, p95 = statistics.median(values), percentile(values, 0.95)
    return f"{min(values) * 1000:.2f} / {median * 1000:.2f} / {p95 * 1000:.2f} ms"


async def main(reps: int) -> None:
    from acpctl import sandbox

    problem = sandbox.engine_problem()
    if problem is not None:
        sys.exit(f"no sandbox here: {problem}")
    agents_add("without", "--", *DEMO)
    agents_add("sandboxed", "--sandbox", "--", *DEMO)
    waits: dict[str, dict[str, list[float]]] = {
        wait: {config: [] for config in CONFIGS}
        for wait in ("spawn to initialize's answer", "spawn to session/new's answer", "turn")
    }
    with tempfile.TemporaryDirectory(dir="/var/tmp") as project:
        os.chdir(project)  # editors start run --acp in the project: the sandbox's root
        for rep in range(reps):
            for config in interleaved(rep, list(CONFIGS)):
                first, opened, turns = await start(config, project)
                waits["spawn to initialize's answer"][config].append(first)
                waits["spawn to session/new's answer"][config].append(opened)
                waits["turn"][config] += turns
            print(f"repetition {rep + 1} of {reps}", file=sys.stderr)
    print("| wait (min / median / p95) | without a sandbox | sandboxed | ratio of medians |")
    print("|---|---|---|---|")
    for wait, by_config in waits.items():
        ratio = statistics.median(by_config["sandboxed"]) / statistics.median(by_config["without"])
        label = "a prompt turn" if wait == "turn" else wait
        print(
            f"| {label} | {cell(by_config['without'])} | {cell(by_config['sandboxed'])} "
            f"| {ratio:.2f}x |"
        )
    print(f"\n{reps} starts each; {TURNS} turns a start.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=10)
    arguments = parser.parse_args()
    with private_home():
        asyncio.run(main(arguments.reps))
