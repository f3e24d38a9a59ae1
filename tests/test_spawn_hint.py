"""Issue 16: `run --acp` spawns the agent it spawned last under the same name before it
reads config.toml and the catalog; resolving afterwards keeps that agent only when it is
the right one, and ends it otherwise. Agents with env of their own get no hint."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.acp_peer import connect, initialized
from tests.conftest import run_cli, write_executable

pytestmark = pytest.mark.e2e


def counting_agent(tmp_path: Path, name: str) -> Path:
    """The demo agent behind a script that counts its starts in STARTS-<name>."""
    return write_executable(
        tmp_path / f"{name}.sh",
        f"#!/bin/sh\necho started >> {tmp_path / ('starts-' + name)}\n"
        f"exec {sys.executable} -m acpctl.demo_agent\n",
    )


def starts(tmp_path: Path, name: str) -> int:
    path = tmp_path / f"starts-{name}"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def answers(agent: str) -> str:
    async with connect("--agent", agent) as (conn, _, _client):
        response = await initialized(conn)
        return str(response.agent_info.name if response.agent_info else "")


def hints(home: Path) -> dict[str, list[str]]:
    return dict(json.loads((home / "state" / "spawn-hints.json").read_text()))


def test_the_last_command_line_is_spawned_first_and_checked(home: Path, tmp_path: Path) -> None:
    first = counting_agent(tmp_path, "first")
    assert run_cli("agents", "add", "a", "--", str(first)).returncode == 0
    assert asyncio.run(answers("a")) == "acpctl-demo"
    assert hints(home)["a"] == [str(first)] and starts(tmp_path, "first") == 1
    asyncio.run(answers("a"))  # the hint was right: one start, not two
    assert starts(tmp_path, "first") == 2
    # the configuration changed: the hinted agent starts, is ended, the right one serves
    second = counting_agent(tmp_path, "second")
    assert run_cli("agents", "add", "a", "--", str(second)).returncode == 0
    assert asyncio.run(answers("a")) == "acpctl-demo"
    assert starts(tmp_path, "first") == 3 and starts(tmp_path, "second") == 1
    assert hints(home)["a"] == [str(second)]
    # an agent with env of its own: no hint (its env is not copied out of config.toml)
    assert run_cli("agents", "add", "a", "--env", "KEY=secret", "--", str(second)).returncode == 0
    asyncio.run(answers("a"))
    assert (
        "a" not in hints(home)
        and "secret" not in (home / "state").joinpath("spawn-hints.json").read_text()
    )


def test_a_broken_hint_file_is_ignored(home: Path, tmp_path: Path) -> None:
    (home / "state").mkdir(parents=True, exist_ok=True)
    (home / "state" / "spawn-hints.json").write_text('{"": ["/nonexistent/agent"], "x": 3')
    assert asyncio.run(answers("demo")) == "acpctl-demo"
    (home / "state" / "spawn-hints.json").write_text('{"demo": ["/nonexistent/agent"]}')
    assert asyncio.run(answers("demo")) == "acpctl-demo"
    assert hints(home)["demo"][-1] == "acpctl.demo_agent"
