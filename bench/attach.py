"""`acpctl sessions attach`: the waits a person has at it (issue 53, 3).

- To the history on screen: from the spawn of `acpctl sessions attach ID` (its output a
  pipe, so an observer) to the last line of the session's history (HISTORY_TURNS turns of
  the demo agent) on its output.
- A turn seen: an editor's `run --acp` through the host prompts; from the prompt sent to
  the answer on the attached output, TURNS turns a repetition.

Both on this machine's session host (`acpctl serve`, the demo agent). Only the command
line and ACP over `run --acp`'s stdio are used, so the script runs as well against an
older acpctl:

    python bench/attach.py [--reps 9]
    python bench/revisions.py /tmp/base bench/attach.py --this-script --reps 9
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from host import host as session_host  # `acpctl serve`: the older name works in every revision
from rawpeer import ACPCTL_COMMAND, DEMO, Peer, agents_add, now, private_home

HISTORY_TURNS = 20
TURNS = 20


async def editor() -> Peer:
    """An editor's `run --acp` through the host (config.toml's host = true)."""
    peer = await Peer.start([*ACPCTL_COMMAND, "run", "--acp", "--agent", "demo"])
    await peer.call("initialize", {"protocolVersion": 1})
    return peer


async def prompt(peer: Peer, session: str, text: str) -> None:
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    answer = await peer.call("session/prompt", params)
    assert "result" in answer, answer


async def attached(session: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *ACPCTL_COMMAND,
        "sessions",
        "attach",
        session,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def shown(process: asyncio.subprocess.Process, text: bytes) -> None:
    """Until `text` is on the output (a line the renderer has not ended yet included)."""
    assert process.stdout is not None
    seen = b""
    while text not in seen:
        chunk = await process.stdout.read(65536)
        assert chunk, f"attach ended before {text!r}"
        seen = seen[-len(text) :] + chunk


async def ended(process: asyncio.subprocess.Process) -> None:
    process.send_signal(signal.SIGINT)  # as Ctrl-C leaves
    try:
        await asyncio.wait_for(process.wait(), 10)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()


async def measure(reps: int, cwd: str) -> tuple[list[float], list[float]]:
    peer = await editor()
    new = await peer.call("session/new", {"cwd": cwd, "mcpServers": []})
    session = new["result"]["sessionId"]
    for n in range(HISTORY_TURNS):
        await prompt(peer, session, f"history {n}")
    last = f"You said: history {HISTORY_TURNS - 1}".encode()
    to_history: list[float] = []
    turn_seen: list[float] = []
    for rep in range(reps):
        begin = now()
        watching = await attached(session)
        await shown(watching, last)
        to_history.append(now() - begin)
        for n in range(TURNS):
            text = f"seen {rep} {n}"
            begin = now()
            peer.send(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
            )
            await shown(watching, f"You said: {text}".encode())
            turn_seen.append(now() - begin)
            await peer.until(lambda m: "id" in m and "method" not in m)
        await ended(watching)
    await peer.close()
    return to_history, turn_seen


def cell(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"{min(values) * 1000:.2f} / {statistics.median(values) * 1000:.2f} / {p95 * 1000:.2f} ms"
    )


async def main(args: argparse.Namespace) -> None:
    agents_add("demo", "--", *DEMO)
    config = Path(os.environ["ACPCTL_CONFIG_DIR"]) / "config.toml"
    config.write_text("host = true\n" + config.read_text())
    with session_host():
        to_history, turn_seen = await measure(args.reps, os.getcwd())
    print("| attach | min / median / p95 |\n|---|---|")
    print(f"| to the history on screen ({HISTORY_TURNS} turns) | {cell(to_history)} |")
    print(f"| a turn seen at the attached terminal | {cell(turn_seen)} |")
    print(f"\n{args.reps} repetitions; {args.reps * TURNS} turns seen.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=9)
    with private_home():
        started = time.monotonic()
        asyncio.run(main(parser.parse_args()))
        print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
