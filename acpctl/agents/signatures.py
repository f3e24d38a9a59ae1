"""Known failures, each with the signature that recognises it in what an agent said (a
JSON-RPC error, its own log, its stderr), its diagnosis and its fix.

Written from the corpus in tests/corpus: real agents (claude-agent-acp 0.23.1 and 0.101.0,
pi 0.73.1 and 1.6.0) run by `acpctl run` against a model API stand-in that fails on purpose,
and in broken environments (`python -m tests.corpus.record`). `seen_with` names the agents
a failure was recorded with, and tests/test_corpus.py replays every fixture through
`diagnose`. The few signatures no agent here can produce (a Rust panic, an out-of-memory
kill) carry examples from public bug reports instead, and say so with an empty `seen_with`.

Order matters: `diagnose` takes the first signature any evidence matches, so the specific
ones (what the model API answered) come before the generic ones (the agent exited, went
silent).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any


@dataclass(frozen=True)
class Signature:
    id: str
    pattern: str
    diagnosis: str
    fix: str
    seen_with: tuple[str, ...] = ()  # "agent version" of the corpus fixtures it diagnoses
    examples: tuple[str, ...] = ()  # from public reports, for failures not reproduced here

    @property
    def regex(self) -> re.Pattern[str]:
        return _compiled(self.pattern)


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


CLAUDE_OLD = "claude-agent-acp 0.23.1"
CLAUDE = "claude-agent-acp 0.101.0"
PI = "pi 0.73.1"
SCRIPT = "a script agent"
KEY_HELP = (
    "the agent's env in config.toml (`acpctl agents add NAME --env ANTHROPIC_API_KEY=... -- "
    "COMMAND`), or sign in again with the agent's login"
)


def status(code: int) -> str:
    """An HTTP status as a line says it ("429", "(429)", "status: 429."), not as a part of
    a path, a name or a number ("pytest-429/", "v1.429", "44290")."""
    return rf"(?<![\w/.-]){code}(?![\w/-]|\.\w)"


SIGNATURES: tuple[Signature, ...] = (
    Signature(
        "model-api-key-rejected",
        r"\b401\b.*(invalid.{0,3}(x-)?api.?key|authentication_error|unauthori[sz]ed)|"
        r"invalid x-api-key|authentication_error",
        "the model API rejected the agent's API key (401)",
        f"check the key the agent sends: {KEY_HELP}",
        (CLAUDE, PI),
    ),
    Signature(
        "model-api-forbidden",
        r"\b403\b.*(permission_error|forbidden|does not have permission)|permission_error",
        "the model API refused the request (403): the key has no access to this resource",
        "use a key or an account with access (an organisation may need to enable the model "
        f"or the API); {KEY_HELP}",
        (CLAUDE_OLD, PI),
    ),
    Signature(
        "auth-required",
        r"auth(entication)?[ _]required|not (logged|signed) in|please (log|sign) in",
        "the agent needs you to sign in (or its key was refused, which some agents report "
        "the same way)",
        "sign in from the editor's agent panel, or on a terminal (`acpctl doctor --agent NAME` "
        "names the agent's sign-in command); or give it an API key in config.toml: "
        "`acpctl agents add NAME --env ANTHROPIC_API_KEY=... -- COMMAND`",
        (CLAUDE,),
    ),
    Signature(
        "model-not-found",
        r"not_found_error|issue with the selected model|model\b.{0,40}\b(not found|does not "
        r"exist)|\b404\b.{0,20}model",
        "the model the agent asked for does not exist, or the key has no access to it (404)",
        "pick another model (the editor's model menu, or the agent's --model / settings)",
        (CLAUDE_OLD, CLAUDE, PI),
    ),
    Signature(
        "model-api-rate-limited",
        rf"{status(429)}|rate_limit_error|rate.?limit|Too Many Requests",
        "the model API is rate-limiting the agent (429)",
        "wait and retry; check the plan's limits, or lower the request rate (fewer agents at once)",
        (CLAUDE_OLD, CLAUDE, PI),
    ),
    Signature(
        "model-api-overloaded",
        rf"{status(529)}|overloaded_error|\bOverloaded\b",
        "the model API is overloaded (529): the provider's side, not yours",
        "retry in a few minutes, or pick another model",
        (CLAUDE, PI),
    ),
    Signature(
        "model-api-server-error",
        r"\b50[0234]\b.{0,80}(api_error|server error|Bad Gateway|Service Unavailable|"
        r"Gateway Timeout)|Internal server error",
        "the model API failed with a server error (5xx)",
        "retry; if it persists, check the provider's status page (or the proxy in between)",
        (CLAUDE, PI),
    ),
    Signature(
        "npx-offline",
        r"npm (error|ERR!) (code|errno) (ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|ECONNRESET)",
        "npx could not download the agent: the npm registry cannot be reached",
        "check the network and the npm proxy settings (npm config get proxy / https-proxy / "
        "registry), or install the agent once online: `acpctl agents install NAME`",
        (f"{CLAUDE} via npx",),
    ),
    Signature(
        "model-api-unreachable",
        # The error codes whole and in capitals: ModuleNotFoundError is not ENOTFOUND.
        r"(?-i:\b(?:ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT)\b)|Connection refused|"
        r"Connection error|getaddrinfo|network is unreachable",
        "the agent cannot reach its model API (refused, unresolvable or unreachable)",
        "check the network, the endpoint (ANTHROPIC_BASE_URL and the like) and HTTPS_PROXY / "
        "NO_PROXY in the environment the editor starts agents in; `acpctl doctor` tests the "
        "endpoint",
        (CLAUDE, PI),
    ),
    Signature(
        "node-too-old",
        r"does not provide an export named|requires? node(\.js)? (version )?>?=? ?v?\d|"
        r"Unsupported engine|SyntaxError: Unexpected token '\?\?='|ERR_REQUIRE_ESM",
        "the agent needs a newer Node.js than the one on its PATH",
        "install the Node.js its package asks for (`acpctl doctor` shows its engines.node) "
        "and make it the first node on the PATH editors see, or pin an older agent release",
        ("pi 1.6.0",),
    ),
    Signature(
        "npx-module-not-found",
        r"ERR_MODULE_NOT_FOUND|Cannot find (module|package) .*(_npx|node_modules)",
        "the npx cache holds a broken install of the agent",
        "delete the npx cache (rm -rf ~/.npm/_npx; for Zed also <zed data>/node/cache/_npx) "
        "and start the agent again",
        examples=(
            "Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@anthropic-ai/sdk' imported "
            "from /home/u/.npm/_npx/4f1a/node_modules/x/dist/index.js",
        ),
    ),
    Signature(
        "query-closed",
        # claude-agent-acp 0.101.0 logs it after a healthy turn too, for the session
        # title it was still generating when it was closed (tests/corpus/banner.json)
        r"(?<!session title: Error: )Query closed before response received",
        "claude-agent-acp lost its Claude Code process (it died or refused to start)",
        "run as a normal user, or set IS_SANDBOX=1 in the agent's env when running as root: "
        "acpctl agents add claude --env IS_SANDBOX=1 -- claude-agent-acp",
        examples=("Error: Query closed before response received",),
    ),
    Signature(
        "eacces",
        r"EACCES|Permission denied|is not executable",
        "the agent (or a file it needs) may not be run or opened",
        "check the mode and owner of the path in the message (chmod +x for the agent's "
        "command, chown for its files)",
        (SCRIPT,),
    ),
    Signature(
        "command-not-found",
        r"command not found|\bENOENT\b|No such file or directory",
        "a command the agent needs (its interpreter, or the agent itself) is missing",
        "install the missing command, or give its absolute path in the agent's config; a "
        "script's `#!/usr/bin/env node` needs node on the PATH editors see",
        (SCRIPT,),
    ),
    Signature(
        "stdout-not-json",
        r"not JSON-RPC to stdout|non-JSON to stdout",
        "something writes to the agent's stdout that is not JSON-RPC (a banner, a shell "
        'profile, a debug print): editors other than acpctl then hang on "Loading"',
        "remove the output (shell profile echo, banner flag), or send it to stderr",
        (CLAUDE,),
    ),
    Signature(
        "oom",
        r"status 137|\bSIGKILL\b|out of memory|JavaScript heap out of memory|OOM",
        "the agent was killed, most likely for using too much memory",
        "close other heavy programs, raise the memory limit (e.g. NODE_OPTIONS="
        "--max-old-space-size=4096), or check `dmesg` for the OOM killer",
        examples=(
            "agent was killed by SIGKILL",
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
        ),
    ),
    Signature(
        "python-module-missing",
        r"ModuleNotFoundError: No module named",
        "a Python agent cannot import a module it needs: the Python that runs it lacks it",
        "install the module named above into the Python the agent's command runs (`acpctl "
        "agents show NAME` shows the command), or point the command at the agent's own "
        "interpreter (its venv's python)",
        examples=("ModuleNotFoundError: No module named 'acp'",),
    ),
    Signature(
        "python-traceback",
        r"Traceback \(most recent call last\)",
        "a Python agent crashed with an exception",
        "read the traceback in `acpctl logs`; upgrade or reinstall the agent, and report it "
        "to its authors",
        examples=("Traceback (most recent call last):",),
    ),
    Signature(
        "rust-panic",
        r"thread '.*' panicked at",
        "a Rust agent panicked",
        "read the panic message in `acpctl logs` (RUST_BACKTRACE=1 in the agent's env gives "
        "more); upgrade the agent or report it",
        examples=("thread 'main' panicked at src/main.rs:10:5:",),
    ),
    Signature(
        "exited-during-initialize",
        r"during initialize|failed to start",
        "the agent exits while starting, before it answers initialize",
        "run its command by hand (`acpctl agents list` shows it) to see the error; "
        "`acpctl logs` has its stderr",
        examples=("agent exited with status 1 during initialize",),
    ),
    Signature(
        "agent-silent",
        r"has said nothing for \d+ s",
        "the agent went silent during a prompt: claude-agent-acp does this while its model "
        "API fails (a rejected key, an unreachable, overloaded or stalled endpoint) and it "
        "retries, up to 10 times, for minutes",
        "`acpctl doctor` checks the endpoint; `acpctl doctor --agent NAME --prompt` times a "
        "prompt; check the key and the network, or cancel and retry",
        (CLAUDE_OLD, CLAUDE, PI),
    ),
)


def match(line: str) -> Signature | None:
    for signature in SIGNATURES:
        if signature.regex.search(line):
            return signature
    return None


def diagnose(evidence: Iterable[str]) -> tuple[Signature, str] | None:
    """The first signature (in the table's order, specific first) that any evidence
    matches, with the line it matched; callers give the most telling evidence first."""
    lines = list(evidence)
    for signature in SIGNATURES:
        for line in lines:
            if signature.regex.search(line):
                return signature, line
    return None


def explained(failure: str, stderr: list[str]) -> tuple[str, dict[str, Any]]:
    """A failure of an agent said where it happens (the editor's error, the terminal's
    message), as doctor would say it afterwards: the cause a known signature finds in its
    last stderr lines (the newest first) and its fix, else its last stderr line; and the
    same as a JSON-RPC error's data."""
    data: dict[str, Any] = {"stderr": stderr}
    found = diagnose(line for line in reversed(stderr) if line.strip())
    if found is not None:
        signature, line = found
        data["diagnosis"] = {
            "id": signature.id,
            "diagnosis": signature.diagnosis,
            "fix": signature.fix,
            "line": line,
        }
        return f"{failure}: {signature.diagnosis} ({line.strip()[:200]}); {signature.fix}", data
    last = next((line.strip() for line in reversed(stderr) if line.strip()), "")
    said = f"; it last said: {last[:200]}" if last else ""
    return f"{failure}{said} (`acpctl logs` has its stderr)", data


def run_evidence(records: Iterable[dict[str, Any]], log_lines: Iterable[str]) -> list[str]:
    """What one run showed, most telling first: the agent's errors (the last first), what
    its own log said while it was silent, its silences, then the log from its end."""
    records = list(records)
    errors = [str(r.get("message")) for r in records if r.get("kind") == "error"]
    said = [str(r["agent_said"]) for r in records if r.get("agent_said")]
    silences = [
        f"the agent has said nothing for {r.get('seconds')} s"
        for r in records
        if r.get("kind") == "silence"
    ]
    return [*errors[::-1], *said[::-1], *silences[-1:], *list(log_lines)[::-1]]
