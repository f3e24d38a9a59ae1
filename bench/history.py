"""History replay: session/load of a stored session with many updates, through acpctl.

Builds a session with N agent_message_chunk updates in a temporary store (with the store's
own writer), then times session/load from request to response, all updates received.
The baseline is reading the same events.jsonl with json.loads line by line in-process.

    python bench/history.py [--updates 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import ACPCTL, Peer, now, private_home

from acpctl.store.sessions import SessionMeta, SessionStore


def build(store: SessionStore, updates: int) -> str:
    meta = SessionMeta(
        id="bench-session", agent="demo", command=[], cwd="/tmp", agent_session_id="demo-bench"
    )
    writer = store.create(meta)
    for i in range(updates):
        writer.update(
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": f"chunk {i} "},
            }
        )
        if i % 10000 == 0:
            writer.flush()
    writer.close()
    return meta.id


async def replay(session_id: str, updates: int) -> float:
    peer = await Peer.start(ACPCTL)
    await peer.call("initialize", {"protocolVersion": 1})
    started = now()
    msg_id = peer.send("session/load", {"sessionId": session_id, "cwd": "/tmp", "mcpServers": []})
    response, received = await peer.response(msg_id)
    elapsed = now() - started
    await peer.close()
    assert "result" in response, response
    assert received == updates, (received, updates)
    return elapsed


def main(updates: int) -> None:
    store = SessionStore()
    session_id = build(store, updates)
    events = store.session_dir(session_id) / "events.jsonl"
    started = now()
    with events.open("rb") as handle:
        for line in handle:
            json.loads(line)
    parse_only = now() - started
    elapsed = asyncio.run(replay(session_id, updates))
    size = events.stat().st_size / 2**20
    print("| measure | time | ratio to parsing the log |\n|---|---|---|")
    print(f"| parse events.jsonl ({updates} updates, {size:.1f} MiB) | {parse_only:.2f} s | 1.0x |")
    print(
        f"| session/load through acpctl, to the response | {elapsed:.2f} s "
        f"| {elapsed / parse_only:.1f}x |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--updates", type=int, default=100_000)
    args = parser.parse_args()
    with private_home():
        main(args.updates)
