"""History replay: session/load of a stored session with many updates, through acpctl.

Builds a session of N updates in a temporary store with the store's own writer, as the
relay records them (the agent's notification bytes, and one prompt a hundred updates),
then times session/load: to the first replayed update, and to the response with every
update received, by a client that reads the pipe in chunks and by one that reads it line by
line with asyncio (that client's own cost is then in the time too). The baseline, measured
in the same repetitions (interleaved), is reading the same events.jsonl with json.loads line
by line in-process.

    python bench/history.py [--updates 100000] [--reps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import ACPCTL, Peer, now, private_home

from acpctl.jsontext import decode_text
from acpctl.store.sessions import SessionMeta, SessionStore

SESSION = "bench-session"


def build(store: SessionStore, updates: int) -> Path:
    meta = SessionMeta(id=SESSION, agent="demo", command=[], cwd="/tmp", agent_session_id=SESSION)
    writer = store.create(meta)
    for i in range(updates):
        if i % 100 == 0:
            writer.update(
                {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "go"}}
            )
            continue
        notification = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": SESSION,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": f"chunk {i} "},
                },
            },
        }
        writer.agent_message(json.dumps(notification, separators=(",", ":")).encode())
        if i % 10000 == 0:
            writer.flush()
    writer.close()
    return store.session_dir(SESSION) / "events.jsonl"


def parse(events: Path, decode: Callable[[bytes], object] = json.loads) -> float:
    started = now()
    with events.open("rb") as handle:
        for line in handle:
            decode(line)
    return now() - started


def replayed_messages(updates: int) -> int:
    """What a load replays of build()'s session: a prompt and one joined answer a hundred
    updates (the answer's fragments are one message)."""
    prompts = (updates + 99) // 100
    return prompts + sum(1 for p in range(prompts) if min(100, updates - 100 * p) > 1)


async def replay(updates: int, by_line: bool, as_recorded: bool = False) -> tuple[float, float]:
    """(to the first update, to the response). The client reads line by line with asyncio
    (a Python client's cost, 1.5 us a line, is in the time), or in chunks, counting lines
    (what a native editor's reader costs: about nothing next to acpctl)."""
    peer = await Peer.start(ACPCTL)
    await peer.call("initialize", {"protocolVersion": 1})
    stdout = peer.process.stdout
    assert stdout is not None
    started = now()
    params: dict[str, object] = {"sessionId": SESSION, "cwd": "/tmp", "mcpServers": []}
    if as_recorded:  # update for update, not joined (what acpctl's remote link asks for)
        params["_meta"] = {"acpctl/replay": "as-recorded"}
    msg_id = peer.send("session/load", params)
    first = None
    received = 0
    if by_line:
        while True:
            line = await stdout.readline()
            if b'"method"' in line:
                received += 1
                first = first or now() - started
            elif b'"id"' in line:
                break
    else:
        response = b'"id":%d,' % msg_id
        last_line = b""
        while True:
            chunk = await stdout.read(1 << 20)
            if not chunk:
                raise RuntimeError("acpctl closed its stdout")
            first = first or now() - started
            received += chunk.count(b"\n")
            last_line = (last_line + chunk).rsplit(b"\n", 2)[-2 if chunk.endswith(b"\n") else -1]
            if chunk.endswith(b"\n") and response in last_line:
                received -= 1  # the response's own line
                break
    elapsed = now() - started
    await peer.close()
    expected = updates if as_recorded else replayed_messages(updates)
    assert received == expected, (received, expected)
    assert first is not None
    return first, elapsed


def main(updates: int, reps: int) -> None:
    events = build(SessionStore(), updates)
    parsed: list[float] = []
    decoded: list[float] = []
    firsts: list[float] = []
    chunked: list[float] = []
    by_line: list[float] = []
    recorded: list[float] = []
    for rep in range(reps):
        parsed.append(parse(events))
        decoded.append(parse(events, decode_text))
        for line_client in (False, True) if rep % 2 == 0 else (True, False):
            first, load = asyncio.run(replay(updates, line_client))
            (by_line if line_client else chunked).append(load)
            if not line_client:
                firsts.append(first)
        recorded.append(asyncio.run(replay(updates, False, as_recorded=True))[1])
    base = statistics.median(parsed)
    size = events.stat().st_size / 2**20
    print("| measure | min | median | ratio of medians to parsing |\n|---|---|---|---|")
    for label, values in (
        (f"parse events.jsonl ({updates} updates, {size:.1f} MiB)", parsed),
        ("the same with acpctl's decoder (jsontext.decode_text)", decoded),
        ("session/load: first update at the client", firsts),
        ("session/load: response, the whole replay received (client reads chunks)", chunked),
        ("session/load: the same, client reads line by line (asyncio)", by_line),
        ("session/load as recorded (not joined), client reads chunks", recorded),
    ):
        median = statistics.median(values)
        print(f"| {label} | {min(values):.3f} s | {median:.3f} s | {median / base:.2f}x |")
    print(f"\n{reps} repetitions, the parse and the loads interleaved.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--updates", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with private_home():
        main(args.updates, args.reps)
