"""Issue 2: config, catalog, discovery and `acpctl agents`, with real files and processes."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import cli, write_executable


def _path_with(directory: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{directory}{os.pathsep}/usr/bin:/bin"}


def test_version_names_acpctl_and_python(home: Path) -> None:
    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("acpctl 0.") and "Python 3." in result.stdout


def test_list_json_with_empty_home(home: Path) -> None:
    result = cli("agents", "list", "--json")
    assert result.returncode == 0, result.stderr
    agents = {a["name"]: a for a in json.loads(result.stdout)}
    assert {"claude", "codex", "gemini", "goose", "pi", "demo"} <= set(agents)
    assert agents["demo"]["found"] is True and agents["demo"]["command"]
    assert agents["pi"]["kind"] == "pi-rpc"
    for agent in agents.values():
        assert {"name", "kind", "command", "found", "version"} <= set(agent)
    assert not (home / "config" / "config.toml").exists()  # listing writes nothing


def test_list_on_a_pipe_is_compact_with_what_this_machine_has_first(home: Path) -> None:
    """Off a terminal (and below 120 columns) a line for each agent found here, then the
    catalog's other names wrapped: the quick start's first output fits a screen."""
    cli("agents", "add", "mine", "--", sys.executable, "-c", "pass")
    listed = cli("agents", "list", "--no-probe")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert len(lines) < 30, listed.stdout
    assert lines[0].startswith("mine ") and lines[1].startswith("demo *")
    rest = listed.stdout.split("not installed (", 1)[1]
    assert max(map(len, rest.splitlines())) <= 80, rest  # the names wrapped
    everything = json.loads(cli("agents", "list", "--json", "--no-probe").stdout)
    for agent in everything:
        assert agent["found"] or agent["name"] in rest


@pytest.mark.e2e
def test_discovery_finds_binaries_and_probes_versions(home: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_executable(bin_dir / "goose", "#!/bin/sh\necho 'goose 1.9.3'\n")
    write_executable(bin_dir / "opencode", "#!/bin/sh\nsleep 30\n")  # hangs
    write_executable(bin_dir / "kimi", "#!/bin/sh\nprintf '\\377\\376garbage'\n")
    result = cli("agents", "list", "--json", env=_path_with(bin_dir))
    assert result.returncode == 0, result.stderr
    agents = {a["name"]: a for a in json.loads(result.stdout)}
    assert agents["goose"]["found"] and agents["goose"]["version"] == "1.9.3"
    assert agents["goose"]["command"] == [str(bin_dir / "goose"), "acp"]
    assert agents["opencode"]["found"] and agents["opencode"]["version"] is None
    assert "timed out" in agents["opencode"]["version_error"]
    assert agents["kimi"]["version"] is None
    assert "unrecognised" in agents["kimi"]["version_error"]
    assert agents["claude"]["found"] is False and agents["claude"]["install"]


@pytest.mark.e2e
def test_versions_from_package_json_or_probed_once_and_cached(home: Path, tmp_path: Path) -> None:
    """Issue 16: an npm agent's version comes from its package.json (it is never run); a
    probe's answer is cached until the executable changes, or `--refresh`."""
    package = tmp_path / "lib" / "node_modules" / "@scope" / "claude-agent-acp"
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps({"name": "@scope/claude-agent-acp", "version": "0.101.0", "bin": {"x": "y"}})
    )
    (package / "dist" / "package.json").write_text('{"type": "module"}')
    ran = tmp_path / "ran"
    script = write_executable(package / "dist" / "index.js", f"#!/bin/sh\necho ran >> {ran}\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude-agent-acp").symlink_to(script)
    goose = write_executable(bin_dir / "goose", f"#!/bin/sh\necho probe >> {ran}\necho 1.9.3\n")

    def listed(*flags: str) -> dict[str, dict[str, object]]:
        result = cli("agents", "list", "--json", *flags, env=_path_with(bin_dir))
        assert result.returncode == 0, result.stderr
        return {a["name"]: a for a in json.loads(result.stdout)}

    first = listed()
    assert first["claude"]["version"] == "0.101.0"
    assert first["goose"]["version"] == "1.9.3"
    assert listed()["goose"]["version"] == "1.9.3"
    assert ran.read_text().splitlines() == ["probe"]  # claude never ran; goose once
    goose.write_text(f"#!/bin/sh\necho probe >> {ran}\necho 1.10.0\n")  # a new release
    assert listed()["goose"]["version"] == "1.10.0"
    listed("--refresh")
    assert ran.read_text().splitlines() == ["probe"] * 3


@pytest.mark.e2e
def test_config_agent_overrides_catalog_and_keeps_comments(home: Path, tmp_path: Path) -> None:
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("# my agents\npackage_runners = false  # keep npx out\n")
    agent = write_executable(tmp_path / "my-goose", "#!/bin/sh\necho v2.0.1\n")
    result = cli(
        "agents", "add", "goose", "--env", "TOKEN=s3cret", "--", str(agent), "acp", "--flag"
    )
    assert result.returncode == 0, result.stderr
    text = config.read_text()
    assert text.startswith("# my agents\npackage_runners = false  # keep npx out\n")
    shown = json.loads(cli("agents", "show", "goose", "--json").stdout)
    assert shown["source"] == "config" and shown["command"] == [str(agent), "acp", "--flag"]
    assert shown["version"] == "2.0.1"
    assert shown["env"] == ["TOKEN"]  # names only: values may be secrets
    assert cli("agents", "default", "goose").returncode == 0
    listed = json.loads(cli("agents", "list", "--json").stdout)
    assert next(a for a in listed if a["name"] == "goose")["default"] is True
    assert cli("agents", "remove", "goose").returncode == 0
    after = config.read_text()
    assert after.startswith("# my agents\npackage_runners = false  # keep npx out\n")
    assert "goose" not in after
    assert stat.S_IMODE(config.parent.stat().st_mode) == 0o700


def test_unknown_agent_exits_2_pointing_at_the_list(home: Path) -> None:
    result = cli("agents", "show", "nosuch")
    assert result.returncode == 2
    assert "unknown agent 'nosuch'" in result.stderr and "acpctl agents list" in result.stderr
    assert "Traceback" not in result.stderr


def test_broken_config_exits_2_with_line_and_column(home: Path) -> None:
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    broken = 'default_agent = "x"\n[agents.a\ncommand = 1\n'
    config.write_text(broken)
    result = cli("agents", "add", "b", "--", "/bin/true")
    assert result.returncode == 2
    assert str(config) in result.stderr and "line 2" in result.stderr
    assert "column" in result.stderr
    assert config.read_text() == broken  # nothing written


def test_invalid_config_values_are_explained(home: Path) -> None:
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[agents.x]\ncommand = "x"\nkind = "grpc"\n')
    result = cli("agents", "list", "--json")
    assert result.returncode == 2 and "kind must be one of acp, pi-rpc" in result.stderr


def test_missing_and_non_executable_commands(home: Path, tmp_path: Path) -> None:
    not_exec = tmp_path / "agent.sh"
    not_exec.write_text("#!/bin/sh\n")
    assert cli("agents", "add", "a", "--", str(not_exec)).returncode == 0
    assert cli("agents", "add", "b", "--", "no-such-agent-binary").returncode == 0
    agents = {a["name"]: a for a in json.loads(cli("agents", "list", "--json").stdout)}
    assert agents["a"]["found"] is False and "not executable" in agents["a"]["reason"]
    assert agents["b"]["found"] is False and "not found" in agents["b"]["reason"]


def test_package_runner_fallback_is_opt_in(home: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_executable(bin_dir / "npx", "#!/bin/sh\nexit 0\n")
    env = _path_with(bin_dir)
    agents = {a["name"]: a for a in json.loads(cli("agents", "list", "--json", env=env).stdout)}
    assert agents["claude"]["found"] is False
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("package_runners = true\n")
    agents = {a["name"]: a for a in json.loads(cli("agents", "list", "--json", env=env).stdout)}
    # the registry's package, at the registry's version
    from acpctl.agents import catalog

    claude = catalog.lookup("claude")
    assert claude is not None
    assert agents["claude"]["command"][:3] == [
        str(bin_dir / "npx"),
        "--yes",
        claude.distributions["npx"].package,
    ]
    assert agents["claude"]["command"][2].startswith("@agentclientprotocol/claude-agent-acp@")
    assert agents["claude"]["installed_from"] == "npx"


def test_env_overrides_move_every_directory(home: Path, tmp_path: Path) -> None:
    from acpctl import paths

    assert paths.config_file() == home / "config" / "config.toml"
    assert paths.sessions_dir() == home / "data" / "sessions"
    assert paths.logs_dir() == home / "state" / "logs"
    os.environ["ACPCTL_SESSION_DIR"] = str(tmp_path / "elsewhere")
    try:
        assert paths.sessions_dir() == tmp_path / "elsewhere"
    finally:
        del os.environ["ACPCTL_SESSION_DIR"]


@pytest.mark.parametrize(
    "output,expected",
    [
        ("goose 1.9.3\n", "1.9.3"),
        ("v0.23.1", "0.23.1"),
        ("Gemini CLI 0.61.0-nightly", "0.61.0-nightly"),
        ("no digits here", None),
        ("", None),
    ],
)
def test_parse_version(output: str, expected: str | None) -> None:
    from acpctl.agents.discovery import parse_version

    assert parse_version(output) == expected


def test_agents_add_refuses_a_split_name_and_warns_of_a_missing_command(home: Path) -> None:
    """Issue 17: `agents add bad name -- x` stored "name" as the command."""
    split = cli("agents", "add", "bad", "name", "--", "x")
    assert split.returncode == 2 and "'name' stands between the name and --" in split.stderr
    missing = cli("agents", "add", "z", "--", "/nonexistent/bin", "--flag", "--", "more")
    assert missing.returncode == 0 and "/nonexistent/bin is not found" in missing.stderr
    config = (home / "config" / "config.toml").read_text()
    assert 'args = ["--flag", "--", "more"]' in config


def test_a_mistyped_agent_or_command_gets_one_suggestion(home: Path) -> None:
    """Issue 31, 8: one close name, not the whole catalog; "Did you mean" once."""
    result = cli("agents", "show", "claud")
    assert result.returncode == 2
    assert "did you mean 'claude'?" in result.stderr and "amp" not in result.stderr
    typo = cli("sesions")
    assert typo.returncode == 2 and typo.stderr.count("Did you mean") == 1


@pytest.mark.e2e
def test_a_closed_pipe_ends_a_command_quietly_with_status_0(home: Path) -> None:
    """Issue 31, 13: `acpctl agents show NAME | head -1` exited 1 (typer's own EPIPE exit)."""
    import subprocess
    import sys

    reader, writer = os.pipe()
    os.close(reader)  # the reader has gone before the first line
    try:
        result = subprocess.run(
            [sys.executable, "-m", "acpctl", "agents", "show", "demo"],
            stdout=writer,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(writer)
    assert (result.returncode, result.stderr) == (0, b"")


def test_a_bare_interpreter_in_an_agents_command_is_the_users_on_path(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31, 5: `python3 my_agent.py` ran acpctl's own venv python (found beside acpctl
    first), without the agent's packages, and its version was shown as the agent's."""
    from acpctl import config
    from acpctl.agents import discovery

    users_bin = tmp_path / "bin"
    users_bin.mkdir()
    python = write_executable(users_bin / "python3", "#!/bin/sh\nexit 0\n")
    monkeypatch.setenv("PATH", f"{users_bin}{os.pathsep}{os.environ['PATH']}")
    assert (discovery.acpctl_bin_dir() / "python3").exists()  # the one that won before
    assert cli("agents", "add", "mine", "--", "python3", "my_agent.py").returncode == 0
    resolved = discovery.resolve(config.load(), "mine")
    assert resolved.argv == [str(python), "my_agent.py"]
    assert resolved.version_args == ()  # python3 --version is not the agent's version
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    missing = discovery.resolve(config.load(), "mine")
    assert missing.argv is None and missing.reason == "python3 not found on PATH"


def test_a_package_that_names_its_command_runs_that_command(home: Path, tmp_path: Path) -> None:
    """Issue 43, 7: registry npx and uvx entries may name the command inside their package
    (`npx --package PKG CMD`, `uvx --from PKG CMD`): resolved, installed and run."""
    from acpctl.agents import catalog, discovery, installer, registry
    from acpctl.agents.catalog import Distribution
    from acpctl.errors import AcpctlError

    npx = Distribution("npx", "@x/agents@1.0.0", None, "x-acp", None, ("--acp",), {})
    uvx = Distribution("uvx", "x-agents==1.0.0", None, "x-acp", None, (), {})
    assert discovery._package_runner("npx", "/bin/npx", npx) == [
        "/bin/npx",
        "--yes",
        "--package",
        "@x/agents@1.0.0",
        "x-acp",
    ]
    assert discovery._package_runner("uvx", "/bin/uvx", uvx) == [
        "/bin/uvx",
        "--from",
        "x-agents==1.0.0",
        "x-acp",
    ]
    plain = npx._replace(cmd=None)
    assert discovery._package_runner("npx", "/bin/npx", plain) == [
        "/bin/npx",
        "--yes",
        "@x/agents@1.0.0",
    ]
    # The registry's schema takes the field (it refused it before).
    document, _ = registry.load()
    agent = dict(document["agents"][0])
    agent["distribution"] = {"npx": {"package": "@x/agents@1.0.0", "cmd": "x-acp"}}
    registry.validate({**document, "agents": [agent]})
    # An npm install runs the bin the registry names, which must be the package's.
    package = tmp_path / "agents"
    package.mkdir()
    (package / "package.json").write_text(
        json.dumps({"name": "@x/agents", "bin": {"x-cli": "cli.js", "x-acp": "acp.js"}})
    )
    entry = catalog.lookup("claude")
    assert entry is not None
    assert installer.bin_name(package, entry, "x-acp") == "x-acp"
    with pytest.raises(AcpctlError, match="has no executable 'x-gone'"):
        installer.bin_name(package, entry, "x-gone")
