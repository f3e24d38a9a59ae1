"""acpctl's pi bridge (the pi-rpc backend) against pi-acp 0.0.24, on the same pi (0.73.1,
from tests/npm) and the same stand-in for the model API (tests/model_stub.py) on 127.0.0.1.

Rows: initialize; session/new; turn 1 (sent as soon as session/new answers) to its first
chunk and to its end, and from sending session/new to turn 1's end (what a person waits
for their first answer: a bridge may answer session/new before pi has finished starting,
and turn 1 then pays the rest); turn 2 to its end; the bridge process's RSS after turn 2
(the bridge only, not pi); turn 1 of another session sent 3 s after it opened, as a person
would; and session/load of the stored session in a new process. The two bridges are interleaved in
every repetition (A B, then B A); min and median.

Then pi alone, no bridge: its RPC mode asked what a bridge asks before it answers
session/new (get_state, get_available_models, get_commands), and turn 1 sent the moment
the answers are in, or a second later: what pi's own start-up leaves to its first turn.

    python bench/pi.py [--reps 5]

Installs pi-acp into bench/npm/node_modules (npm) and pi into tests/npm/node_modules on
first use.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import Peer, agents_add, as_installed, now

from tests.model_stub import ModelStub, write_pi_models

ROOT = Path(__file__).resolve().parent.parent
BENCH_NPM = ROOT / "bench" / "npm"
TEST_NPM = ROOT / "tests" / "npm"
MiB = 2**20
REPLY = "Stubreply from the stand-in."
IDLE_S = 3.0
REPLY_MARK = b"Stubreply"  # the model's first word: pi-acp sends a startup notice first


def npm_install(directory: Path, marker: str) -> None:
    if not (directory / "node_modules" / marker).exists():
        subprocess.run(
            ["npm", "install", "--no-package-lock", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=directory,
            check=True,
        )


async def chunk_then_end(peer: Peer, session: str, text: str) -> tuple[float, float]:
    begin = now()
    msg_id = peer.send(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    )
    first = None
    assert peer.process.stdout is not None
    while True:
        line = await peer.process.stdout.readline()
        if not line:
            raise RuntimeError("the bridge closed its output")
        if first is None and b"agent_message_chunk" in line and REPLY_MARK in line:
            first = now() - begin
        if b'"id"' in line and b'"method"' not in line and json.loads(line).get("id") == msg_id:
            assert first is not None, "no chunk before the end of the turn"
            return first, now() - begin


async def one_run(argv: list[str], env: dict[str, str], cwd: str) -> dict[str, float]:
    """One bridge through the measured path."""
    times: dict[str, float] = {}
    peer = await Peer.start(argv, env)
    begin = now()
    await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    times["initialize"] = now() - begin
    begin = now()
    new = await peer.call("session/new", {"cwd": cwd, "mcpServers": []})
    times["session/new"] = now() - begin
    session = new["result"]["sessionId"]
    times["turn 1: first chunk"], times["turn 1: end"] = await chunk_then_end(peer, session, "one")
    times["session/new sent to turn 1's end"] = times["session/new"] + times["turn 1: end"]
    _, times["turn 2: end"] = await chunk_then_end(peer, session, "two")
    times["bridge RSS (MiB)"] = psutil.Process(peer.process.pid).memory_info().rss / MiB
    # As a person types: the first prompt some seconds after the session opened.
    other = (await peer.call("session/new", {"cwd": cwd, "mcpServers": []}))["result"]
    await asyncio.sleep(IDLE_S)
    _, times[f"turn 1 after {IDLE_S:g} s idle: end"] = await chunk_then_end(
        peer, other["sessionId"], "one"
    )
    await peer.close()
    peer = await Peer.start(argv, env)
    await peer.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    begin = now()
    loaded = await peer.call("session/load", {"sessionId": session, "cwd": cwd, "mcpServers": []})
    times["session/load (new process)"] = now() - begin
    assert "result" in loaded, loaded
    await peer.close()
    return times


async def pi_alone(pi: Path, env: dict[str, str], cwd: str, wait_s: float) -> float:
    """pi's RPC mode asked what a bridge asks before answering session/new, then, after
    `wait_s`, a prompt: the time from sending it to pi's agent_end."""
    process = await asyncio.create_subprocess_exec(
        str(pi),
        "--mode",
        "rpc",
        cwd=cwd,
        env={**os.environ, **env},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=2**24,
    )
    assert process.stdin is not None and process.stdout is not None

    async def until(kind: str, count: int = 1) -> None:
        assert process.stdout is not None
        while count:
            line = await process.stdout.readline()
            if not line:
                raise RuntimeError("pi closed its output")
            count -= json.loads(line).get("type") == kind

    for command in ("get_state", "get_available_models", "get_commands"):
        process.stdin.write(json.dumps({"id": command, "type": command}).encode() + b"\n")
    await until("response", 3)
    await asyncio.sleep(wait_s)
    begin = now()
    process.stdin.write(b'{"id": "turn", "type": "prompt", "message": "one"}\n')
    await until("agent_end")
    elapsed = now() - begin
    process.stdin.close()
    await process.wait()
    return elapsed


def pi_home(root: Path, stub: ModelStub) -> Path:
    agent = root / ".pi" / "agent"
    write_pi_models(agent, stub.url, "stub-model")
    # pi-acp passes no provider or model: both bridges start pi on these defaults.
    (agent / "settings.json").write_text(
        json.dumps({"defaultProvider": "stub", "defaultModel": "stub-model"})
    )
    return root


async def main(reps: int) -> None:
    as_installed()
    npm_install(TEST_NPM, ".bin/pi")
    npm_install(BENCH_NPM, "pi-acp")
    pi_bin = TEST_NPM / "node_modules" / ".bin"
    results: dict[str, dict[str, list[float]]] = {"acpctl": {}, "pi-acp 0.0.24": {}}
    with (
        ModelStub(default_reply=REPLY) as stub,
        tempfile.TemporaryDirectory() as scratch,
    ):
        home = pi_home(Path(scratch) / "home", stub)
        work = Path(scratch) / "work"
        work.mkdir()
        env = {
            "HOME": str(home),
            "PATH": f"{pi_bin}{os.pathsep}{os.environ['PATH']}",
            "ACPCTL_CONFIG_DIR": f"{scratch}/config",
            "ACPCTL_DATA_DIR": f"{scratch}/data",
            "ACPCTL_STATE_DIR": f"{scratch}/state",
            "PI_ACP_PI_COMMAND": str(pi_bin / "pi"),
        }
        agents_add("pi", "--kind", "pi-rpc", "--", str(pi_bin / "pi"), env=env)
        bridges = {
            "acpctl": [sys.executable, "-m", "acpctl", "run", "--acp", "--agent", "pi"],
            "pi-acp 0.0.24": [
                "node",
                str(BENCH_NPM / "node_modules" / "pi-acp" / "dist" / "index.js"),
            ],
        }
        for rep in range(reps):
            for name in bridges if rep % 2 == 0 else reversed(bridges):
                for label, value in (await one_run(bridges[name], env, str(work))).items():
                    results[name].setdefault(label, []).append(value)
            print(f"repetition {rep + 1} of {reps} done", file=sys.stderr)
        alone: dict[str, list[float]] = {"at once": [], "1 s later": []}
        for rep in range(reps):
            for label in alone if rep % 2 == 0 else reversed(alone):
                wait_s = 0.0 if label == "at once" else 1.0
                alone[label].append(await pi_alone(pi_bin / "pi", env, str(work), wait_s))
    print(
        "| measure (min / median) | acpctl | pi-acp 0.0.24 | ratio of medians |\n|---|---|---|---|"
    )
    for label in results["acpctl"]:
        cells, medians = [], []
        for name in results:
            values = results[name][label]
            medians.append(statistics.median(values))
            if "RSS" in label:
                cells.append(f"{min(values):.1f} / {medians[-1]:.1f}")
            else:
                cells.append(f"{min(values) * 1000:.0f} / {medians[-1] * 1000:.0f} ms")
        print(f"| {label} | {cells[0]} | {cells[1]} | {medians[0] / medians[1]:.2f}x |")
    print(f"\n{reps} repetitions, the bridges interleaved.")
    print("\n| pi alone: turn 1, from prompt to agent_end (min / median) | time |\n|---|---|")
    for label, values in alone.items():
        print(
            f"| sent {label} after its first answers | "
            f"{min(values) * 1000:.0f} / {statistics.median(values) * 1000:.0f} ms |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    asyncio.run(main(parser.parse_args().reps))
