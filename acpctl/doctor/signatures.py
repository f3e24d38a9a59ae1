"""Known failure signatures in agent stderr and run logs, each with its diagnosis and fix.

One table, as data. Every signature carries examples: real-looking lines it must match
(tests/test_doctor.py checks each against this table, first match wins).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: str
    diagnosis: str
    fix: str
    examples: tuple[str, ...]

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled(self.pattern)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "query-closed",
        r"Query closed before response received",
        "claude-agent-acp lost its Claude Code process (it died or refused to start)",
        "run as a normal user, or set IS_SANDBOX=1 in the agent's env when running as root: "
        "acpctl agents add claude --env IS_SANDBOX=1 -- claude-agent-acp",
        ("Error: Query closed before response received",),
    ),
    Signature(
        "npx-module-not-found",
        r"ERR_MODULE_NOT_FOUND|Cannot find (module|package) .*(_npx|node_modules)",
        "the npx cache holds a broken install of the agent",
        "delete the npx cache (rm -rf ~/.npm/_npx; for Zed also <zed data>/node/cache/_npx) "
        "and start the agent again",
        (
            "Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@anthropic-ai/sdk' imported from "
            "/home/u/.npm/_npx/4f1a/node_modules/x/dist/index.js",
        ),
    ),
    Signature(
        "node-too-old",
        r"requires? node(\.js)? (version )?>?=? ?v?\d|Unsupported engine|"
        r"SyntaxError: Unexpected token '\?\?='|ERR_REQUIRE_ESM",
        "the agent needs a newer Node.js than the one on its PATH",
        "install Node.js 20 or newer and make it the first node on the PATH editors see",
        (
            "npm WARN EBADENGINE Unsupported engine { required: { node: '>=20' } }",
            "This package requires Node.js >= 20.0.0",
        ),
    ),
    Signature(
        "eacces",
        r"EACCES|Permission denied",
        "the agent was denied access to a file or directory",
        "check the ownership and mode of the path in the message (chmod/chown), or the "
        "executable bit of the agent's command",
        ("Error: EACCES: permission denied, open '/home/u/.claude.json'",),
    ),
    Signature(
        "command-not-found",
        r"command not found|\bENOENT\b|No such file or directory",
        "a command the agent runs (or the agent itself) is missing",
        "install the missing command, or give its absolute path in the agent's config",
        ("sh: 1: claude-agent-acp: command not found", "Error: spawn node ENOENT"),
    ),
    Signature(
        "http-429",
        r"\b429\b|rate.?limit|Too Many Requests|overloaded_error",
        "the model API is rate-limiting the agent",
        "wait and retry, lower the request rate, or check your plan's limits",
        ("APIError: 429 Too Many Requests",),
    ),
    Signature(
        "http-401-403",
        r"\b40[13]\b.*(unauthori[sz]ed|forbidden|invalid.*key|auth)|"
        r"(unauthori[sz]ed|forbidden|invalid x-api-key|invalid api key)",
        "the model API rejected the agent's credentials",
        "check the API key or login the agent uses (env in config.toml, or the agent's own "
        "login command)",
        (
            'AuthenticationError: 401 {"type":"error","error":{"type":'
            '"authentication_error","message":"invalid x-api-key"}}',
            "Request failed with status 403 Forbidden",
        ),
    ),
    Signature(
        "auth-required",
        r"auth(entication)?[ _]required|not (logged|signed) in|please (log|sign) in",
        "the agent needs you to authenticate first",
        "authenticate from the editor's agent panel, or run the agent's login command once "
        "in a terminal",
        ("Error: Authentication required", "You are not logged in. Please log in first."),
    ),
    Signature(
        "oom",
        r"status 137|\bSIGKILL\b|out of memory|JavaScript heap out of memory|OOM",
        "the agent was killed, most likely for using too much memory",
        "close other heavy programs, raise the memory limit (e.g. NODE_OPTIONS="
        "--max-old-space-size=4096), or check `dmesg` for the OOM killer",
        (
            "agent was killed by SIGKILL",
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
        ),
    ),
    Signature(
        "exited-during-initialize",
        r"during initialize",
        "the agent exits while starting, before it answers initialize",
        "run its command by hand (see `acpctl agents show NAME`) to see the error; "
        "`acpctl logs` has its stderr",
        ("agent exited with status 1 during initialize",),
    ),
    Signature(
        "stdout-not-json",
        r"non-JSON to stdout",
        "something writes to the agent's stdout that is not JSON-RPC (a banner, a shell "
        'profile, a debug print): editors then hang on "Loading"',
        "remove the output (shell profile echo, banner flag), or send it to stderr",
        ("agent wrote non-JSON to stdout (stdout must carry only JSON-RPC): 'Welcome!'",),
    ),
    Signature(
        "python-traceback",
        r"Traceback \(most recent call last\)",
        "a Python agent crashed with an exception",
        "read the traceback in `acpctl logs`; "
        "upgrade or reinstall the agent, and report it to its authors",
        ("Traceback (most recent call last):",),
    ),
    Signature(
        "rust-panic",
        r"thread '.*' panicked at",
        "a Rust agent panicked",
        "read the panic message in `acpctl logs` (RUST_BACKTRACE=1 "
        "in the agent's env gives more); upgrade the agent or report it",
        ("thread 'main' panicked at src/main.rs:10:5:",),
    ),
)


def match(line: str) -> Signature | None:
    for signature in SIGNATURES:
        if signature.regex.search(line):
            return signature
    return None
