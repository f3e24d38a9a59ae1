"""Issue 45, 3: every acpctl command that a message suggests is one acpctl takes. The
messages are found in the source wherever they are (string constants and f-strings, not
docstrings), so a message that moves is still checked; each suggested command is parsed by
acpctl's own command line, as a user pasting it would have it parsed."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import typer

from acpctl.cli import application
from tests.conftest import ROOT, cli

COMMANDS = list(typer.main.get_command(application()).commands)  # type: ignore[attr-defined]
SUGGESTION = re.compile(rf"acpctl ((?:{'|'.join(COMMANDS)})(?=\s|$)[^\n`'\"();,]*)")
# What a placeholder in a message stands for.
SAMPLES = {
    "NAME": "demo",
    "ID": "abc123",
    "CLIENT": "zed",
    "VERSION": "1.0.0",
    "FILE": "registry.json",
    "ORIGIN": "https://example.test",
    "COMMAND": "my-agent",
    "{X}": "demo",
}
# Sentences that begin with a command's name without suggesting it, and a client's name.
PROSE = {
    "acpctl sessions attach",
    "acpctl agents update fetches the registry",
    "acpctl agents list shows every agent",
    "acpctl run that started them",
    "acpctl host start --listen runs there",
    "acpctl run has this session open",
    "acpctl uninstall CLIENT --agent {X} removes an editor entry",
    "acpctl agents update --from FILE reads a registry document you downloaded",
    "acpctl run --acp speaks ACP on stdin/stdout and is meant to be launched by an editor",
    "acpctl run --acp exited",
    "acpctl run --acp: agent %s",
}


def _messages(tree: ast.AST) -> Iterator[str]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skipped.add(id(body[0].value))  # a docstring
        if isinstance(node, ast.JoinedStr):
            skipped.update(id(value) for value in node.values)
            yield "".join(
                str(v.value) if isinstance(v, ast.Constant) else "{X}" for v in node.values
            )
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and id(node) not in skipped:
            yield text


def suggested() -> list[tuple[str, str]]:
    found = set()
    for path in sorted((ROOT / "acpctl").rglob("*.py")):
        for text in _messages(ast.parse(path.read_text())):
            for match in SUGGESTION.finditer(text):
                command = match.group(0).strip()
                if command not in PROSE:
                    found.add((str(path.relative_to(ROOT)), command))
    return sorted(found)


def parse(line: str) -> None:
    """Parse `line` ("acpctl ...") as the command line would, without running it."""
    words = [
        SAMPLES.get(word, word)
        for word in line.split()[1:]
        if word not in ("...", "[ARGS...]") and not word.startswith("=")
    ]
    words = [re.sub(r"\{X\}", "x", word) for word in words]
    command: click.Command = typer.main.get_command(application())
    context = click.Context(command, info_name="acpctl")
    while isinstance(command, click.Group):
        name, *words = words or [""]
        found = command.get_command(context, name)
        if found is None:
            raise click.UsageError(f"no command {name!r} in {context.command_path}")
        command = found
        context = click.Context(command, info_name=name, parent=context)
    command.make_context(str(context.info_name), words, parent=context.parent)


@pytest.mark.parametrize(("where", "command"), suggested())
def test_a_suggested_command_is_one_acpctl_takes(where: str, command: str) -> None:
    try:
        parse(command)
    except click.ClickException as exc:
        pytest.fail(f"{where} suggests `{command}`, which acpctl refuses: {exc.format_message()}")


def test_the_scan_finds_the_suggestions_it_should() -> None:
    commands = {command for _, command in suggested()}
    assert "acpctl sessions verify --repair" in commands
    assert any(command.startswith("acpctl logs") for command in commands)
    with pytest.raises(click.ClickException):
        parse("acpctl sessions verify --mend")  # a suggestion acpctl would refuse is caught


def test_the_host_gone_hint_prints_the_hosts_log(home: Path) -> None:
    """The hint when the host dies said `acpctl logs serve`, which exited 2."""
    from acpctl import paths
    from acpctl.remote.lines import HOST_CLOSED

    logs = paths.ensure_private_dir(paths.logs_dir())
    (logs / "demo-20261204T100000-11.log").write_text("the agent's line\n")
    (logs / "serve-20261204T100000-12.log").write_text("session host: listening\n")
    hinted = re.search(r"acpctl (logs \w+)", HOST_CLOSED)
    assert hinted is not None
    shown = cli(*hinted.group(1).split())
    assert shown.returncode == 0 and shown.stdout == "session host: listening\n"
    os.utime(logs / "demo-20261204T100000-11.log", (1_000_000, 1_000_000))
    listed = cli("logs", "--list").stdout.splitlines()
    assert listed[0].endswith("serve-20261204T100000-12.log")  # the newest first
    assert listed[1].endswith("demo-20261204T100000-11.log")
    assert cli("logs", "demo", "--agent", "serve").returncode == 2
