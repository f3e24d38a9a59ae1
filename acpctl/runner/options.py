"""`acpctl run`'s options, declared once. The typer command (cli/run.py), its help, the
fast `run --acp` parser below and the tests are all built from RUN_OPTIONS, so an option
cannot be known to one and missing from another: with --acp each one either applies or is
refused with exit 2.

`run --acp` reads this table without importing typer: it holds plain data only.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from acpctl.errors import UsageError

# What an option takes on the command line.
FLAG = "flag"  # nothing: it is on or off
VALUE = "value"  # one value
VALUES = "values"  # one value, repeatable


class RunOption:
    """One option of `acpctl run`: `name` is the command function's parameter."""

    def __init__(
        self,
        name: str,
        flags: tuple[str, ...],
        takes: str,
        help: str,
        *,
        with_acp: bool = False,
        type: str = "str",
        default: Any = None,
        choices: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.flags = flags
        self.takes = takes
        self.help = help
        self.with_acp = with_acp  # applies with --acp (else refused there)
        self.type = type  # "str", "float" or "path" (its Python type in the command)
        self.default = default if takes != FLAG else False
        self.choices = choices


RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("acp_mode", ("--acp",), FLAG, "Serve ACP on stdio (for editors).", with_acp=True),
    RunOption(
        "agent",
        ("--agent", "-a"),
        VALUE,
        "Agent name (default: configured default, else the built-in demo).",
        with_acp=True,
    ),
    RunOption("cwd", ("--cwd",), VALUE, "Working directory of the session."),
    RunOption(
        "session",
        ("--session",),
        VALUE,
        "Continue this stored session (an id, a name, or a unique prefix of either).",
    ),
    RunOption("fork", ("--fork",), FLAG, "With --session: continue in a fork of it, leaving it."),
    RunOption("name", ("--name",), VALUE, "Name the new (or forked) session."),
    RunOption("mode", ("--mode",), VALUE, "Set the session's mode first (an id or name)."),
    RunOption("model", ("--model",), VALUE, "Set the session's model first."),
    RunOption(
        "config",
        ("--config",),
        VALUES,
        "Set a session config option first: KEY=VALUE (repeatable).",
    ),
    RunOption(
        "mcp_config",
        ("--mcp-config",),
        VALUE,
        "MCP servers for the session, from a JSON file (.mcp.json's mcpServers, or Zed's "
        "context_servers).",
        type="path",
    ),
    RunOption(
        "continue_",
        ("--continue", "-c"),
        FLAG,
        "Continue the newest session of this agent in this directory.",
    ),
    RunOption("approve_all", ("--approve-all",), FLAG, "Allow every tool call."),
    RunOption(
        "approve_reads",
        ("--approve-reads",),
        FLAG,
        "Allow reads, deny the rest (the default without a terminal).",
    ),
    RunOption("deny_all", ("--deny-all",), FLAG, "Deny every tool call."),
    RunOption(
        "output_format",
        ("--format",),
        VALUE,
        "text, json (NDJSON of the updates, then the sessionId and stopReason) or quiet (the "
        "final text only).",
        default="text",
        choices=("text", "json", "quiet"),
    ),
    RunOption(
        "timeout", ("--timeout",), VALUE, "Cancel the turn after SECONDS (exit 3).", type="float"
    ),
    RunOption("no_history", ("--no-history",), FLAG, "Do not record new sessions.", with_acp=True),
    RunOption(
        "through_host",
        ("--through-host",),
        FLAG,
        "Through the session host (acpctl host, started when none runs), as config.toml's "
        "host = true does.",
        with_acp=True,
    ),
)

BY_FLAG = {flag: option for option in RUN_OPTIONS for flag in option.flags}
HELP_FLAGS = ("-h", "--help")


class RunLimits(NamedTuple):
    """The limits a `run --acp` connection keeps (config.toml's silence_warning_s,
    request_timeout_s and, through the session host, outage_limit_s; 0 turns each off)."""

    silence_s: float
    request_timeout_s: float
    outage_limit_s: float


class ServeArgs:
    """What `run --acp` was given: the agent, whether to record, and the agent's own
    arguments (anything acpctl does not know; an editor's terminal-auth method appends
    them, claude-agent-acp's `--cli`, to run the agent's own login)."""

    def __init__(self) -> None:
        self.agent: str | None = None
        self.history = True
        self.through_host = False
        self.agent_args: list[str] = []


def refuse_outside_acp(option: RunOption) -> UsageError:
    return UsageError(f"{option.flags[0]} does not apply with --acp")


def parse_serve_args(args: list[str]) -> ServeArgs | None:
    """The `run --acp` forms, read by RUN_OPTIONS; None for anything else (help, or no
    --acp), which typer then parses. Raises UsageError for an option that does not apply
    with --acp, or one that lacks its value."""
    parsed = ServeArgs()
    seen_acp = False
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg in HELP_FLAGS:
            return None
        if arg == "--":
            parsed.agent_args += rest
            break
        flag, has_value, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        option = BY_FLAG.get(flag)
        if option is None:
            parsed.agent_args.append(arg)
            continue
        if not option.with_acp:
            raise refuse_outside_acp(option)
        if option.takes == FLAG:
            if has_value:
                raise UsageError(f"{flag} takes no value")
            if option.name == "acp_mode":
                seen_acp = True
            elif option.name == "through_host":
                parsed.through_host = True
            else:  # --no-history
                parsed.history = False
            continue
        if not has_value:
            if not rest:
                raise UsageError(f"{flag} needs a value")
            inline = rest.pop(0)
        parsed.agent = inline  # --agent, the one value option that applies
    return parsed if seen_acp else None
