"""Relay cost: acpctl between a client and the demo agent, against the agent direct.

Three configurations, interleaved in every repetition (A B C, then C B A, ...) so that a
noisy machine hits them alike: the demo agent direct, `acpctl run --acp --no-history`, and
`acpctl run --acp` recording history. For each measure, each repetition gives one number
(a median over its samples); the table shows the min and the median over repetitions, and
the ratio of the medians to direct.

Measures: spawn to initialize, of the demo agent, of an agent that takes 0.3 s to start
(most real agents take longer than acpctl's own start-up: there acpctl adds the delay before
it spawns the agent, and one hop) and of one that answers at once (a shell script: what a
native agent is like); a short prompt turn (the path users hit: recording the
prompt, the updates, the turn's end); a trivial request's round trip; and notifications per
second while 1, 10 and 50 sessions stream at once on one connection; and the ceiling: an
agent that writes its whole turn at once, read by a client in large reads, so that only the
relay limits the rate (direct, it is the rate of a plain pipe).

With `--before DIR` (a checkout of an earlier revision, made with `git worktree add`), that
revision's relay runs beside this one's, interleaved with it (as `python -P -m acpctl`
with PYTHONPATH=DIR, so that the working directory's acpctl is not imported instead: an
extra exec of env(1) before each spawn).

With `--burn N`, N processes spin on the cores meanwhile: the relay on a busy machine.

    python bench/relay.py [--reps 5] [--turns 200] [--chunks 50000] [--before DIR] [--burn N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compileall

from rawpeer import ACPCTL, ACPCTL_COMMAND, DEMO, Peer, now, percentile, private_home

CONFIGS = {
    "direct": DEMO,
    "acpctl --no-history": [*ACPCTL, "--no-history"],
    "acpctl": ACPCTL,
}


async def started(argv: list[str]) -> Peer:
    peer = await Peer.start(argv)
    await peer.call("initialize", {"protocolVersion": 1})
    return peer


async def new_session(peer: Peer) -> str:
    result = (await peer.call("session/new", {"cwd": "/tmp", "mcpServers": []}))["result"]
    return str(result["sessionId"])


async def spawn_to_initialize(argv: list[str], _: argparse.Namespace) -> float:
    begin = now()
    peer = await started(argv)
    elapsed = now() - begin
    await peer.close()
    return elapsed


# The demo agent after 0.3 s of sleep, configured in acpctl as "slow".
SLOW_START = ["/bin/sh", "-c", f"sleep 0.3; exec {' '.join(DEMO)}"]


# An agent that answers initialize at once and reads the rest: configured as "instant".
INSTANT_ANSWER = (
    "#!/bin/sh\nread line\n"
    """echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}'\n"""
    "exec cat > /dev/null\n"
)


def agent_named(argv: list[str], name: str, direct: list[str]) -> list[str]:
    """The demo agent's command line changed for the agent `name`: `direct` for the agent
    run directly, else acpctl's with `--agent name`."""
    return direct if argv == DEMO else [a if a != "demo" else name for a in argv]


async def spawn_slow_agent_to_initialize(argv: list[str], args: argparse.Namespace) -> float:
    return await spawn_to_initialize(agent_named(argv, "slow", SLOW_START), args)


async def spawn_instant_agent_to_initialize(argv: list[str], args: argparse.Namespace) -> float:
    return await spawn_to_initialize(agent_named(argv, "instant", [str(args.instant)]), args)


def prompt_turn(fraction: float) -> Callable[[list[str], argparse.Namespace], Awaitable[float]]:
    async def measure(argv: list[str], args: argparse.Namespace) -> float:
        """A percentile of a short turn's time: prompt sent to its response read."""
        peer = await started(argv)
        session = await new_session(peer)
        times = []
        for _ in range(args.turns):
            begin = now()
            await peer.call(
                "session/prompt",
                {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]},
            )
            times.append(now() - begin)
        await peer.close()
        return percentile(times, fraction)

    return measure


# bench/fast_agent.py, configured as "fast": it writes a whole turn in one write.
FAST = [sys.executable, str(Path(__file__).resolve().parent / "fast_agent.py")]
CEILING_LINES = 200_000


async def ceiling(argv: list[str], args: argparse.Namespace) -> float:
    """Chunks a second from the agent that writes its turn at once, read in large reads."""
    peer = await started(agent_named(argv, "fast", FAST))
    session = await new_session(peer)
    assert peer.process.stdout is not None
    begin = now()
    peer.send("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]})
    lines = 0
    while True:
        data = await peer.process.stdout.read(1 << 20)
        lines += data.count(b"\n")
        if not data or b'"stopReason"' in data[-100:]:
            break
    elapsed = now() - begin
    await peer.close()
    assert lines == CEILING_LINES + 1, lines
    return CEILING_LINES / elapsed


async def round_trip(argv: list[str], args: argparse.Namespace) -> float:
    peer = await started(argv)
    times = []
    for _ in range(args.turns):
        begin = now()
        await peer.call("_demo/ping", {})
        times.append(now() - begin)
    await peer.close()
    return statistics.median(times)


def streaming(
    sessions: int, word: str = "flood"
) -> Callable[[list[str], argparse.Namespace], Awaitable[float]]:
    async def measure(argv: list[str], args: argparse.Namespace) -> float:
        """Notifications per second while `sessions` sessions stream at once: the demo
        agent writes its chunks as it makes them ("flood"), or all in one write at the end
        of the turn ("burst", which a relay cannot overlap with the agent's work)."""
        peer = await started(argv)
        ids = [await new_session(peer) for _ in range(sessions)]
        each = args.chunks // sessions
        begin = now()
        pending = {
            peer.send(
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": f"{word} {each}"}]},
            )
            for sid in ids
        }
        received = 0
        assert peer.process.stdout is not None
        while pending:
            line = await peer.process.stdout.readline()
            if b'"method"' in line:
                received += 1
            else:
                pending.discard(json.loads(line).get("id"))
        elapsed = now() - begin
        await peer.close()
        assert received == each * sessions, (received, each * sessions)
        return received / elapsed

    return measure


MEASURES: list[tuple[str, Callable[[list[str], argparse.Namespace], Awaitable[float]], str]] = [
    ("spawn to initialize response", spawn_to_initialize, "ms"),
    ("spawn to initialize, agent starting in 0.3 s", spawn_slow_agent_to_initialize, "ms"),
    ("spawn to initialize, agent answering at once", spawn_instant_agent_to_initialize, "ms"),
    ("short prompt turn, p50", prompt_turn(0.5), "ms"),
    ("short prompt turn, p95", prompt_turn(0.95), "ms"),
    ("round trip of a request, p50", round_trip, "ms"),
    ("notifications/s, 1 session streaming", streaming(1), "/s"),
    ("notifications/s, 10 sessions streaming", streaming(10), "/s"),
    ("notifications/s, 50 sessions streaming", streaming(50), "/s"),
    ("notifications/s, 1 session, all in one write", streaming(1, "burst"), "/s"),
    ("ceiling: notifications/s, agent writing at once", ceiling, "/s"),
]


def add_before(checkout: Path) -> None:
    """The relay of the revision checked out at `checkout`, as two more configurations."""
    compileall.compile_dir(str(checkout / "acpctl"), quiet=1)
    argv = ["env", f"PYTHONPATH={checkout}", sys.executable, "-P", "-m", "acpctl", *ACPCTL[-4:]]
    CONFIGS["before --no-history"] = [*argv, "--no-history"]
    CONFIGS["before"] = argv


async def main(args: argparse.Namespace) -> None:
    if args.before is not None:
        add_before(args.before)
    results: dict[str, dict[str, list[float]]] = {
        label: {config: [] for config in CONFIGS} for label, _, _ in MEASURES
    }
    subprocess.run([*ACPCTL_COMMAND, "agents", "add", "slow", "--", *SLOW_START], check=True)
    args.instant = Path(os.environ["ACPCTL_STATE_DIR"]).parent / "instant-agent.sh"
    args.instant.write_text(INSTANT_ANSWER)
    args.instant.chmod(0o755)
    add_instant = [*ACPCTL_COMMAND, "agents", "add", "instant", "--", str(args.instant)]
    subprocess.run(add_instant, check=True)
    subprocess.run([*ACPCTL_COMMAND, "agents", "add", "fast", "--", *FAST], check=True)
    order = list(CONFIGS)
    for rep in range(args.reps):
        for label, measure, _ in MEASURES:
            for config in order if rep % 2 == 0 else reversed(order):
                results[label][config].append(await measure(CONFIGS[config], args))
        print(f"repetition {rep + 1} of {args.reps} done", file=sys.stderr)

    def shown(value: float, unit: str) -> str:
        return f"{value * 1000:.3f} ms" if unit == "ms" else f"{value:,.0f}/s"

    header = " | ".join(f"{config} (min / median)" for config in CONFIGS)
    print(f"| measure | {header} | ratios of medians to direct |")
    print("|---" * (len(CONFIGS) + 2) + "|")
    for label, _, unit in MEASURES:
        cells = []
        medians = {}
        for config in CONFIGS:
            values = results[label][config]
            best = min(values) if unit == "ms" else max(values)
            medians[config] = statistics.median(values)
            cells.append(f"{shown(best, unit)} / {shown(medians[config], unit)}")
        ratios = ", ".join(
            f"{medians[config] / medians['direct']:.2f}x" for config in list(CONFIGS)[1:]
        )
        if "before" in medians:
            ratios += "; to before: " + ", ".join(
                f"{medians[config] / medians['before' + suffix]:.2f}x"
                for config, suffix in (("acpctl --no-history", " --no-history"), ("acpctl", ""))
            )
        print(f"| {label} | {' | '.join(cells)} | {ratios} |")
    print(
        f"\n{args.reps} repetitions, interleaved; {args.turns} turns or requests a repetition; "
        f"{args.chunks} notifications a streaming repetition. Best is the min for times and "
        f"the max for rates. {args.burn} CPU burner(s); load average at the end: "
        + ", ".join(f"{load:.1f}" for load in os.getloadavg())
    )


@contextlib.contextmanager
def burning(count: int) -> Iterator[None]:
    """`count` processes that spin on a core each: the relay measured on a busy machine."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=50_000)
    parser.add_argument("--before", type=Path, help="a checkout of an earlier revision")
    parser.add_argument("--burn", type=int, default=0, help="CPU burners beside the run")
    arguments = parser.parse_args()
    with private_home(), burning(arguments.burn):
        asyncio.run(main(arguments))
