"""What an editor waits for at start: spawn to the answer to `initialize`, through this
acpctl, through an earlier revision of it, and with the agent run directly.

Configurations, interleaved in every repetition (in order, then reversed): the agent
direct, and `acpctl run --acp` (the console script, as editors launch it) importing acpctl
from a checkout of an earlier revision (`--before`, made with `git worktree add`) or from
this checkout. Agents: one that answers at once (a
shell script, as the fastest native agents are), the built-in demo agent, and
claude-agent-acp from tests/npm (when installed; its initialize needs no model).

    git worktree add /tmp/acpctl-before be557b3
    python bench/initialize.py --before /tmp/acpctl-before [--reps 15]
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rawpeer import ACPCTL_COMMAND, DEMO, Peer, agents_add, now, private_home

ROOT = Path(__file__).resolve().parent.parent
CLAUDE = ROOT / "tests" / "npm" / "node_modules" / ".bin" / "claude-agent-acp"
INSTANT_ANSWER = (
    "#!/bin/sh\nread line\n"
    """echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{}}}'\n"""
    "exec cat > /dev/null\n"
)
# claude-agent-acp reads these at start; nothing here reaches a model.
CLAUDE_ENV = {"ANTHROPIC_API_KEY": "sk-bench", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}


async def spawn_to_initialize(argv: list[str], env: dict[str, str]) -> float:
    begin = now()
    peer = await Peer.start(argv, env)
    answer = await peer.call("initialize", {"protocolVersion": 1})
    elapsed = now() - begin
    assert "result" in answer, answer
    await peer.close()
    return elapsed


def acpctl(tree: Path, agent: str) -> tuple[list[str], dict[str, str]]:
    """`acpctl run --acp --agent AGENT` as editors launch it (the console script), with
    acpctl imported from the checkout `tree`."""
    return [*ACPCTL_COMMAND, "run", "--acp", "--agent", agent], {"PYTHONPATH": str(tree)}


def main(args: argparse.Namespace) -> None:
    home = Path(os.environ["ACPCTL_STATE_DIR"]).parent
    instant = home / "instant-agent.sh"
    instant.write_text(INSTANT_ANSWER)
    instant.chmod(0o755)
    env = {"PYTHONPATH": str(ROOT)}
    agents_add("instant", "--", str(instant), env=env)
    agents: dict[str, tuple[list[str], dict[str, str]]] = {
        "instant": ([str(instant)], {}),
        "demo": (DEMO, {}),
    }
    if CLAUDE.exists():
        pairs = [arg for key, value in CLAUDE_ENV.items() for arg in ("--env", f"{key}={value}")]
        agents_add("claude", *pairs, "--", str(CLAUDE), env=env)
        agents["claude"] = ([str(CLAUDE)], CLAUDE_ENV)
    else:
        print(f"{CLAUDE} is missing: claude-agent-acp not timed", file=sys.stderr)
    compileall.compile_dir(str(args.before / "acpctl"), quiet=1)
    configs = ["direct", "before", "after"]
    results: dict[str, dict[str, list[float]]] = {
        agent: {config: [] for config in configs} for agent in agents
    }
    for rep in range(args.reps):
        for agent, (direct, direct_env) in agents.items():
            for config in configs if rep % 2 == 0 else reversed(configs):
                if config == "direct":
                    argv, extra = direct, direct_env
                else:
                    argv, extra = acpctl(args.before if config == "before" else ROOT, agent)
                results[agent][config].append(asyncio.run(spawn_to_initialize(argv, extra)))
        print(f"repetition {rep + 1} of {args.reps} done", file=sys.stderr)
    print(
        "| agent | direct (min / median) | before (min / median) | after (min / median) "
        "| after - before, medians | after - direct, medians |"
    )
    print("|---|---|---|---|---|---|")
    for agent, by_config in results.items():
        medians = {config: statistics.median(values) for config, values in by_config.items()}
        cells = [
            f"{min(values) * 1000:.1f} / {medians[config] * 1000:.1f} ms"
            for config, values in by_config.items()
        ]
        print(
            f"| {agent} | {' | '.join(cells)} | "
            f"{(medians['after'] - medians['before']) * 1000:+.1f} ms | "
            f"{(medians['after'] - medians['direct']) * 1000:+.1f} ms |"
        )
    print(f"\n{args.reps} repetitions, interleaved; before: {args.before}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="a checkout to compare")
    parser.add_argument("--reps", type=int, default=15)
    with private_home():
        main(parser.parse_args())
