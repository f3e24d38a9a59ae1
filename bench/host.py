"""The waits the session host is for, through the host against direct (issue 28).

- Reopening a thread: an editor starts `acpctl run --acp` and loads a session it had; from
  the spawn to the answer of session/load. Direct, acpctl starts the agent and attaches
  the session to it; through the host, the session is live there and load joins it.
- The first thread: from the spawn to the answer of the first session/new. Direct, the
  agent starts first; through the host, its initialized spare takes the session.
- A prompt turn (the demo agent, one short answer), in one connection: `run --acp` direct,
  `run --acp` through the host (its unix socket), and a WebSocket client on the host's
  TCP listener against a stdio client of `run --acp`.

Agents: the demo agent; claude-agent-acp (tests/npm) and pi 0.73.1 (pi-rpc) on the model
stand-in on 127.0.0.1 (tests/model_stub.py), when installed. Every configuration is
interleaved in each repetition (in order, then reversed).

    python bench/host.py [--reps 5] [--agents demo,claude,pi]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from rawpeer import ACPCTL_COMMAND, DEMO, Peer, agents_add, interleaved, now, private_home

from tests.model_stub import ModelStub, write_pi_models

ROOT = Path(__file__).resolve().parent.parent
NPM = ROOT / "tests" / "npm" / "node_modules"
CLAUDE = NPM / "@agentclientprotocol" / "claude-agent-acp" / "dist" / "index.js"
PI = NPM / ".bin" / "pi"
TURNS = 40


def run_acp(agent: str) -> list[str]:
    return [*ACPCTL_COMMAND, "run", "--acp", "--agent", agent]


def add_agent(name: str, command: list[str], env: dict[str, str], kind: str = "acp") -> None:
    pairs = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    kinds = ["--kind", kind] if kind != "acp" else []
    agents_add(name, *kinds, *pairs, "--", *command)


@contextlib.contextmanager
def host(*args: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [*ACPCTL_COMMAND, "serve", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    while b"listening on" not in process.stderr.readline():
        assert process.poll() is None, "acpctl serve ended"
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


async def host_agents() -> list[dict[str, Any]]:
    from acpctl.remote.host_socket import read_status

    status = await read_status()
    return list(status["agents"]) if status else []


async def spare_ready(agent: str) -> None:
    while not any(a["agent"] == agent and a["spare"] for a in await host_agents()):
        await asyncio.sleep(0.05)


async def new_session(agent: str, cwd: str, prompt: str | None) -> tuple[str, float]:
    """spawn → initialize → session/new (→ one prompt): the session and the time to its
    session/new answer."""
    begin = now()
    peer = await Peer.start(run_acp(agent))
    await peer.call("initialize", {"protocolVersion": 1})
    answer = await peer.call("session/new", {"cwd": cwd, "mcpServers": []})
    elapsed = now() - begin
    session = answer["result"]["sessionId"]
    if prompt is not None:
        turn = await peer.call(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": prompt}]}
        )
        assert "result" in turn, turn
    await peer.close()
    return session, elapsed


async def load(agent: str, session: str, cwd: str) -> tuple[float, float]:
    """spawn → initialize → session/load, then a prompt: the times to the load's answer and
    to the turn's (a bridge may answer the load before its agent has started: pi-rpc starts
    pi at the first prompt)."""
    begin = now()
    peer = await Peer.start(run_acp(agent))
    await peer.call("initialize", {"protocolVersion": 1})
    answer = await peer.call("session/load", {"sessionId": session, "cwd": cwd, "mcpServers": []})
    loaded = now() - begin
    assert "result" in answer, answer
    turn = await peer.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "again"}]}
    )
    answered = now() - begin
    assert "result" in turn, turn
    await peer.close()
    return loaded, answered


async def turns_stdio(agent: str, cwd: str) -> list[float]:
    peer = await Peer.start(run_acp(agent))
    await peer.call("initialize", {"protocolVersion": 1})
    session = (await peer.call("session/new", {"cwd": cwd, "mcpServers": []}))["result"][
        "sessionId"
    ]
    times = []
    for _ in range(TURNS):
        begin = now()
        await peer.call(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
        )
        times.append(now() - begin)
    await peer.close()
    return times


async def turns_websocket(url: str, token: str, cwd: str) -> list[float]:
    import aiohttp

    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Authorization": f"Bearer {token}"}) as socket,
    ):
        next_id = 0

        async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            nonlocal next_id
            next_id += 1
            await socket.send_str(
                json.dumps({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params})
            )
            while True:
                message = json.loads((await socket.receive()).data)
                if message.get("id") == next_id and "method" not in message:
                    return dict(message)

        await call("initialize", {"protocolVersion": 1})
        session = (await call("session/new", {"cwd": cwd, "mcpServers": []}))["result"]["sessionId"]
        times = []
        for _ in range(TURNS):
            begin = now()
            await call(
                "session/prompt",
                {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]},
            )
            times.append(now() - begin)
        return times


def cell(values: list[float]) -> str:
    return f"{min(values) * 1000:.0f} / {statistics.median(values) * 1000:.0f} ms"


def agents_wanted(wanted: list[str], stub: ModelStub, home: Path) -> list[str]:
    names = []
    if "demo" in wanted:
        add_agent("demo-direct", DEMO, {})
        names.append("demo")
    if "claude" in wanted and CLAUDE.exists():
        env = {
            "ANTHROPIC_BASE_URL": stub.url,
            "ANTHROPIC_API_KEY": "sk-bench",
            "IS_SANDBOX": "1",
            "HOME": str(home),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        add_agent("claude-direct", ["node", str(CLAUDE)], env)
        names.append("claude")
    if "pi" in wanted and PI.exists():
        write_pi_models(home / ".pi" / "agent", stub.url, "stub-model")
        env = {"HOME": str(home)}
        command = [str(PI), "--provider", "stub", "--model", "stub-model", "--no-themes"]
        add_agent("pi-direct", command, env, kind="pi-rpc")
        names.append("pi")
    config = Path(os.environ["ACPCTL_CONFIG_DIR"]) / "config.toml"
    text = config.read_text()
    for name in names:  # the same agent again, through the host
        block = text.split(f"[agents.{name}-direct]\n", 1)[1].split("\n[", 1)[0]
        text += f"\n[agents.{name}-host]\nhost = true\n{block}\n"
    config.write_text(text)
    return names


Table = dict[str, dict[str, list[float]]]


async def reopening(names: list[str], reps: int, cwd: str) -> tuple[Table, Table]:
    table: Table = {name: {"direct": [], "host": []} for name in names}
    turned: Table = {name: {"direct": [], "host": []} for name in names}
    with host("--idle-stop", "600"):
        stored = {}
        for name in names:
            for config in ("direct", "host"):
                stored[(name, config)], _ = await new_session(f"{name}-{config}", cwd, "hi")
        for rep in range(reps):
            for name in names:
                for config in interleaved(rep, ["direct", "host"]):
                    loaded, answered = await load(f"{name}-{config}", stored[(name, config)], cwd)
                    table[name][config].append(loaded)
                    turned[name][config].append(answered)
            print(f"reopening: repetition {rep + 1} of {reps}", file=sys.stderr)
    return table, turned


async def first_threads(names: list[str], reps: int, cwd: str) -> Table:
    table: Table = {name: {"direct": [], "host": []} for name in names}
    with host("--idle-stop", "0.5", "--spare-for", "3600"):
        for name in names:  # used once, so the host keeps a spare of it
            await new_session(f"{name}-host", cwd, None)
        for rep in range(reps):
            for name in names:
                for config in interleaved(rep, ["direct", "host"]):
                    if config == "host":
                        await asyncio.wait_for(spare_ready(f"{name}-host"), 60)
                    _, elapsed = await new_session(f"{name}-{config}", cwd, None)
                    table[name][config].append(elapsed)
            print(f"first thread: repetition {rep + 1} of {reps}", file=sys.stderr)
    return table


async def prompt_turns(reps: int, cwd: str) -> dict[str, list[float]]:
    turn: dict[str, list[float]] = {"direct": [], "host (unix socket)": [], "ws": []}
    with host("--listen", "127.0.0.1:0", "--idle-stop", "600") as process:
        url = await listening_url(process)
        token = subprocess.run(
            [*ACPCTL_COMMAND, "serve", "--show-token"], capture_output=True, text=True, check=True
        ).stdout.strip()
        for rep in range(reps):
            for config in interleaved(rep, list(turn)):
                if config == "ws":
                    turn[config] += await turns_websocket(url + "/demo-host", token, cwd)
                else:
                    agent = "demo-direct" if config == "direct" else "demo-host"
                    turn[config] += await turns_stdio(agent, cwd)
            print(f"turns: repetition {rep + 1} of {reps}", file=sys.stderr)
    return turn


def report(names: list[str], tables: dict[str, Table], turn: dict[str, list[float]]) -> None:
    print("| agent | wait | direct | through the host | ratio of medians |")
    print("|---|---|---|---|---|")
    for name in names:
        for wait, table in tables.items():
            ratio = statistics.median(table[name]["host"]) / statistics.median(
                table[name]["direct"]
            )
            print(
                f"| {name} | {wait} | {cell(table[name]['direct'])} | "
                f"{cell(table[name]['host'])} | {ratio:.2f}x |"
            )
    if turn["direct"]:
        base = statistics.median(turn["direct"])
        print("\n| a prompt turn, demo agent (min / median / p95) | time | median - direct |")
        print("|---|---|---|")
        for config, values in turn.items():
            p95 = sorted(values)[int(0.95 * len(values))]
            print(
                f"| {config} | {min(values) * 1000:.2f} / {statistics.median(values) * 1000:.2f}"
                f" / {p95 * 1000:.2f} ms | {(statistics.median(values) - base) * 1000:+.2f} ms |"
            )
        print(
            "\n(ws: a WebSocket client on the host's TCP listener; the others `run --acp` on "
            f"stdio, direct or through the host.) {TURNS} turns a connection."
        )


async def main(args: argparse.Namespace) -> None:
    with ModelStub(default_reply="Hi.") as stub, tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        names = agents_wanted(args.agents.split(","), stub, home)
        reopen, reopen_turn = await reopening(names, args.reps, scratch)
        first = await first_threads(names, args.reps, scratch)
        turn = await prompt_turns(args.reps, scratch) if "demo" in names else {"direct": []}
    tables = {
        "reopen: spawn to session/load's answer": reopen,
        "reopen: to the first turn's answer after it": reopen_turn,
        "first thread: spawn to session/new's answer (host: a spare)": first,
    }
    report(names, tables, turn)
    print(f"\n{args.reps} repetitions, interleaved; times are min / median.")


async def listening_url(process: subprocess.Popen[bytes]) -> str:
    """The ws:// address the host printed (its stderr, after the unix socket line)."""
    assert process.stderr is not None
    while True:
        line = process.stderr.readline().decode()
        if "listening on ws://" in line:
            return line.split("listening on ", 1)[1].split()[0].removesuffix("/acp") + "/acp"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--agents", default="demo,claude,pi")
    with private_home():
        started = time.monotonic()
        asyncio.run(main(parser.parse_args()))
        print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
