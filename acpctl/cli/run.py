"""`acpctl run`: a terminal client for any agent; with --acp, the server editors launch."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
import typer

from acpctl.cli.completions import agent_option
from acpctl.errors import UsageError

FORMATS = ("text", "json", "quiet")


def run(
    prompt: list[str] = typer.Argument(
        None,
        help="The prompt (its words joined). `-` adds what comes on stdin, and with no "
        "prompt a piped stdin is the prompt; no prompt on a terminal: a chat.",
        show_default=False,
    ),
    acp_mode: bool = typer.Option(False, "--acp", help="Serve ACP on stdio (for editors)."),
    agent: str = agent_option(
        None, "Agent name (default: configured default, else the built-in demo)."
    ),
    cwd: str = typer.Option(None, "--cwd", help="Working directory of the session."),
    session: str = typer.Option(
        None,
        "--session",
        help="Continue this stored session (an id, a name, or a unique prefix of either).",
    ),
    fork: bool = typer.Option(
        False, "--fork", help="With --session: continue in a fork of it, leaving it as it is."
    ),
    name: str = typer.Option(None, "--name", help="Name the new (or forked) session."),
    mode: str = typer.Option(None, "--mode", help="Set the session's mode first (an id or name)."),
    model: str = typer.Option(None, "--model", help="Set the session's model first."),
    config: list[str] = typer.Option(
        None, "--config", help="Set a session config option first: KEY=VALUE (repeatable)."
    ),
    mcp_config: Path = typer.Option(
        None,
        "--mcp-config",
        help="MCP servers for the session, from a JSON file (.mcp.json's mcpServers, or "
        "Zed's context_servers).",
    ),
    continue_: bool = typer.Option(
        False,
        "--continue",
        "-c",
        help="Continue the newest session of this agent in this directory.",
    ),
    approve_all: bool = typer.Option(False, "--approve-all", help="Allow every tool call."),
    approve_reads: bool = typer.Option(
        False,
        "--approve-reads",
        help="Allow reads, deny the rest (the default without a terminal).",
    ),
    deny_all: bool = typer.Option(False, "--deny-all", help="Deny every tool call."),
    output_format: str = typer.Option(
        "text",
        "--format",
        click_type=click.Choice(FORMATS),
        help="text, json (NDJSON of the updates) or quiet (the final text only).",
    ),
    timeout: float = typer.Option(
        None, "--timeout", help="Cancel the turn after SECONDS (exit 3)."
    ),
    no_history: bool = typer.Option(
        False, "--no-history", help="With --acp: do not record new sessions."
    ),
) -> None:
    """Talk to an agent from the shell, in the same sessions the editor sees.

    Exit codes: 0 end_turn, 1 error, 2 usage, 3 timeout, 4 refusal, 5 permission
    denied, 130 cancelled.
    """
    if acp_mode:
        from acpctl.runner.main import serve

        raise typer.Exit(serve(agent, history=not no_history))
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
    raise typer.Exit(
        main(
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
            )
        )
    )
