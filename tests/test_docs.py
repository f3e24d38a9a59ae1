"""Issue 9: the docs cover every command and variable, completions are fresh, and every
runnable example in the README and docs runs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
import typer

from acpctl import __version__
from acpctl.agents.signatures import SIGNATURES
from acpctl.cli import application
from acpctl.cli.completions import SHELLS, script
from tests.conftest import ROOT

DOCS = sorted((ROOT / "docs").rglob("*.md"))


def all_docs() -> str:
    return "\n".join(p.read_text() for p in [ROOT / "README.md", *DOCS])


def command_paths(command: click.Command, prefix: str = "acpctl") -> list[str]:
    paths = [prefix]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            paths += command_paths(sub, f"{prefix} {name}")
    return paths


def test_every_command_is_documented() -> None:
    text = all_docs()
    missing = [p for p in command_paths(typer.main.get_command(application())) if p not in text]
    assert missing == []


def test_every_environment_variable_is_documented() -> None:
    used = set()
    for path in (ROOT / "acpctl").rglob("*.py"):
        used |= set(re.findall(r"\bACPCTL_[A-Z_]+\b", path.read_text()))
    used.discard("ACPCTL_COMPLETE")  # shell completion's, named by typer
    reference = (ROOT / "docs" / "configuration.md").read_text()
    assert sorted(v for v in used if f"`{v}`" not in reference) == []
    assert "ACPCTL_CONFIG_DIR" in used and "ACPCTL_SESSION_DIR" in used


@pytest.mark.parametrize("shell", SHELLS)
def test_completions_are_fresh(shell: str) -> None:
    checked_in = (ROOT / "completions" / f"acpctl.{shell}").read_text()
    assert checked_in == script(shell), f"regenerate: acpctl completions {shell}"


def completed(words: list[str], incomplete: str) -> list[str]:
    """What TAB offers after `acpctl WORDS INCOMPLETE`, asked of the command itself as the
    shell scripts ask it."""
    import typer.main
    from click.shell_completion import ShellComplete

    from acpctl.cli import application

    command = typer.main.get_command(application())
    complete = ShellComplete(command, {}, "acpctl", "_ACPCTL_COMPLETE")
    return [item.value for item in complete.get_completions(words, incomplete)]


def test_tab_completes_clients_shells_agents_and_sessions(home: Path) -> None:
    from acpctl.store.sessions import SessionMeta, SessionStore

    assert completed(["install"], "") == [
        "zed",
        "jetbrains",
        "vscode",
        "acpx",
        "nvim",
        "emacs",
        "toad",
        "neovim",
    ]
    assert completed(["uninstall"], "j") == ["jetbrains"]
    assert completed(["completions"], "") == ["bash", "zsh", "fish"]
    assert "claude" in completed(["run", "--agent"], "cl")
    store = SessionStore()
    for session_id, name in (("s-1", "refactor"), ("s-2", None)):
        meta = SessionMeta(session_id, agent="demo", command=["demo"], cwd="/tmp")
        meta.name = name
        store.create(meta).close()
    assert set(completed(["sessions", "show"], "")) == {"refactor", "s-1", "s-2"}
    assert completed(["sessions", "watch"], "ref") == ["refactor"]
    assert set(completed(["sessions", "delete", "s-1"], "s")) == {"s-1", "s-2"}
    assert completed(["run", "--session"], "re") == ["refactor"]


FAILURES = {
    "http-401": "the model API answered 401",
    "http-403": "the model API answered 403",
    "http-404": "the model API answered 404 for the model",
    "http-429": "the model API answered 429 (retry-after 2)",
    "http-529": "the model API answered 529",
    "http-500": "the model API answered 500",
    "refused": "the model API's port refused connections",
    "stalled": "the model API's stream stalled after its first event",
    "node-too-old": "on node 20",
    "missing-interpreter": "its #! interpreter missing",
    "not-executable": "its file not executable",
    "npx-offline": "the npm registry unreachable",
    "banner": "a banner printed on stdout before the agent started",
    "no-credentials": "no API key and no login",
}


def signatures_section() -> str:
    """docs/troubleshooting.md's known failures: every signature, and for each the lines
    of the recorded agents' output it was written from (tests/corpus)."""
    from acpctl.agents.signatures import diagnose
    from tests.corpus import FIXTURES, evidence, load

    lines = [
        "Each is matched case-insensitively against what acpctl saw: a failed request's "
        "error, what the agent's own log said while it was silent, its stderr in the run "
        "log and in Zed's log. The first in this list that matches wins. Under each, what "
        "the agents said when the failure was made on purpose here (`python -m "
        "tests.corpus.record`), the line that matched first.",
        "",
    ]
    for signature in SIGNATURES:
        lines += [
            f"### `{signature.id}`",
            "",
            f"- **Cause:** {signature.diagnosis}.",
            f"- **Fix:** {signature.fix}.",
        ]
        said = []
        for path in FIXTURES:
            fixture = load(path)
            if fixture["expected"] != signature.id:
                continue
            found = diagnose(evidence(fixture))
            line = (found[1] if found else "").replace("`", "'").strip()
            line = line if len(line) <= 160 else line[:157] + "..."
            said.append(f"  - {fixture['agent']}, {FAILURES[fixture['failure']]}: `{line}`")
        if said:
            lines += ["- **Seen with:**", *said]
        else:
            lines.append("- **Not reproduced here; it looks like:**")
            lines += [f"  - `{example}`" for example in signature.examples]
        lines.append("")
    return "\n".join(lines)


REGENERATE = "regenerate: ACPCTL_REGENERATE_DOCS=1 pytest tests/test_docs.py"


def generated_as_it_is(page: Path, marker: str, section: str) -> bool:
    """Whether the part of a page between `<!-- MARKER: generated ... -->` and `<!-- MARKER:
    end -->` is `section` (ACPCTL_REGENERATE_DOCS=1 writes it)."""
    text = page.read_text()
    start = text.index(f"<!-- {marker}: generated")
    start = text.index("\n", start) + 1
    end = text.index(f"<!-- {marker}: end -->")
    expected = text[:start] + section + text[end:]
    if os.environ.get("ACPCTL_REGENERATE_DOCS"):
        page.write_text(expected)
    return text == expected


def test_troubleshooting_lists_every_signature_with_what_agents_said() -> None:
    """Issue 20: every signature, with the recorded agents' output it was written from."""
    page = ROOT / "docs" / "troubleshooting.md"
    assert generated_as_it_is(page, "signatures", signatures_section() + "\n"), REGENERATE


def test_changelog_names_the_version() -> None:
    assert f"## {__version__}" in (ROOT / "CHANGELOG.md").read_text()


def examples() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *DOCS]:
        blocks = re.findall(r"```sh\n(.*?)```", path.read_text(), re.S)
        if path.name == "README.md" and path.parent == ROOT:
            blocks = blocks[2:]  # the two set-up commands: tests/test_readme.py
        for block in blocks:
            for line in block.splitlines():
                if line.strip() and not line.startswith("#"):
                    found.append((str(path.relative_to(ROOT)), line.strip()))
    return found


def test_examples_are_found() -> None:
    assert len(examples()) >= 10


FOLLOWS = "# Ctrl-C"  # a line that goes on until Ctrl-C (the docs say so beside it)


@pytest.mark.e2e
def test_doc_examples_run(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import signal
    import tempfile

    (home / ".config" / "zed").mkdir(parents=True)
    # The session host's socket needs a short path (getting-started.md turns the host on).
    state = Path(tempfile.mkdtemp(prefix="acpd", dir="/tmp"))
    monkeypatch.setenv("ACPCTL_STATE_DIR", str(state))
    env = dict(os.environ)
    try:
        for source, line in examples():
            argv = shlex.split(line, comments=True)
            assert argv[0] == "acpctl", (source, line)
            command = [sys.executable, "-m", "acpctl", *argv[1:]]
            if FOLLOWS in line:  # once it says Ctrl-C ends it, Ctrl-C ends it cleanly
                follower = subprocess.Popen(
                    command,
                    env=env,
                    cwd=tmp_path,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
                assert follower.stderr is not None
                said = b""
                while b"Ctrl-C" not in said and (more := follower.stderr.readline()):
                    said += more
                follower.send_signal(signal.SIGINT)
                shown, rest = follower.communicate(timeout=30)
                assert shown and follower.returncode == 0, (source, line, (said + rest)[-2000:])
                continue
            result = subprocess.run(
                command,
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
            allowed = (0, 1) if argv[1] == "doctor" else (0,)
            assert result.returncode in allowed, (source, line, result.stderr[-2000:])
    finally:
        _stop_host(state)


def _stop_host(state: Path) -> None:
    """The session host a doc started (in the background, as it does for a user)."""
    import shutil

    from tests.conftest import stop_running_host

    stop_running_host()
    shutil.rmtree(state, ignore_errors=True)


def test_the_relay_page_says_what_acpctl_does_with_every_method_and_update() -> None:
    """Issue 14: docs/relay.md covers the whole method table."""
    from acpctl import protocol as acp

    page = (ROOT / "docs" / "relay.md").read_text()
    missing = [name for name in [*acp.METHODS, *acp.UPDATES] if f"| `{name}` |" not in page]
    assert not missing, f"docs/relay.md does not say what acpctl does with {missing}"


def catalog_table() -> str:
    """docs/agents.md's table of the registry's agents, from the shipped snapshot and the
    overlay (every platform's distributions, not only this machine's)."""
    import json

    from acpctl.agents import registry

    agents = json.loads(registry.SNAPSHOT.read_bytes())["agents"]
    overlay = json.loads((ROOT / "acpctl" / "agents" / "overlay.json").read_bytes())["agents"]
    agents += [{"id": i, **o} for i, o in overlay.items() if "distribution" in o]
    rows = [
        "| name | registry id | version | distributions | looks on PATH for |",
        "|---|---|---|---|---|",
    ]
    for agent in sorted(agents, key=lambda a: overlay.get(a["id"], {}).get("alias", a["id"])):
        extra = overlay.get(agent["id"], {})
        name = extra.get("alias", agent["id"])
        kinds = ", ".join(sorted(agent["distribution"]))
        kinds += " (pi-rpc)" if extra.get("kind") == "pi-rpc" else ""
        binaries = ", ".join(f"`{b}`" for b in extra.get("binaries", []))
        rows.append(f"| `{name}` | {agent['id']} | {agent['version']} | {kinds} | {binaries} |")
    return "\n".join(rows) + "\n"


def test_the_catalog_page_matches_the_registry() -> None:
    """Issue 18: docs/agents.md lists every registry agent as the shipped data says."""
    assert generated_as_it_is(ROOT / "docs" / "agents.md", "catalog", catalog_table()), REGENERATE


def test_what_a_config_that_does_not_parse_stops(home: Path) -> None:
    """Issue 31, 12: configuration.md says which commands stop and which go on."""
    from tests.conftest import cli

    (home / "config").mkdir(exist_ok=True)
    (home / "config" / "config.toml").write_text("this is [not toml\n")
    assert cli("agents", "list").returncode == 2
    for command in (["sessions", "list"], ["usage"], ["ps"]):
        assert cli(*command).returncode == 0, command
