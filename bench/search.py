"""`acpctl sessions search` over 10,000 sessions and 1 GB of history, against grep.

Builds a store in the store's own format (prompts, streamed answers, tool calls, turn ends
with usage), then times, in one run:

- the first search, which builds the index from all the history (once);
- searches with a fresh index, interleaved with `grep -rlF` of the same word over the store
  (what one does without acpctl), each `--runs` times: a word in one session, a word in
  every session, a phrase, a prefix; the whole `acpctl` command and, in-process, the
  index's part alone;
- a search after 10 sessions each got a new turn (the incremental update);
- `acpctl usage` with a fresh index.

    python bench/search.py [--sessions 10000] [--gb 1.0] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import as_installed

from acpctl.store.history_index import HistoryIndex, fts_query
from acpctl.store.index import SessionIndex
from acpctl.store.sessions import SessionMeta, SessionStore

ACPCTL = [sys.executable, "-m", "acpctl"]
WORDS = [
    f"{stem}{n}" for stem in ("parse", "token", "render", "cache", "index") for n in range(400)
]


def agent_line(sid: str, text: str) -> str:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    message = {"jsonrpc": "2.0", "method": "session/update"}
    message["params"] = {"sessionId": sid, "update": update}  # type: ignore[assignment]
    return '{"ts":1764460800.5,"type":"agent","message":' + json.dumps(message) + "}\n"


def make_store(root: Path, count: int, total_bytes: int) -> None:
    """`count` sessions of about total_bytes / count each. Every session's answers say
    "common"; session N's first prompt names "topic<N>"."""
    rng = random.Random(7)
    pool = [agent_line("x", " ".join(rng.choices(WORDS, k=8)) + " common ") for _ in range(2000)]
    tool = (
        '{"ts":1764460801,"type":"agent","message":{"jsonrpc":"2.0","method":"session/update",'
        '"params":{"sessionId":"x","update":{"sessionUpdate":"tool_call","toolCallId":"t1",'
        '"title":"Read src/parser.py","status":"completed"}}}}\n'
    )
    end = (
        '{"ts":1764460802,"type":"turn_end","stopReason":"end_turn","usage":'
        '{"inputTokens":1200,"outputTokens":300,"totalTokens":1500}}\n'
    )
    per_session = total_bytes // count
    lines_per_turn = 60
    root.mkdir(parents=True, mode=0o700)
    for index in range(count):
        sid = f"s{index:06d}"
        meta = SessionMeta(
            id=sid, agent="demo", command=[], cwd=f"/w/{index % 50}", title=f"session {index}"
        )
        directory = root / sid
        directory.mkdir(mode=0o700)
        (directory / "session.json").write_text(json.dumps(meta.to_json()))
        parts: list[str] = []
        size = 0
        turn = 0
        while size < per_session:
            words = f"topic{index} please look at" if turn == 0 else "and now the next step"
            prompt = (
                '{"ts":1764460800,"type":"update","update":{"sessionUpdate":'
                f'"user_message_chunk","content":{{"type":"text","text":"{words}"}}}}}}\n'
            )
            body = rng.choices(pool, k=lines_per_turn)
            parts += [prompt, *body, tool, end]
            size += len(prompt) + sum(map(len, body)) + len(tool) + len(end)
            turn += 1
        (directory / "events.jsonl").write_text("".join(parts))


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - started) * 1000


def in_process(store: SessionStore, words: str) -> float:
    started = time.perf_counter()
    history = HistoryIndex(store)
    with history.connected(SessionIndex(store)) as connection:
        history.search(connection, fts_query(words), None, None, 20)
    return (time.perf_counter() - started) * 1000


def main(count: int, gigabytes: float, runs: int) -> None:
    as_installed()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "sessions"
        started = time.perf_counter()
        make_store(root, count, int(gigabytes * 2**30))
        made = time.perf_counter() - started
        total = sum(f.stat().st_size for f in root.rglob("events.jsonl"))
        env = {**os.environ, "ACPCTL_SESSION_DIR": str(root), "NO_COLOR": "1"}
        store = SessionStore(root)
        print(
            f"store: {count:,} sessions, {total / 2**30:.2f} GiB of events ({made:.0f} s to write)"
        )
        cold = timed([*ACPCTL, "sessions", "search", "topic1"], env)
        queries = {
            "a word in one session": "topic4242",
            "a word in every session": "common",
            "a phrase": "please look at",
            "a prefix": "render3*",
        }
        results: dict[str, list[float]] = {}
        for rep in range(runs):
            items = list(queries.items()) if rep % 2 == 0 else list(reversed(queries.items()))
            for label, words in items:
                grep_word = words.rstrip("*").split()[0]
                for key, argv in (
                    (f"{label}: acpctl", [*ACPCTL, "sessions", "search", words, "--json"]),
                    (f"{label}: grep -rlF", ["grep", "-rlF", grep_word, str(root)]),
                ):
                    results.setdefault(key, []).append(timed(argv, env))
                results.setdefault(f"{label}: index alone", []).append(in_process(store, words))
        for index in range(10):
            writer = store.open_writer(f"s{index * (count // 10):06d}")
            writer.update(
                {
                    "sessionUpdate": "user_message_chunk",
                    "content": {"type": "text", "text": "freshly added"},
                }
            )
            writer.turn_end("end_turn")
            writer.flush()
            writer.close()
            store.write_meta(store.read_meta(f"s{index * (count // 10):06d}"))  # as the relay does
        incremental = timed([*ACPCTL, "sessions", "search", "freshly"], env)
        usage = [timed([*ACPCTL, "usage", "--json"], env) for _ in range(runs)]
        index_size = sum(f.stat().st_size for f in (root / ".index").iterdir())
        shutil.rmtree(root)

    def cell(values: list[float]) -> str:
        return f"{min(values):.0f} / {statistics.median(values):.0f} ms"

    print(
        f"\n| search (min / median of {runs}) | acpctl | index alone | grep -rlF | acpctl / grep |"
    )
    print("|---|---|---|---|---|")
    for label in queries:
        ours, grep = results[f"{label}: acpctl"], results[f"{label}: grep -rlF"]
        ratio = statistics.median(ours) / statistics.median(grep)
        alone = results[f"{label}: index alone"]
        print(f"| {label} | {cell(ours)} | {cell(alone)} | {cell(grep)} | {ratio:.2f}x |")
    print(f"\nfirst search (builds the index from {total / 2**30:.2f} GiB): {cold / 1000:.1f} s")
    print(f"a search after 10 sessions got a turn: {incremental:.0f} ms")
    print(f"acpctl usage --json: {cell(usage)}")
    print(f"index size: {index_size / 2**20:.0f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    main(args.sessions, args.gb, args.runs)
