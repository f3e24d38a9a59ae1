"""What a host connection keeps to resume (issue 28, 5), in-process: a connection whose
client dropped while the agent streamed N updates, each recorded by a real history writer
(flushed every 1,000, as the recorder's batch ends do) and relayed to the connection.

- "texts": everything kept as text (the connection without a store: what the host did
  before, a ring of 100,000 messages);
- "history": the agent's older updates kept as their place in the events file, read back
  at the resume.

Past 100,000 messages "texts" refuses the resume (0 given back): its oldest are gone.

Rows: the memory the connection holds after the turn (tracemalloc), the relay's cost per
update, and a resume after the first cursor (how many messages it gives back, and how
long it takes). Both configurations run in each repetition, their order alternating.

    python bench/retention.py [--reps 5] [--updates 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.host.connection import LogicalConnection
from acpctl.host.cursors import ALL_STREAMS, ResumeRefused
from acpctl.host.outbox import Reader
from acpctl.runner.session import SessionRecord
from acpctl.store.sessions import SessionMeta, SessionStore

MiB = 1 << 20


async def one_turn(updates: int, with_history: bool, traced: bool) -> dict[str, float]:
    """The turn; `traced`: its memory measured (tracemalloc, which slows it: timed apart)."""
    root = Path(tempfile.mkdtemp(prefix="acpctl-retention-"))
    store = SessionStore(root)
    meta = SessionMeta("s1", agent="demo", command=["demo"], cwd="/tmp")
    record = SessionRecord(meta, store.create(meta))
    lines = []
    for n in range(1000):
        update = {"sessionUpdate": acp.AGENT_MESSAGE_CHUNK, "content": {"text": f"word {n} "}}
        params = {"sessionId": "s1", "update": update}
        lines.append(jsonrpc.encode(jsonrpc.notification(acp.SESSION_UPDATE, params)))
    decoded = [json.loads(line) for line in lines]

    async def drained() -> None:
        return None

    if traced:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    connection = LogicalConnection(store=store if with_history else None)
    reader = Reader(ALL_STREAMS, lambda cursor, text: None, drained)
    connection.attach(reader, connection.backlog(ALL_STREAMS, None))
    connection.detach(reader)  # the client dropped: everything from now on is kept
    started = time.perf_counter()
    for n in range(updates):
        line = lines[n % 1000]
        record.writer.agent_message(line[:-1])
        connection.relay(line, decoded[n % 1000], record)
        if n % 1000 == 999:
            record.writer.flush()
    record.writer.flush()
    relayed = time.perf_counter() - started
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    if traced:
        connection.end()
        record.writer.close()
        return {"held": held / MiB}
    started = time.perf_counter()
    try:
        given_back = len(connection.backlog(ALL_STREAMS, "1").messages)
    except ResumeRefused:  # the oldest are no longer held
        given_back = 0
    resumed = time.perf_counter() - started
    connection.end()
    record.writer.close()
    return {
        "per update": relayed / updates * 1e6,
        "resumed": resumed * 1e3,
        "given back": float(given_back),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--updates", type=int, default=200_000)
    args = parser.parse_args()
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for rep in range(args.reps):
        for with_history in (False, True) if rep % 2 == 0 else (True, False):
            timed = asyncio.run(one_turn(args.updates, with_history, traced=False))
            traced = asyncio.run(one_turn(args.updates, with_history, traced=True))
            runs[with_history].append({**timed, **traced})
    print(f"{args.updates:,} updates streamed to a dropped client, {args.reps} repetitions")
    print()
    print("| row | texts min / median | history min / median | history / texts (median) |")
    print("|---|---|---|---|")
    rows = (
        ("memory held, MiB", "held"),
        ("relay, µs an update", "per update"),
        ("resume after cursor 1, ms", "resumed"),
        ("messages the resume gives back", "given back"),
    )
    for label, key in rows:
        texts = [run[key] for run in runs[False]]
        history = [run[key] for run in runs[True]]
        ratio = statistics.median(history) / (statistics.median(texts) or float("nan"))
        print(
            f"| {label} | {min(texts):,.2f} / {statistics.median(texts):,.2f} "
            f"| {min(history):,.2f} / {statistics.median(history):,.2f} | {ratio:.2f}x |"
        )


if __name__ == "__main__":
    main()
