"""`acpctl run`: a terminal client for any agent; with --acp, the server editors launch.

The command's options come from one table, `runner.options.RUN_OPTIONS`, which the fast
`run --acp` parser reads too."""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Any

import click
import typer

from acpctl.cli.completions import agent_names, session_names
from acpctl.errors import UsageError
from acpctl.runner.options import FLAG, RUN_OPTIONS, VALUES, RunOption, refuse_outside_acp

PYTHON_TYPES: dict[str, Any] = {"str": str, "float": float, "path": Path}
PROMPT_HELP = (
    "The prompt (its words joined). `-` adds what comes on stdin, and with no prompt a piped "
    "stdin is the prompt; no prompt on a terminal: a chat. With --acp: the agent's own "
    "arguments (its terminal login)."
)


def _annotation(option: RunOption) -> Any:
    if option.takes == FLAG:
        return bool
    kind = PYTHON_TYPES[option.type]
    return list[kind] if option.takes == VALUES else kind  # type: ignore[valid-type]


def _typer_option(option: RunOption) -> Any:
    extra: dict[str, Any] = {}
    if option.choices:
        extra["click_type"] = click.Choice(option.choices)
    completions = {"agent": agent_names, "session": session_names}
    if option.name in completions:
        extra["autocompletion"] = completions[option.name]
    return typer.Option(option.default, *option.flags, help=option.help, **extra)


def run(prompt: list[str] | None, **values: Any) -> None:
    """Talk to an agent from the shell, in the same sessions the editor sees.

    Exit codes: 0 end_turn, 1 error, 2 usage, 3 timeout, 4 refusal, 5 permission
    denied, 130 cancelled.
    """
    if values["acp_mode"]:
        from acpctl.runner import main as runner

        for option in RUN_OPTIONS:
            if not option.with_acp and values[option.name] != option.default:
                raise refuse_outside_acp(option)
        if prompt:
            raise typer.Exit(runner.login(values["agent"], prompt))
        raise typer.Exit(
            runner.serve(values["agent"], not values["no_history"], values["through_host"])
        )
    raise typer.Exit(_terminal(prompt, **values))


# typer reads the command's parameters from its signature: built here from the table.
run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter(
            "prompt",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Argument(None, help=PROMPT_HELP, show_default=False),
            annotation=list[str],
        ),
        *(
            inspect.Parameter(
                option.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=_typer_option(option),
                annotation=_annotation(option),
            )
            for option in RUN_OPTIONS
        ),
    ]
)
run.__annotations__ = {p.name: p.annotation for p in run.__signature__.parameters.values()}  # type: ignore[attr-defined]


def _terminal(
    prompt: list[str] | None,
    *,
    agent: str | None,
    cwd: str | None,
    session: str | None,
    fork: bool,
    name: str | None,
    mode: str | None,
    model: str | None,
    config: list[str] | None,
    mcp_config: Path | None,
    continue_: bool,
    approve_all: bool,
    approve_reads: bool,
    deny_all: bool,
    output_format: str,
    timeout: float | None,
    no_history: bool,
    through_host: bool,
    acp_mode: bool,
) -> int:
    from acpctl.terminal.client import Options, main

    if sum((approve_all, approve_reads, deny_all)) > 1:
        raise UsageError("choose one of --approve-all, --approve-reads, --deny-all")
    if session and continue_:
        raise UsageError("--session and --continue exclude each other")
    if fork and not session:
        raise UsageError("--fork needs --session ID")
    if name is not None:
        from acpctl.cli.sessions import check_name

        name = check_name(name)
    from acpctl.terminal import controls

    pairs = controls.config_pairs(config or [])
    servers = controls.mcp_servers(mcp_config) if mcp_config else []
    policy = (
        "approve-all"
        if approve_all
        else "approve-reads"
        if approve_reads
        else "deny-all"
        if deny_all
        else "ask"
        if sys.stdin.isatty()
        else "approve-reads"
    )
    # stdin is read only when asked (`-`) or when there is no prompt: a prompt in a shell
    # loop must not swallow the loop's input.
    words = [word for word in prompt or [] if word != "-"]
    piped = None
    if "-" in (prompt or []) or (not words and not sys.stdin.isatty()):
        piped = sys.stdin.read()
        if not words and not piped.strip():
            raise UsageError('the prompt on stdin is empty: acpctl run "PROMPT", or pipe one in')
    text = " ".join(words) or None
    directory = os.path.abspath(cwd or os.getcwd())
    if not os.path.isdir(directory):
        raise UsageError(f"--cwd {directory} is not a directory")
    return main(
        Options(
            agent=agent,
            prompt=text,
            cwd=directory,
            session=session,
            continue_=continue_,
            policy=policy,
            format=output_format,
            timeout=timeout,
            piped=piped or None,
            mode=mode,
            model=model,
            config=pairs,
            mcp_servers=servers,
            name=name,
            fork=fork,
            history=not no_history,
            through_host=through_host,
        )
    )
