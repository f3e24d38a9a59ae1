"""Issue 19 (items 5 and 6): `acpctl run` sets a session's mode, model and config options
and gives it MCP servers and a name before its first prompt; sessions are found by name,
renamed and forked from the shell. Through real `acpctl run` processes and the demo and SDK
agents."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from acpctl.errors import UsageError
from acpctl.store.sessions import SessionStore
from acpctl.terminal import controls
from tests.conftest import TEST_AGENTS, run_cli, write_executable


def sessions(*args: str) -> list[dict[str, object]]:
    result = run_cli("sessions", "list", "--json", *args)
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


@pytest.mark.e2e
def test_mode_and_config_are_set_before_the_prompt(home: Path) -> None:
    run = run_cli("run", "--agent", "demo", "--mode", "Shout", "--config", "tone=excited", "hi")
    assert run.returncode == 0, run.stderr
    assert "YOU SAID: HI!" in run.stdout
    (listed,) = sessions()
    meta = SessionStore().read_meta(str(listed["id"]))
    assert meta.state["mode"] == "shout" and meta.state["config"] == {"tone": "excited"}


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--mode", "loud"], "mode 'loud' is not offered by this session; valid: echo, shout"),
        (["--config", "tone=angry"], "value for tone 'angry' is not offered"),
        (["--config", "colour=red"], "config option 'colour' is not offered here; valid: tone"),
        (["--model", "gpt"], "model 'gpt' is not offered by this session; valid: none"),
        (["--config", "tone"], "--config takes KEY=VALUE, not 'tone'"),
    ],
)
def test_an_unknown_value_exits_2_listing_the_valid_ones(
    home: Path, flags: list[str], said: str
) -> None:
    run = run_cli("run", "--agent", "demo", *flags, "hi")
    assert run.returncode == 2 and said in run.stderr, run.stderr
    assert sessions() == []  # the session made for it is not left behind


@pytest.mark.e2e
def test_names_find_sessions_and_forks_keep_the_original(home: Path) -> None:
    assert run_cli("run", "--agent", "demo", "--name", "refactor", "first").returncode == 0
    taken = run_cli("run", "--agent", "demo", "--name", "refactor", "again")
    assert taken.returncode == 2 and "already named 'refactor'" in taken.stderr
    # by name (and a name's prefix) wherever a session is named
    assert "You said: second" in run_cli("run", "--session", "refactor", "second").stdout
    shown = run_cli("sessions", "show", "refac")
    assert shown.returncode == 0 and "second" in shown.stdout
    # a fork from the shell, and run --fork: the original keeps its two turns
    fork = run_cli("sessions", "fork", "refactor", "--name", "try-2", "--json")
    assert fork.returncode == 0, fork.stderr
    forked = json.loads(fork.stdout)
    run = run_cli("run", "--session", "refactor", "--fork", "--name", "try-3", "third")
    assert run.returncode == 0 and "You said: third" in run.stdout
    by_name = {s["name"]: s for s in sessions()}
    assert by_name["try-2"]["id"] == forked["id"]
    assert by_name["try-2"]["parentId"] == by_name["refactor"]["id"] == forked["parentId"]
    assert by_name["try-3"]["parentId"] == by_name["refactor"]["id"]
    assert by_name["refactor"]["turns"] == 2 and by_name["try-3"]["turns"] == 3
    # rename, and a name taken, and a name removed
    assert run_cli("sessions", "rename", "try-2", "try-4").returncode == 0
    clash = run_cli("sessions", "rename", "try-4", "refactor")
    assert clash.returncode == 2 and "already named" in clash.stderr
    assert run_cli("sessions", "rename", "try-4", "-").returncode == 0
    assert run_cli("run", "--session", "try-4", "x").returncode == 2
    missing = run_cli("sessions", "fork", "nothing-like-it")
    assert missing.returncode == 2 and "no stored session" in missing.stderr


@pytest.mark.e2e
def test_a_fork_named_like_its_parent_names_the_parent_it_came_from(home: Path) -> None:
    """The parent is looked up once, before the fork: a name prefix that the fork's own
    name also starts with names the parent, not two sessions."""
    assert run_cli("run", "--agent", "demo", "--name", "refactor", "first").returncode == 0
    fork = run_cli("sessions", "fork", "refac", "--name", "refactor-b", "--json")
    assert fork.returncode == 0, fork.stderr
    by_name = {s["name"]: s for s in sessions()}
    assert json.loads(fork.stdout) == {
        "id": by_name["refactor-b"]["id"],
        "parentId": by_name["refactor"]["id"],
    }


@pytest.mark.e2e
def test_mcp_servers_reach_the_agent(home: Path, tmp_path: Path) -> None:
    script = write_executable(
        tmp_path / "sdk-agent", f"#!/bin/sh\nexec {sys.executable} {TEST_AGENTS / 'sdk_agent.py'}\n"
    )
    assert run_cli("agents", "add", "sdk", "--", str(script)).returncode == 0
    claude = tmp_path / ".mcp.json"
    claude.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "/usr/bin/mcp-files", "args": ["--root", "/"]},
                    "docs": {"type": "http", "url": "https://example.invalid/mcp"},
                }
            }
        )
    )
    run = run_cli("run", "--agent", "sdk", "--mcp-config", str(claude), "mcp")
    assert run.returncode == 0, run.stderr
    assert "mcp files:/usr/bin/mcp-files,docs:https://example.invalid/mcp" in run.stdout
    zed = tmp_path / "zed.json"
    zed.write_text(json.dumps({"context_servers": {"z": {"command": {"path": "/bin/z"}}}}))
    run = run_cli("run", "--agent", "sdk", "--mcp-config", str(zed), "mcp")
    assert "mcp z:/bin/z" in run.stdout
    broken = tmp_path / "broken.json"
    broken.write_text('{"mcpServers": {"x": {"args": []}}')
    run = run_cli("run", "--agent", "sdk", "--mcp-config", str(broken), "mcp")
    assert run.returncode == 2 and "is not JSON" in run.stderr


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ({"mcpServers": {"x": {"args": []}}}, "server 'x' has neither a command nor a url"),
        ({"mcpServers": {"x": {"command": "c", "args": "a b"}}}, "args must be a list"),
        ({"mcpServers": {"x": {"url": "u", "type": "ws"}}}, "type must be http or sse"),
        ({"servers": {}}, "no mcpServers (or context_servers) object"),
        ([], "expected an object with mcpServers"),
    ],
)
def test_bad_mcp_files_are_one_clear_line(tmp_path: Path, document: object, said: str) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(document))
    with pytest.raises(UsageError, match=said.replace("(", r"\(").replace(")", r"\)")):
        controls.mcp_servers(path)


def test_env_and_headers_take_acps_shape(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "a": {"command": "c", "env": {"K": "v"}},
                    "b": {"type": "sse", "url": "http://h/s", "headers": {"Authorization": "x"}},
                }
            }
        )
    )
    assert controls.mcp_servers(path) == [
        {"name": "a", "command": "c", "args": [], "env": [{"name": "K", "value": "v"}]},
        {
            "type": "sse",
            "name": "b",
            "url": "http://h/s",
            "headers": [{"name": "Authorization", "value": "x"}],
        },
    ]


@pytest.mark.e2e
def test_search_and_usage_from_the_shell(home: Path) -> None:
    for prompt in ("refactor the tokenizer", "document the parser", "tokenizer tests please"):
        assert run_cli("run", "--agent", "demo", prompt).returncode == 0
    found = run_cli("sessions", "search", "tokenizer", "--json")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    assert {h["kind"] for h in hits} == {"prompt", "answer"} and len(hits) == 4
    start, end = hits[0]["matches"][0]
    assert hits[0]["snippet"][start:end] == "tokenizer"
    assert run_cli("sessions", "search", "nowhere-to-be-found").returncode == 1
    assert run_cli("sessions", "search", "tokenizer", "--agent", "other").returncode == 1
    bad = run_cli("sessions", "search", "x", "--since", "last tuesday")
    assert bad.returncode == 2 and "neither a date" in bad.stderr
    assert run_cli("sessions", "search", "--", '""').returncode == 2
    report = json.loads(run_cli("usage", "--json").stdout)
    assert report == [
        {
            "agent": "demo",
            "sessions": 3,
            "turns": 3,
            "tokens": {"inputTokens": 9, "outputTokens": 9, "totalTokens": 18},
            "cost": {},
        }
    ]
    by_day = json.loads(run_cli("usage", "--by", "day", "--since", "1d", "--json").stdout)
    assert len(by_day) == 1 and by_day[0]["turns"] == 3
    table = run_cli("usage", "--by", "session")
    assert table.returncode == 0 and "refactor the tokenizer" in table.stdout
    # Issue 45, 6: a session a row, so its agent, not a SESSIONS column of 1s.
    header = table.stdout.splitlines()[0].split()
    assert header[:3] == ["SESSION", "AGENT", "TURNS"], table.stdout
    by_session = json.loads(run_cli("usage", "--by", "session", "--json").stdout)
    assert all(row["agent"] == "demo" and "sessions" not in row for row in by_session)
