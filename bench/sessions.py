"""`acpctl sessions` at scale: 10,000 stored sessions (one with a 100 MB log) against 10.

Prints, in one run: `sessions list` (cold: index built; warm: index fresh) for both stores
and their ratio; and the time until `sessions show` of a 200,000-event session has printed
its first screen (40 lines) into a pipe.

    python bench/sessions.py [--sessions 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from acpctl.store.sessions import SessionMeta

ACPCTL = [sys.executable, "-m", "acpctl"]


def make_store(root: Path, count: int, big_log_mb: int = 0, long_events: int = 0) -> str:
    """Sessions written in the store's format (without fsync, to build 10,000 quickly)."""
    root.mkdir(parents=True, mode=0o700)
    for index in range(count):
        meta = SessionMeta(
            id=f"s{index:06d}",
            agent="demo",
            command=[],
            cwd=f"/w/{index % 50}",
            title=f"session {index}",
            turns=3,
            updated=f"2026-11-{1 + index % 28:02d}T00:00:{index % 60:02d}.000Z",
        )
        directory = root / meta.id
        directory.mkdir(mode=0o700)
        (directory / "session.json").write_text(json.dumps(meta.to_json()))
        (directory / "events.jsonl").write_text(
            '{"ts":1,"type":"update","update":{"sessionUpdate":"user_message_chunk",'
            '"content":{"type":"text","text":"hi"}}}\n'
        )
    chunk = (
        '{"ts":1.5,"type":"agent","message":{"jsonrpc":"2.0","method":"session/update",'
        '"params":{"sessionId":"x","update":{"sessionUpdate":"agent_message_chunk",'
        '"content":{"type":"text","text":"word "}}}}}\n'
    )
    if big_log_mb:
        with (root / "s000000" / "events.jsonl").open("a") as handle:
            handle.write(chunk * (big_log_mb * 2**20 // len(chunk)))
    if long_events:
        with (root / "s000001" / "events.jsonl").open("a") as handle:
            for index in range(long_events):
                if index % 50 == 0:
                    handle.write('{"ts":1,"type":"turn_end","stopReason":"end_turn"}\n')
                handle.write(chunk)
    return "s000001"


def timed(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def first_screen(argv: list[str], env: dict[str, str], lines: int = 40) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE)
    assert process.stdout is not None
    for _ in range(lines):
        process.stdout.readline()
    elapsed = time.perf_counter() - started
    process.kill()
    process.wait()
    return elapsed * 1000


def main(count: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        small, large = Path(scratch) / "small", Path(scratch) / "large"
        make_store(small, 10)
        long_session = make_store(large, count, big_log_mb=100, long_events=200_000)
        env_small = {**os.environ, "ACPCTL_SESSION_DIR": str(small)}
        env_large = {**os.environ, "ACPCTL_SESSION_DIR": str(large)}
        listing = [*ACPCTL, "sessions", "list"]
        cold_small = timed(listing, env_small, 1)
        cold_large = timed(listing, env_large, 1)
        warm_small = timed(listing, env_small, runs)
        warm_large = timed(listing, env_large, runs)
        show = first_screen([*ACPCTL, "sessions", "show", long_session], env_large)
        baseline = timed([sys.executable, "-c", "pass"], os.environ.copy(), runs)
    print(
        f"| measure | 10 sessions | {count:,} sessions (+100 MB log) | ratio |\n|---|---|---|---|"
    )
    print(
        f"| sessions list, index built (first run) | {cold_small:.0f} ms "
        f"| {cold_large:.0f} ms | {cold_large / cold_small:.1f}x |"
    )
    print(
        f"| sessions list, median of {runs} | {warm_small:.0f} ms | {warm_large:.0f} ms "
        f"| {warm_large / warm_small:.1f}x |"
    )
    print(f"| sessions show (200,000 events): first 40 lines | | {show:.0f} ms | |")
    print(f"| python -c pass (for scale) | {baseline:.0f} ms | | |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    main(args.sessions, args.runs)
