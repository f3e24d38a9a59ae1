"""Issue 3: `acpctl install` / `uninstall` on real files, with real processes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import json5
import pytest

from tests.conftest import ROOT, acpctl_argv, cli, run_cli

GOLDEN = ROOT / "tests" / "golden"


def zed_settings(home: Path) -> Path:
    path = home / ".config" / "zed" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def add_agents(tmp_path: Path, *names: str, env: str | None = None) -> None:
    for name in names:
        extra = ["--env", env] if env else []
        assert (
            run_cli(
                "agents", "add", name, *extra, "--", sys.executable, "-m", "acpctl.demo_agent"
            ).returncode
            == 0
        )


def test_zed_install_is_idempotent_and_backed_up(home: Path) -> None:
    settings = zed_settings(home)
    original = (GOLDEN / "zed_default.json").read_bytes()
    settings.write_bytes(original)
    settings.chmod(0o640)
    first = cli("install", "zed")
    assert first.returncode == 0, first.stderr
    assert "added" in first.stdout
    entry = json5.loads(settings.read_text())["agent_servers"]["Demo (acpctl)"]
    assert entry["type"] == "custom" and entry["args"] == ["run", "--acp", "--agent", "demo"]
    assert Path(entry["command"]).is_absolute()
    assert stat.S_IMODE(settings.stat().st_mode) == 0o640  # mode kept
    backups = list(settings.parent.glob("settings.json.acpctl-*.bak"))
    assert len(backups) == 1 and backups[0].read_bytes() == original
    assert not (settings.parent / "settings_backup.json").exists()
    after_first = settings.read_bytes()
    second = cli("install", "zed")
    assert second.returncode == 0 and "unchanged" in second.stdout
    assert settings.read_bytes() == after_first  # byte-identical, no new backup
    assert len(list(settings.parent.glob("settings.json.acpctl-*.bak"))) == 1
    assert cli("uninstall", "zed").returncode == 0
    assert settings.read_bytes() == original  # the container install made went too


@pytest.mark.e2e
def test_entries_carry_no_env_and_env_an_older_acpctl_wrote_is_removed(
    home: Path, tmp_path: Path
) -> None:
    """Issue 17: an agent's env (its secrets, a HOME) stays in config.toml; an entry that an
    earlier acpctl wrote with env is reported by doctor and rewritten without it."""
    settings = zed_settings(home)
    settings.write_text('{\n  "agent_servers": {\n    "x": {"type": "registry"}\n  }\n}\n')
    add_agents(tmp_path, "mine", env="ANTHROPIC_API_KEY=sk-secret-1")
    assert cli("install", "zed", "--agent", "mine").returncode == 0
    assert "sk-secret" not in settings.read_text() and '"env"' not in settings.read_text()
    # As acpctl 0.1 wrote it:
    document = json5.loads(settings.read_text())
    document["agent_servers"]["mine (acpctl)"]["env"] = {"ANTHROPIC_API_KEY": "sk-secret-1"}
    settings.write_text(json.dumps(document, indent=2))
    report = json.loads(cli("doctor", "--json").stdout)
    (finding,) = [f for f in report if "carries" in f["message"]]
    assert finding["status"] == "problem" and "secrets (ANTHROPIC_API_KEY)" in finding["message"]
    assert "sk-secret" not in json.dumps(report)  # names only
    result = cli("install", "zed", "--agent", "mine")
    assert "updated (env)" in result.stdout
    servers = json5.loads(settings.read_text())["agent_servers"]
    assert "env" not in servers["mine (acpctl)"] and "x" in servers
    assert cli("uninstall", "zed", "--agent", "mine").returncode == 0
    assert settings.read_text().count("registry") == 1


def test_unparsable_file_is_refused_and_untouched(home: Path) -> None:
    settings = zed_settings(home)
    broken = b'{\n  "theme": "x",\n  "agent_servers": {\n    "a": 1\n    "b": 2\n  }\n}\n'
    settings.write_bytes(broken)
    result = cli("install", "zed")
    assert result.returncode == 2
    assert f"{settings}:5:5" in result.stderr and "not changed" in result.stderr
    assert settings.read_bytes() == broken
    assert list(settings.parent.iterdir()) == [settings]  # no backup, no temp file


def test_non_object_container_is_refused(home: Path) -> None:
    settings = zed_settings(home)
    settings.write_text('{\n  "agent_servers": ["nope"]\n}\n')
    result = cli("install", "zed")
    assert result.returncode == 2
    assert ":2:" in result.stderr and "expected an object" in result.stderr


def test_symlinked_settings_are_written_through(home: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "zed-settings.json"
    real.write_text('{\n  // mine\n  "agent_servers": {}\n}\n')
    link = zed_settings(home)
    link.symlink_to(real)
    assert cli("install", "zed").returncode == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "Demo (acpctl)" in real.read_text() and "// mine" in real.read_text()
    assert cli("uninstall", "zed").returncode == 0
    assert real.read_text() == '{\n  // mine\n  "agent_servers": {}\n}\n'


def test_read_only_file_is_refused(home: Path) -> None:
    settings = zed_settings(home)
    settings.write_text("{}\n")
    settings.chmod(0o444)
    result = cli("install", "zed")
    assert result.returncode == 2 and "read-only" in result.stderr
    assert settings.read_text() == "{}\n"


def test_dry_run_and_print_write_nothing(home: Path) -> None:
    settings = zed_settings(home)
    settings.write_text('{\n  "agent_servers": {}\n}\n')
    dry = cli("install", "zed", "--dry-run")
    assert dry.returncode == 0 and '+    "Demo (acpctl)": {' in dry.stdout
    assert dry.stdout.count("---") >= 1
    printed = cli("install", "zed", "--print")
    assert json.loads(printed.stdout)["Demo (acpctl)"]["type"] == "custom"
    assert settings.read_text() == '{\n  "agent_servers": {}\n}\n'
    assert not list(settings.parent.glob("*.bak"))


@pytest.mark.e2e
def test_backups_keep_the_newest_five(home: Path, tmp_path: Path) -> None:
    settings = zed_settings(home)
    settings.write_text("{}\n")
    add_agents(tmp_path, "a")
    for index in range(7):
        settings.write_text(f'{{"n": {index}}}\n')  # each install then has an entry to add
        assert run_cli("install", "zed", "--agent", "a").returncode == 0
    assert len(list(settings.parent.glob("settings.json.acpctl-*.bak"))) == 5


@pytest.mark.e2e
def test_twenty_concurrent_installs(home: Path, tmp_path: Path) -> None:
    settings = zed_settings(home)
    settings.write_text((GOLDEN / "zed_agents_comments.json").read_text())
    names = [f"agent{i}" for i in range(20)]
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "".join(
            f'[agents.{n}]\ncommand = "{sys.executable}"\nargs = ["-m", "acpctl.demo_agent"]\n'
            for n in names
        )
    )
    processes = [
        subprocess.Popen(
            acpctl_argv("install", "zed", "--agent", n),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in [*names, "agent0", "agent1"]
    ]
    assert all(p.wait(120) == 0 for p in processes)
    servers = json5.loads(settings.read_text())["agent_servers"]
    assert sorted(k for k in servers if k.endswith("(acpctl)")) == sorted(
        f"{n} (acpctl)" for n in names
    )
    assert settings.read_text().count('"agent0 (acpctl)"') == 1
    assert "/* agents I use */" in settings.read_text()


def test_jetbrains_vscode_and_acpx(home: Path) -> None:
    jetbrains = home / ".jetbrains" / "acp.json"
    jetbrains.parent.mkdir()
    jetbrains.write_text((GOLDEN / "jetbrains_acp.json").read_text())
    vscode = home / ".config" / "Code" / "User" / "settings.json"
    vscode.parent.mkdir(parents=True)
    vscode.write_text((GOLDEN / "vscode_settings.json").read_text())
    cursor = home / ".config" / "Cursor" / "User" / "settings.json"
    cursor.parent.mkdir(parents=True)
    for client in ("jetbrains", "vscode", "acpx"):
        result = cli("install", client)
        assert result.returncode == 0, result.stderr
    jb = json5.loads(jetbrains.read_text())
    assert jb["default_mcp_settings"] == {"use_idea_mcp": False, "use_custom_mcp": True}
    assert "type" not in jb["agent_servers"]["Demo (acpctl)"]
    assert "Hand Made" in jb["agent_servers"]
    vs = json5.loads(vscode.read_text())
    assert vs["acp.agents"]["Demo (acpctl)"]["args"][-1] == "demo" and "Codex" in vs["acp.agents"]
    assert "// editor" in vscode.read_text()
    assert json5.loads(cursor.read_text())["acp.agents"]["Demo (acpctl)"]
    acpx = json.loads((home / ".acpx" / "config.json").read_text())
    assert acpx["agents"]["acpctl-demo"]["argv"][-4:] == ["run", "--acp", "--agent", "demo"]
    listed = cli("install", "--list").stdout
    assert "Demo (acpctl) -> demo" in listed and "acpctl-demo -> demo" in listed
    for client in ("jetbrains", "vscode", "acpx"):
        assert cli("uninstall", client, "--all").returncode == 0
    assert jetbrains.read_text() == (GOLDEN / "jetbrains_acp.json").read_text()
    assert vscode.read_text() == (GOLDEN / "vscode_settings.json").read_text()


def test_uninstall_leaves_entries_it_did_not_write(home: Path) -> None:
    settings = zed_settings(home)
    settings.write_text(
        '{"agent_servers": {"Demo (acpctl)": {"type": "custom", '
        '"command": "/usr/bin/other", "args": []}}}'
    )
    result = cli("uninstall", "zed", "--all")
    assert "no acpctl entries" in result.stdout
    assert "/usr/bin/other" in settings.read_text()


@pytest.mark.parametrize(
    "client,needle",
    [
        ("nvim", "codecompanion.adapters"),
        ("emacs", "agent-shell-make-agent-config"),
        ("toad", "toad acp"),
    ],
)
def test_snippet_clients_print_and_write_nothing(home: Path, client: str, needle: str) -> None:
    result = cli("install", client)
    assert result.returncode == 0 and needle in result.stdout
    assert any(
        form in result.stdout
        for form in (
            '"run", "--acp", "--agent", "demo"',
            '"run" "--acp" "--agent" "demo"',
            "run --acp --agent demo",
        )
    )
    assert not list(home.rglob("*.json"))


def test_missing_zed_and_unknown_client(home: Path) -> None:
    result = cli("install", "zed")
    assert result.returncode == 2 and "Zed's config directory" in result.stderr
    unknown = cli("install", "sublime")
    assert unknown.returncode == 2 and "unknown client" in unknown.stderr
    agent = cli("install", "nvim", "--agent", "nosuch")
    assert agent.returncode == 2 and "unknown agent" in agent.stderr


@pytest.mark.e2e
def test_large_file_is_edited(home: Path) -> None:
    settings = zed_settings(home)
    body = "".join(f'  "key{i}": {{"value": "{"x" * 80}"}}, // c{i}\n' for i in range(9000))
    original = "{\n" + body + '  "agent_servers": {"x": 1}\n}\n'
    settings.write_text(original)
    assert len(original) > 1_000_000
    assert run_cli("install", "zed", timeout=120).returncode == 0
    edited = settings.read_text()
    assert "Demo (acpctl)" in edited and edited.count("// c") == 9000
    assert run_cli("uninstall", "zed", timeout=120).returncode == 0
    assert settings.read_text() == original


def test_files_that_cannot_be_used_get_clear_errors(home: Path, tmp_path: Path) -> None:
    result = cli("install", "zed", "--settings", str(tmp_path))
    assert result.returncode == 2 and "is a directory" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.e2e
def test_install_defaults_say_what_they_pick_and_uninstall_takes_every_entry(
    home: Path, tmp_path: Path
) -> None:
    """Issue 17: without --agent, install registers the configured default, else the agents
    found here (named), else the demo (said so); uninstall without flags removes every
    entry acpctl wrote in the client, listing them."""
    settings = zed_settings(home)
    settings.write_text("{}\n")
    bare = {**os.environ, "PATH": "/usr/bin:/bin"}
    demo = cli("install", "zed", env=bare)
    assert demo.returncode == 0 and "registering the built-in demo agent" in demo.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "goose").write_text("#!/bin/sh\necho goose 1.0\n")
    (bin_dir / "goose").chmod(0o755)
    found = cli("install", "zed", env={**bare, "PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert "the agents found on this machine: goose" in found.stderr
    add_agents(tmp_path, "mine")
    assert cli("agents", "default", "mine").returncode == 0
    chosen = cli("install", "zed", env=bare)
    assert "registering" not in chosen.stderr and "mine (acpctl): added" in chosen.stdout
    entries = json5.loads(settings.read_text())["agent_servers"]
    assert len(entries) == 3
    removed = cli("uninstall", "zed")
    assert removed.stdout.count("removed from") == 3
    assert "agent_servers" not in json5.loads(settings.read_text())  # install had made it


@pytest.mark.e2e
def test_nothing_is_left_beside_the_users_file(home: Path, tmp_path: Path) -> None:
    """Issue 17: the lock acpctl holds while editing lives in its own state directory."""
    settings = zed_settings(home)
    settings.write_text("{}\n")
    add_agents(tmp_path, "a")
    assert cli("install", "zed", "--agent", "a").returncode == 0
    assert cli("uninstall", "zed").returncode == 0
    beside = sorted(p.name for p in settings.parent.iterdir())
    assert [n for n in beside if not n.startswith("settings.json.acpctl-")] == ["settings.json"]
    assert list((home / "state" / "locks").iterdir())  # the lock went here


def test_help_everywhere_choices_and_the_neovim_alias(home: Path) -> None:
    """Issue 17: -h on every command; the arguments say what they take; --format is a
    choice; `install neovim` is `install nvim`."""
    for command in (["-h"], ["agents", "list", "-h"], ["sessions", "show", "-h"], ["doctor", "-h"]):
        shown = cli(*command)
        assert shown.returncode == 0 and shown.stdout.startswith("Usage:"), command
    assert "zed, jetbrains, vscode, acpx" in cli("install", "-h").stdout
    assert "bash, zsh or fish" in cli("completions", "-h").stdout
    wrong = cli("run", "--format", "xml", "hi")
    assert wrong.returncode == 2 and "'xml' is not one of 'text', 'json', 'quiet'" in wrong.stderr
    assert "env var" not in wrong.stderr
    assert cli("install", "neovim").stdout == cli("install", "nvim").stdout


def test_a_dry_run_warns_as_the_install_would(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 31, 13: the temporary-directory warning was left out of --dry-run. (Issue 53:
    this test passed on the project-virtualenv warning alone; it checks the one it sets up.)"""
    import sys
    import tempfile

    # As if acpctl ran from a temporary directory: the one its interpreter is in, as the
    # entry would name it (not where a link resolves to).
    monkeypatch.setattr(tempfile, "tempdir", str(Path(sys.executable).absolute().parent.parent))
    monkeypatch.chdir(tmp_path)  # no project here: its virtualenv is not this directory's
    (home / ".acpx").mkdir()
    shown = cli("install", "acpx", "--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert "is in a temporary directory: the entry breaks when it is cleaned up" in shown.stderr
    assert "this project's virtualenv" not in shown.stderr


@pytest.mark.parametrize("original", ['{"a": 1}', "{}", "{/* c */}", '{\n  "a": 1 // c\n}\n'])
def test_install_then_uninstall_is_byte_exact_when_install_made_the_container(
    home: Path, tmp_path: Path, original: str
) -> None:
    """Issue 41: `{"a": 1}` came back as `{"a": 1,\\n  "agent_servers": {}}`."""
    settings = tmp_path / "settings.json"
    settings.write_text(original)
    assert cli("install", "zed", "--settings", str(settings), "--agent", "demo").returncode == 0
    assert "agent_servers" in settings.read_text()
    assert cli("uninstall", "zed", "--settings", str(settings)).returncode == 0
    assert settings.read_text() == original


def test_a_users_own_container_stays_even_empty(home: Path, tmp_path: Path) -> None:
    """acpctl knows the container it made by its own record (its state directory's
    created-containers.json): one that was there before install is the user's."""
    settings = tmp_path / "settings.json"
    original = '{\n  "agent_servers": {}\n}\n'
    settings.write_text(original)
    cli("install", "zed", "--settings", str(settings), "--agent", "demo")
    cli("uninstall", "zed", "--settings", str(settings))
    assert settings.read_text() == original
    # Made by install, then given an entry of the user's: it stays, with that entry.
    settings.write_text("{}")
    cli("install", "zed", "--settings", str(settings), "--agent", "demo")
    text = settings.read_text().replace('"agent_servers": {', '"agent_servers": {"mine": {},', 1)
    settings.write_text(text)
    cli("uninstall", "zed", "--settings", str(settings))
    assert json5.loads(settings.read_text()) == {"agent_servers": {"mine": {}}}
