"""`run --acp`'s start: its options come from one table (each applies with --acp or is
refused), the agent is resolved from the configuration as it is now and in the editor's
directory, state files on the way are passed over whatever they have become, and a restarted
agent that refuses the handshake is never used."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from acpctl import protocol as acp
from acpctl.cli import COMMANDS, application
from acpctl.files import read_json_state
from acpctl.runner.main import fast_main
from acpctl.runner.options import FLAG, RUN_OPTIONS, RunOption, parse_serve_args
from tests.conftest import cli, run_cli, write_executable
from tests.raw_peer import raw_editor

# A value each option would take on the command line.
EXAMPLE_VALUES = {"str": "x", "float": "5", "path": "/dev/null"}


def _example(option: RunOption) -> list[str]:
    if option.takes == FLAG:
        return [option.flags[0]]
    value = option.choices[-1] if option.choices else EXAMPLE_VALUES[option.type]
    return [option.flags[0], value]


REFUSED = [option for option in RUN_OPTIONS if not option.with_acp]


@pytest.mark.parametrize("option", REFUSED, ids=lambda o: o.flags[0])
def test_an_option_that_does_not_apply_with_acp_is_refused_on_both_paths(
    option: RunOption, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fast_main(["--acp", *_example(option)]) == 2
    assert f"{option.flags[0]} does not apply with --acp" in capsys.readouterr().err
    # The --key=value form, and typer's own path (an option after the prompt's place).
    if option.takes != FLAG:
        assert fast_main(["--acp", f"{option.flags[0]}={_example(option)[1]}"]) == 2
    refused = cli("run", *_example(option), "--acp")
    assert refused.returncode == 2, refused
    assert f"{option.flags[0]} does not apply with --acp" in refused.stderr


def test_the_options_that_apply_with_acp_are_read_by_the_fast_parser() -> None:
    assert {o.name for o in RUN_OPTIONS if o.with_acp} == {
        "acp_mode",
        "agent",
        "no_history",
        "through_host",
    }
    parsed = parse_serve_args(["--acp", "--agent", "claude", "--no-history"])
    assert parsed is not None
    assert (parsed.agent, parsed.history, parsed.agent_args) == ("claude", False, [])
    assert not parsed.through_host
    through = parse_serve_args(["--through-host", "--acp"])
    assert through is not None and through.through_host and through.history
    parsed = parse_serve_args(["-a=x", "--acp"])  # only long options take =VALUE
    assert parsed is not None and parsed.agent_args == ["-a=x"]
    login = parse_serve_args(["--acp", "--agent=claude", "--cli", "--", "--format", "x"])
    assert login is not None
    assert (login.agent, login.agent_args) == ("claude", ["--cli", "--format", "x"])
    assert parse_serve_args(["--acp", "--help"]) is None
    assert parse_serve_args(["--agent", "x"]) is None  # not --acp: typer's


def test_a_value_option_without_its_value_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert fast_main(["--acp", "--agent"]) == 2
    assert "--agent needs a value" in capsys.readouterr().err
    assert fast_main(["--acp=yes"]) == 2
    assert "--acp takes no value" in capsys.readouterr().err


def test_the_typer_command_has_exactly_the_tables_options() -> None:
    command = typer.main.get_command(application())
    run = command.commands["run"]  # type: ignore[attr-defined]
    options = {tuple(p.opts) for p in run.params if p.name != "prompt"}
    assert options == {option.flags for option in RUN_OPTIONS}
    help_text = cli("run", "--help").stdout
    for option in RUN_OPTIONS:
        assert option.flags[0] in help_text


def test_a_start_builds_only_the_command_it_runs() -> None:
    def built(argv: list[str] | None) -> dict[str, Any]:
        return typer.main.get_command(application(argv)).commands  # type: ignore[attr-defined,no-any-return]

    assert set(built(["sessions", "attach", "s-1"])) == {"sessions"}
    assert set(built(["run", "--agent", "demo"])) == {"run"}
    # The root's help, a mistyped name (click's "Did you mean") and completion see them all.
    for argv in (None, [], ["--help"], ["sesions"]):
        assert set(built(argv)) == set(COMMANDS)
    sessions = built(["sessions"])["sessions"].commands
    assert {"list", "attach", "search", "watch"} <= set(sessions)
    typo = cli("sesions")
    assert typo.returncode == 2 and "Did you mean 'sessions'?" in typo.stderr


# -- state on the start path -------------------------------------------------------------


def _state_cases(tmp_path: Path) -> dict[str, Path]:
    cases = {}
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    cases["fifo"] = fifo
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as file:
        file.truncate(64 * 1024 * 1024)  # sparse: takes no disk
    cases["huge"] = huge
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    cases["deep"] = deep
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\xff\xfe{not json")
    cases["garbage"] = garbage
    directory = tmp_path / "directory.json"
    directory.mkdir()
    cases["directory"] = directory
    return cases


def test_a_state_file_is_passed_over_whatever_it_has_become(tmp_path: Path) -> None:
    for name, path in _state_cases(tmp_path).items():
        assert read_json_state(path) is None, name
    good = tmp_path / "good.json"
    good.write_text('{"agents": []}')
    assert read_json_state(good) == {"agents": []}


@pytest.mark.parametrize("case", ["fifo", "huge", "deep", "garbage", "directory"])
def test_the_registry_copy_and_a_manifest_never_stop_agents_list(
    home: Path, tmp_path: Path, case: str
) -> None:
    source = _state_cases(tmp_path)[case]
    registry = home / "data" / "registry"
    registry.mkdir(parents=True)
    manifest_dir = home / "data" / "agents" / "claude-acp"
    manifest_dir.mkdir(parents=True)
    for target in (
        registry / "registry.json",
        registry / "source.json",
        manifest_dir / "installed.json",
    ):
        target.symlink_to(source)
    listed = cli("agents", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert any(agent["name"] == "demo" for agent in json.loads(listed.stdout))


@pytest.mark.parametrize("case", ["fifo", "huge", "deep"])
def test_a_config_file_that_cannot_be_one_gets_one_line(
    home: Path, tmp_path: Path, case: str
) -> None:
    source = _state_cases(tmp_path)[case]
    if case == "deep":
        source.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.symlink_to(source)
    result = cli("agents", "list")
    assert result.returncode == 2
    assert result.stderr.startswith("acpctl: error: ") and "config.toml" in result.stderr
    assert "Traceback" not in result.stderr


# -- what runs ---------------------------------------------------------------------------

STAMPING_AGENT = """#!/bin/sh
echo "$0 $(pwd)" >> {log}
exec {python} {demo}
"""


def _stamping_agent(path: Path, log: Path) -> Path:
    demo = Path(__file__).resolve().parent.parent / "acpctl" / "demo_agent.py"
    return write_executable(path, STAMPING_AGENT.format(log=log, python=sys.executable, demo=demo))


def _initialized(*args: str, cwd: str | None = None) -> dict[str, object]:
    async def scenario() -> dict[str, object]:
        async with raw_editor(*args, cwd=cwd) as editor:
            answer = await editor.call(acp.INITIALIZE, {"protocolVersion": 1})
            return dict(answer)

    return asyncio.run(scenario())


@pytest.mark.e2e
def test_an_agent_removed_from_the_config_is_never_run_again(home: Path, tmp_path: Path) -> None:
    starts = tmp_path / "starts.log"
    agent = _stamping_agent(tmp_path / "gone-agent", starts)
    assert run_cli("agents", "add", "gone", "--", str(agent)).returncode == 0
    assert "result" in _initialized("--agent", "gone")
    assert run_cli("agents", "remove", "gone").returncode == 0
    for _ in range(3):
        refused = subprocess.run(
            [sys.executable, "-m", "acpctl", "run", "--acp", "--agent", "gone"],
            stdin=subprocess.PIPE,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert refused.returncode == 2 and "unknown agent 'gone'" in refused.stderr
    assert len(starts.read_text().splitlines()) == 1


@pytest.mark.e2e
def test_a_command_relative_to_the_project_runs_that_projects_agent(
    home: Path, tmp_path: Path
) -> None:
    starts = tmp_path / "starts.log"
    projects = [tmp_path / "project-a", tmp_path / "project-b"]
    for project in projects:
        (project / "tools").mkdir(parents=True)
        _stamping_agent(project / "tools" / "agent", starts)
    assert run_cli("agents", "add", "local", "--", "tools/agent").returncode == 0
    order = [projects[0], projects[1], projects[0], projects[1]]
    for project in order:
        assert "result" in _initialized("--agent", "local", cwd=str(project))
    ran = [line.split()[0] for line in starts.read_text().splitlines()]
    assert ran == [str(project / "tools" / "agent") for project in order]


# A native agent whose restarts refuse initialize: the first start answers, a prompt
# saying "crash" ends it, and every later start refuses the handshake. It logs each
# method it receives, by start.
REFUSING_AGENT = """
import json, os, sys
log = os.environ["REFUSING_AGENT_LOG"]
with open(log, "a") as f:
    f.write("start\\n")
starts = open(log).read().count("start")
def send(m):
    sys.stdout.write(json.dumps(m) + "\\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    with open(log, "a") as f:
        f.write(f"{starts} {m.get('method')}\\n")
    if "id" not in m:
        continue
    method, params = m.get("method"), m.get("params") or {}
    if method == "initialize":
        if starts > 1:
            send({"jsonrpc": "2.0", "id": m["id"],
                  "error": {"code": -32603, "message": "not today"}})
        else:
            send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1,
                  "agentCapabilities": {"sessionCapabilities": {"resume": {}}}}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        if "crash" in json.dumps(params):
            sys.exit(3)
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "end_turn"}})
    else:
        send({"jsonrpc": "2.0", "id": m["id"], "result": {}})
"""


@pytest.mark.e2e
def test_a_restarted_agent_that_refuses_the_handshake_is_never_used(
    home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "agent.log"
    script = tmp_path / "refusing.py"
    script.write_text(REFUSING_AGENT)
    agent = write_executable(tmp_path / "refusing", f"#!/bin/sh\nexec {sys.executable} {script}\n")
    added = run_cli(
        "agents", "add", "refusing", "--env", f"REFUSING_AGENT_LOG={log}", "--", str(agent)
    )
    assert added.returncode == 0

    async def scenario() -> None:
        async with raw_editor("--agent", "refusing") as editor:
            sid = await editor.session(str(tmp_path))
            crashed = await editor.prompt(sid, "crash")
            assert "agent exited with status 3" in crashed["error"]["message"]
            for _ in range(2):
                refused = await editor.prompt(sid, "hello?")
                assert (
                    "refused initialize or authenticate: not today" in refused["error"]["message"]
                ), refused

    asyncio.run(scenario())
    later = [line for line in log.read_text().splitlines() if line[:1].isdigit() and line[0] != "1"]
    assert later and all(line.endswith(" initialize") for line in later), later


@pytest.mark.e2e
def test_a_terminal_run_without_history_records_nothing(home: Path) -> None:
    result = run_cli("run", "--no-history", "hello")
    assert result.returncode == 0 and "You said: hello" in result.stdout, result.stderr
    assert json.loads(run_cli("sessions", "list", "--json").stdout) == []
    assert run_cli("run", "hello").returncode == 0
    assert len(json.loads(run_cli("sessions", "list", "--json").stdout)) == 1


SILENT_AGENT = """
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {
            "protocolVersion": 1, "agentCapabilities": {}}}) + "\\n")
        sys.stdout.flush()
    # everything else: never answered
"""


@pytest.mark.e2e
def test_a_request_the_agent_never_answers_fails_after_the_deadline(
    home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "silent.py"
    script.write_text(SILENT_AGENT)
    agent = write_executable(tmp_path / "silent", f"#!/bin/sh\nexec {sys.executable} {script}\n")
    assert run_cli("agents", "add", "silent", "--", str(agent)).returncode == 0
    config = home / "config" / "config.toml"
    config.write_text("request_timeout_s = 1\n" + config.read_text())

    async def scenario() -> None:
        async with raw_editor("--agent", "silent") as editor:
            await editor.call(acp.INITIALIZE, {"protocolVersion": 1})
            answer = await editor.call("_silent/anything", {}, timeout=10)
            assert "did not answer _silent/anything within 1 s" in answer["error"]["message"]

    asyncio.run(scenario())
    log = next((home / "state" / "logs").glob("silent-*.log")).read_text()
    assert "did not answer _silent/anything within 1 s" in log


@pytest.mark.e2e
def test_the_demo_agent_answers_bad_params_with_an_error(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with raw_editor() as editor:
            sid = await editor.session(str(tmp_path))
            for method, params in (
                (acp.SESSION_SET_MODE, {"sessionId": sid, "modeId": ["shout"]}),
                (
                    acp.SESSION_SET_CONFIG_OPTION,
                    {"sessionId": sid, "configId": "tone", "value": {}},
                ),
            ):
                answer = await editor.call(method, params, timeout=10)
                assert answer["error"]["code"] == acp.INVALID_PARAMS, answer

    asyncio.run(scenario())


@pytest.mark.e2e
def test_a_restarted_agent_that_never_answers_the_handshake_fails_at_the_deadline(
    home: Path, tmp_path: Path
) -> None:
    """The replayed initialize has the same deadline as any request: without it, a restart
    that never answered held every later request for ever."""
    log = tmp_path / "agent.log"
    script = tmp_path / "mute.py"
    script.write_text(
        REFUSING_AGENT.replace(
            'send({"jsonrpc": "2.0", "id": m["id"],\n                  "error": {"code": -32603, '
            '"message": "not today"}})',
            "pass  # a restart never answers initialize",
        )
    )
    assert "never answers" in script.read_text()
    agent = write_executable(tmp_path / "mute", f"#!/bin/sh\nexec {sys.executable} {script}\n")
    added = run_cli("agents", "add", "mute", "--env", f"REFUSING_AGENT_LOG={log}", "--", str(agent))
    assert added.returncode == 0
    config = home / "config" / "config.toml"
    config.write_text("request_timeout_s = 1\n" + config.read_text())

    async def scenario() -> None:
        async with raw_editor("--agent", "mute") as editor:
            sid = await editor.session(str(tmp_path))
            crashed = await editor.prompt(sid, "crash")
            assert "agent exited with status 3" in crashed["error"]["message"]
            stuck = await asyncio.wait_for(editor.prompt(sid, "hello?"), 20)
            assert "did not answer initialize within 1 s" in stuck["error"]["message"], stuck

    asyncio.run(scenario())


@pytest.mark.e2e
def test_run_acp_through_the_host_imports_no_http_library() -> None:
    """Issue 40, 1: the link to this machine's host is the remote agents' link, and still
    the thin client's start imports no HTTP library (aiohttp is for URL agents only)."""
    code = (
        "import sys, acpctl.runner.main, acpctl.remote.relay, acpctl.remote.lines\n"
        "print([m for m in ('aiohttp', 'yarl', 'multidict') if m in sys.modules])"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "[]"
