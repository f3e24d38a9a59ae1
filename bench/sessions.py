"""`acpctl sessions` at scale: 10,000 stored sessions (one with a 100 MB log) against 10.

Prints, in one run: `sessions list` (its default page of 20; cold: index built, warm: index
fresh) for both stores, interleaved, and their ratio; and the time until `sessions show` of
a 200,000-event session has printed its first screen (40 lines) into a pipe.

    python bench/sessions.py [--sessions 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import as_installed

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


def run_once(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


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
    as_installed()
    with tempfile.TemporaryDirectory() as scratch:
        small, large = Path(scratch) / "small", Path(scratch) / "large"
        make_store(small, 10)
        long_session = make_store(large, count, big_log_mb=100, long_events=200_000)
        stores = {"small": small, "large": large}
        envs = {
            name: {**os.environ, "ACPCTL_SESSION_DIR": str(root)} for name, root in stores.items()
        }
        listing = [*ACPCTL, "sessions", "list"]
        results: dict[str, list[float]] = {
            f"{kind} {name}": [] for kind in ("cold", "warm") for name in stores
        }
        results["python -c pass"] = []
        for rep in range(runs):  # the configurations interleaved, the order flipped each time
            order = list(stores) if rep % 2 == 0 else list(reversed(stores))
            for name in order:
                shutil.rmtree(stores[name] / ".index", ignore_errors=True)
                results[f"cold {name}"].append(run_once(listing, envs[name]))
                results[f"warm {name}"].append(run_once(listing, envs[name]))
            results["python -c pass"].append(
                run_once([sys.executable, "-c", "pass"], dict(os.environ))
            )
        show = first_screen([*ACPCTL, "sessions", "show", long_session], envs["large"])

    def cell(key: str) -> str:
        values = results[key]
        return f"{min(values):.0f} / {statistics.median(values):.0f} ms"

    def ratio(kind: str) -> str:
        large_median = statistics.median(results[f"{kind} large"])
        return f"{large_median / statistics.median(results[f'{kind} small']):.2f}x"

    print(
        f"| measure (min / median of {runs}) | 10 sessions | {count:,} sessions (+100 MB log) "
        "| ratio of medians |\n|---|---|---|---|"
    )
    for kind, label in (("cold", "index built (first run)"), ("warm", "index fresh")):
        print(
            f"| sessions list, {label} | {cell(f'{kind} small')} | {cell(f'{kind} large')} "
            f"| {ratio(kind)} |"
        )
    print(f"| sessions show (200,000 events): first 40 lines | | {show:.0f} ms | |")
    print(f"| python -c pass (for scale) | {cell('python -c pass')} | | |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    main(args.sessions, args.runs)
