"""Issue 16: `run --acp` spawns the agent it spawned last under the same name before it
reads config.toml and the catalog. While nothing that resolution was read from has changed,
the agent is not resolved at all; otherwise resolving afterwards keeps the hinted agent only
when it is the right one, and ends it otherwise. Agents with env of their own get no hint."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from acpctl.runner import spawn_hint
from tests.acp_peer import connect, initialized
from tests.conftest import run_cli, write_executable

FROM_HINT = "agent started from its spawn hint"


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


def hints(home: Path) -> dict[str, dict[str, object]]:
    return dict(json.loads((home / "state" / "spawn-hints.json").read_text()))


def add(*args: str) -> None:
    """`acpctl agents add ARGS`, and time for the change to settle (a hint written in the
    same instant as a change to its inputs is not trusted: spawn_hint.SETTLE_S)."""
    assert run_cli("agents", "add", *args).returncode == 0
    time.sleep(spawn_hint.SETTLE_S)


def runs_from_hint(home: Path) -> int:
    """How many runs' logs say their agent came from the hint, unresolved."""
    logs = (home / "state" / "logs").glob("*.log")
    return sum(path.read_text().count(FROM_HINT) for path in logs)


@pytest.mark.e2e
def test_an_unchanged_resolution_is_not_done_again(home: Path, tmp_path: Path) -> None:
    first = counting_agent(tmp_path, "first")
    add("a", "--", str(first))
    assert asyncio.run(answers("a")) == "acpctl-demo"
    assert hints(home)["a"]["argv"] == [str(first)] and starts(tmp_path, "first") == 1
    assert runs_from_hint(home) == 0
    asyncio.run(answers("a"))  # nothing changed: started from the hint, once, unresolved
    assert starts(tmp_path, "first") == 2 and runs_from_hint(home) == 1
    # the configuration changed: the hinted agent starts, is ended, the right one serves
    second = counting_agent(tmp_path, "second")
    add("a", "--", str(second))
    assert asyncio.run(answers("a")) == "acpctl-demo"
    assert starts(tmp_path, "first") == 3 and starts(tmp_path, "second") == 1
    assert hints(home)["a"]["argv"] == [str(second)] and runs_from_hint(home) == 1
    asyncio.run(answers("a"))
    assert starts(tmp_path, "second") == 2 and runs_from_hint(home) == 2
    # an agent with env of its own: no hint (its env is not copied out of config.toml)
    add("a", "--env", "KEY=secret", "--", str(second))
    asyncio.run(answers("a"))
    assert (
        "a" not in hints(home)
        and "secret" not in (home / "state").joinpath("spawn-hints.json").read_text()
    )


@pytest.mark.e2e
def test_a_broken_hint_file_is_ignored(home: Path, tmp_path: Path) -> None:
    (home / "state").mkdir(parents=True, exist_ok=True)
    (home / "state" / "spawn-hints.json").write_text('{"": ["/nonexistent/agent"], "x": 3')
    assert asyncio.run(answers("demo")) == "acpctl-demo"
    # the form before the hint kept its inputs: a bare command line, not trusted
    (home / "state" / "spawn-hints.json").write_text('{"demo": ["/nonexistent/agent"]}')
    assert asyncio.run(answers("demo")) == "acpctl-demo"
    assert hints(home)["demo"]["argv"][-1] == "acpctl.demo_agent"  # type: ignore[index]
    assert runs_from_hint(home) == 0


@pytest.mark.e2e
def test_a_hint_trusted_wrongly_costs_one_run(home: Path, tmp_path: Path) -> None:
    """A change that no input showed (here: a hint file naming another agent, with the
    inputs as they are) is found when the run it misled ends."""
    right, wrong = counting_agent(tmp_path, "right"), counting_agent(tmp_path, "wrong")
    add("a", "--", str(right))
    asyncio.run(answers("a"))
    stale = {**hints(home)["a"], "argv": [str(wrong)]}
    (home / "state" / "spawn-hints.json").write_text(json.dumps({"a": stale}))
    asyncio.run(answers("a"))
    assert starts(tmp_path, "wrong") == 1 and runs_from_hint(home) == 1
    assert hints(home)["a"]["argv"] == [str(right)]
    asyncio.run(answers("a"))
    assert (starts(tmp_path, "right"), starts(tmp_path, "wrong")) == (2, 1)
    assert runs_from_hint(home) == 2


def test_the_inputs_survive_being_stored(home: Path) -> None:
    (home / "config").mkdir()
    time.sleep(spawn_hint.SETTLE_S)
    hint = spawn_hint.Hint("demo", ["/bin/true"], 30.0, spawn_hint.resolution_inputs())
    spawn_hint.remember("demo", hint)
    stored = spawn_hint.read("demo")
    assert stored is not None and stored.inputs == spawn_hint.resolution_inputs()
    assert (stored.name, stored.argv, stored.silence_s) == ("demo", ["/bin/true"], 30.0)
    spawn_hint.remember("demo", None)
    assert spawn_hint.read("demo") is None


def test_a_hint_written_as_its_inputs_change_is_not_trusted(home: Path) -> None:
    (home / "config").mkdir()  # a moment ago: not settled
    hint = spawn_hint.Hint("demo", ["/bin/true"], 30.0, spawn_hint.resolution_inputs())
    spawn_hint.remember("demo", hint)
    stored = spawn_hint.read("demo")
    assert stored is not None and stored.argv == ["/bin/true"]
    assert stored.inputs != spawn_hint.resolution_inputs()


def changes_the_inputs(action: object) -> bool:
    before = spawn_hint.resolution_inputs()
    assert callable(action)
    action()
    return spawn_hint.resolution_inputs() != before


def test_every_input_of_a_resolution_is_watched(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever changes what discovery.resolve would answer changes the inputs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[agents.a]\ncommand = "x"\n')
    assert not changes_the_inputs(lambda: None)
    # config.toml edited in place, to a text of the same length
    assert changes_the_inputs(lambda: config.write_text('[agents.a]\ncommand = "y"\n'))
    # a command appears on PATH, or goes
    assert changes_the_inputs(lambda: write_executable(bin_dir / "agent", "#!/bin/sh\n"))
    assert changes_the_inputs(lambda: (bin_dir / "agent").unlink())
    # PATH itself, and $HOME (a command given as ~/...)
    assert changes_the_inputs(lambda: monkeypatch.setenv("PATH", str(bin_dir)))
    assert changes_the_inputs(lambda: monkeypatch.setenv("HOME", str(tmp_path)))
    # `agents install`: an agent's directory, then a new manifest written into it
    installed = home / "data" / "agents" / "some-agent"
    assert changes_the_inputs(lambda: installed.mkdir(parents=True))
    manifest = installed / "installed.json"
    assert changes_the_inputs(lambda: manifest.write_text("{}"))
    replacement = installed / "installed.json.tmp"
    replacement.write_text('{"version": "2"}')
    assert changes_the_inputs(lambda: replacement.replace(manifest))
    # `agents update`: the registry's cached copy
    registry = home / "data" / "registry"
    assert changes_the_inputs(lambda: registry.mkdir(parents=True))
    assert changes_the_inputs(lambda: (registry / "registry.json").write_text("{}"))
    # where the configuration is
    assert changes_the_inputs(lambda: monkeypatch.setenv("ACPCTL_CONFIG_DIR", str(tmp_path)))
