"""Record the corpus of real failures: the real npm agents against a model API stand-in that
fails on purpose, and broken environments, each driven by `acpctl run` as a user would.

    python -m tests.corpus.record [--only SUBSTRING] [--wait SECONDS]

Each case writes tests/corpus/<case>.json: what acpctl printed, what the agent wrote to
stderr (from the run log), the requests it failed (from the run's incidents) and how the
turn ended. Temporary paths, ports and times are replaced by placeholders so a fixture is
the same on every machine. `expected` is the signature a case's failure must be diagnosed
as; tests/test_corpus.py replays every fixture through doctor's matcher and checks it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from tests.model_stub import ApiError, ModelStub, pi_on_stub, write_pi_models
from tests.npm_agents import npm_bin, npm_package, package_command

CORPUS = Path(__file__).resolve().parent
ROOT = CORPUS.parent.parent
PROMPT = "Say hi"

# The failures a model API can answer with, as the Anthropic Messages API words them.
API_FAILURES: dict[str, tuple[ApiError | None, str]] = {
    "http-401": (
        ApiError(401, "authentication_error", "invalid x-api-key"),
        "model-api-key-rejected",
    ),
    "http-403": (
        ApiError(
            403,
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        "model-api-forbidden",
    ),
    "http-404": (
        ApiError(404, "not_found_error", "model: stub-missing"),
        "model-not-found",
    ),
    "http-429": (
        ApiError(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
            {"retry-after": "2"},
        ),
        "model-api-rate-limited",
    ),
    "http-529": (ApiError(529, "overloaded_error", "Overloaded"), "model-api-overloaded"),
    "http-500": (ApiError(500, "api_error", "Internal server error"), "model-api-server-error"),
    "refused": (None, "model-api-unreachable"),
    "stalled": (None, "model-api-stalled"),
}


# Where what an agent says does not tell the failure apart, the corpus says so: the
# failure was induced, and the signature is what its output supports.
SAID_OTHERWISE = {
    # Claude Code before its transcripts kept API errors retries in silence (and 0.101.0
    # too when the stream stalls, which is no error): only the silence is seen.
    **{
        ("claude-0.23.1", failure): "agent-silent"
        for failure in ("http-401", "http-500", "http-529", "refused", "stalled")
    },
    ("claude-current", "stalled"): "agent-silent",
    ("pi", "stalled"): "agent-silent",
    # claude-agent-acp 0.101.0 answers a 403 as "Authentication required".
    ("claude-current", "http-403"): "auth-required",
}


def _expected(key: str, failure: str) -> str:
    return SAID_OTHERWISE.get((key, failure), API_FAILURES[failure][1])


@dataclass(frozen=True)
class Agent:
    name: str  # as the fixture names it: the package's executable
    version: str
    setup: Callable[[Path, str], list[str]]  # (home, model url) -> `agents add` arguments


def _claude(package: str) -> Callable[[Path, str], list[str]]:
    def setup(home: Path, url: str) -> list[str]:
        claude_home = home / "claude-home"
        claude_home.mkdir(exist_ok=True)
        env = {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": "sk-test",
            "IS_SANDBOX": "1",
            "HOME": str(claude_home),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        return [*_env_args(env), "--", *package_command(package)]

    return setup


def _pi(home: Path, url: str) -> list[str]:
    pi_home = home / "pi-home"
    write_pi_models(pi_home / ".pi" / "agent", url, "stub-model")
    return [
        "--kind",
        "pi-rpc",
        *_env_args({"HOME": str(pi_home)}),
        "--",
        *pi_on_stub(npm_bin("pi"), "stub-model"),
    ]


def _env_args(env: dict[str, str]) -> list[str]:
    return [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]


def _version(package: str) -> str:
    return str(json.loads((npm_package(package) / "package.json").read_text())["version"])


def agents() -> dict[str, Agent]:
    """The npm agents (installed on first use), by the name the corpus runs them under."""
    return {
        "claude-0.23.1": Agent(
            "claude-agent-acp",
            _version("@zed-industries/claude-agent-acp"),
            _claude("@zed-industries/claude-agent-acp"),
        ),
        "claude-current": Agent(
            "claude-agent-acp",
            _version("@agentclientprotocol/claude-agent-acp"),
            _claude("@agentclientprotocol/claude-agent-acp"),
        ),
        "pi": Agent("pi", _version("@mariozechner/pi-coding-agent"), _pi),
    }


@contextmanager
def _isolated_home() -> Iterator[tuple[Path, dict[str, str]]]:
    with tempfile.TemporaryDirectory(prefix="acpctl-corpus-") as scratch:
        home = Path(scratch)
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("XDG_", "ACPCTL_", "ANTHROPIC_", "OPENAI_"))
        }
        env.update(
            HOME=str(home),
            ACPCTL_CONFIG_DIR=str(home / "config"),
            ACPCTL_DATA_DIR=str(home / "data"),
            ACPCTL_STATE_DIR=str(home / "state"),
            NO_COLOR="1",
        )
        yield home, env


def _acpctl(env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acpctl", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


SILENCE_S = 10


def _watch_silence(home: Path) -> None:
    """The watchdog at 10 s, so a silent turn is noted (with what the agent's own records
    say) before --timeout ends it."""
    config = home / "config" / "config.toml"
    config.write_text(f"silence_warning_s = {SILENCE_S}\n" + config.read_text())


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def record_api_failure(key: str, agent: Agent, failure: str, wait: float) -> dict[str, object]:
    error = API_FAILURES[failure][0]
    with ModelStub() as stub, _isolated_home() as (home, env):
        stub.fail_always = error
        stub.stall = failure == "stalled"
        url = f"http://127.0.0.1:{_closed_port()}" if failure == "refused" else stub.url
        added = _acpctl(env, "agents", "add", key, *agent.setup(home, url), timeout=30)
        assert added.returncode == 0, added.stderr
        _watch_silence(home)
        seen_as = f"{agent.name} {agent.version}"
        return _run(key, seen_as, failure, _expected(key, failure), home, env, wait, [url])


CACHE = Path(tempfile.gettempdir()) / "acpctl-corpus-cache"  # pi 1.6, installed once


def _pi_16(home: Path) -> list[str]:
    """pi 1.6 needs node >= 22.19; on an older node it dies at start."""
    prefix = CACHE / "pi-1.6"
    binary = prefix / "node_modules" / ".bin" / "pi"
    if not binary.exists():
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(prefix),
                "--no-audit",
                "--no-fund",
                "@earendil-works/pi-coding-agent@1.6.0",
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return ["--kind", "pi-rpc", "--", str(binary), "--mode", "rpc"]


def _wrapper(home: Path, name: str, body: str, mode: int = 0o755) -> str:
    script = home / name
    script.write_text(body)
    script.chmod(mode)
    return str(script)


def _claude_command() -> str:
    return " ".join(package_command("@agentclientprotocol/claude-agent-acp"))


SCRIPT = "a script agent"
CLAUDE_NPX = "claude-agent-acp 0.101.0 via npx"

# Broken environments: (the agent as the fixture names it, its `agents add` arguments, the
# signature it must be diagnosed as).
ENV_FAILURES: dict[str, tuple[str, Callable[[Path, str], list[str]], str]] = {
    "node-too-old": ("pi 1.6.0", lambda home, url: _pi_16(home), "node-too-old"),
    "missing-interpreter": (
        SCRIPT,
        lambda home, url: [
            "--",
            _wrapper(home, "agent", "#!/usr/bin/env node99\nconsole.log('never')\n"),
        ],
        "command-not-found",
    ),
    "not-executable": (
        SCRIPT,
        lambda home, url: ["--", _wrapper(home, "agent", "#!/bin/sh\nexit 0\n", 0o644)],
        "eacces",
    ),
    "npx-offline": (
        CLAUDE_NPX,
        lambda home, url: [
            *_env_args(
                {
                    "npm_config_registry": "http://registry.invalid/",
                    "npm_config_cache": str(home / "npm-cache"),
                    "npm_config_fetch_retries": "0",
                }
            ),
            "--",
            "npx",
            "-y",
            "@agentclientprotocol/claude-agent-acp@0.101.0",
        ],
        "npx-offline",
    ),
    "banner": (
        "claude-agent-acp 0.101.0",
        lambda home, url: [
            *_env_args(
                {
                    "IS_SANDBOX": "1",
                    "HOME": str(home),
                    "ANTHROPIC_BASE_URL": url,
                    "ANTHROPIC_API_KEY": "sk-test",
                }
            ),
            "--",
            _wrapper(home, "agent", f"#!/bin/sh\necho 'Welcome back!'\nexec {_claude_command()}\n"),
        ],
        "stdout-not-json",
    ),
    "no-credentials": (
        "claude-agent-acp 0.101.0",
        lambda home, url: [
            *_env_args({"IS_SANDBOX": "1", "HOME": str(home / "empty")}),
            "--",
            *package_command("@agentclientprotocol/claude-agent-acp"),
        ],
        "auth-required",
    ),
}


def record_env_failure(failure: str, wait: float) -> dict[str, object]:
    name, setup, expected = ENV_FAILURES[failure]
    with ModelStub() as stub, _isolated_home() as (home, env):
        (home / "empty").mkdir()
        added = _acpctl(env, "agents", "add", failure, *setup(home, stub.url), timeout=600)
        assert added.returncode == 0, added.stderr
        return _run(failure, name, failure, expected, home, env, wait, [stub.url])


def _run(
    key: str,
    seen_as: str,
    failure: str,
    expected: str,
    home: Path,
    env: dict[str, str],
    wait: float,
    secrets: list[str],
) -> dict[str, object]:
    started = time.monotonic()
    ran = _acpctl(env, "run", "--agent", key, "--timeout", str(wait), PROMPT, timeout=wait + 60)
    elapsed = time.monotonic() - started
    logs = sorted((home / "state" / "logs").glob("*.log"))
    agent_stderr: list[str] = []
    incidents: list[dict[str, object]] = []
    for log in logs:
        agent_stderr += [_log_message(line) for line in log.read_text().splitlines()]
        incidents_file = log.with_name(log.name.removesuffix(".log") + ".incidents.jsonl")
        if incidents_file.exists():
            for line in incidents_file.read_text().splitlines():
                record = json.loads(line)
                record.pop("time", None)
                incidents.append(record)

    def clean(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, "<model-url>")
        text = text.replace(str(home), "<home>").replace(str(ROOT), "<repo>")
        text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", text)
        text = re.sub(r"\b\d{8}T\d{6}-\d+\b", "<time>-<pid>", text)
        return re.sub(r"\b(pid|process) \d+", r"\1 <pid>", text)

    return {
        "agent": seen_as,
        "failure": failure,
        "expected": expected,
        "command": f"acpctl run --agent {key} --timeout {wait:g} {json.dumps(PROMPT)}",
        "exit_status": ran.returncode,
        "seconds": round(elapsed, 1),
        "stdout": [clean(line) for line in ran.stdout.splitlines()],
        "acpctl_stderr": [clean(line) for line in ran.stderr.splitlines()],
        "agent_stderr": [clean(line) for line in agent_stderr if line],
        "incidents": json.loads(clean(json.dumps(incidents))),
    }


def _log_message(line: str) -> str:
    """A run log line without its time stamp and level."""
    parts = line.split(" ", 3)
    return parts[3] if len(parts) == 4 and parts[2].isupper() else line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="record the cases whose name has this")
    parser.add_argument("--wait", type=float, default=25.0, help="seconds a turn may take")
    parser.add_argument(
        "--relabel", action="store_true", help="only rewrite the recorded fixtures' expected"
    )
    options = parser.parse_args()
    if options.relabel:
        _relabel()
        return
    if shutil.which("node") is None:
        sys.exit("node is needed to record the corpus")
    for key, agent in agents().items():
        for failure in API_FAILURES:
            case = f"{key}--{failure}"
            if options.only not in case:
                continue
            print(f"recording {case}...", flush=True)
            fixture = record_api_failure(key, agent, failure, options.wait)
            _save(case, fixture)
    for failure in ENV_FAILURES:
        if options.only in failure:
            print(f"recording {failure}...", flush=True)
            _save(failure, record_env_failure(failure, options.wait))


def _relabel() -> None:
    for path in sorted(CORPUS.glob("*.json")):
        fixture = json.loads(path.read_text())
        key, _, failure = path.stem.partition("--")
        if failure:
            fixture["expected"] = _expected(key, failure)
        else:
            fixture["agent"], _, fixture["expected"] = ENV_FAILURES[key]
        path.write_text(json.dumps(fixture, indent=2) + "\n")


def _save(case: str, fixture: dict[str, object]) -> None:
    (CORPUS / f"{case}.json").write_text(json.dumps(fixture, indent=2) + "\n")
    print(
        f"  exit {fixture['exit_status']} after {fixture['seconds']} s, "
        f"{len(cast(list[str], fixture['agent_stderr']))} stderr lines",
        flush=True,
    )


if __name__ == "__main__":
    main()
