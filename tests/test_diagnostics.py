"""Issue 20 (items 4 and 1): what an agent's own log says about a silent turn, and whether
its model API accepts connections, in-process against real files and sockets."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from acpctl.agents import transcripts
from acpctl.agents.catalog import lookup
from acpctl.agents.discovery import ResolvedAgent
from acpctl.doctor import endpoints

CORPUS = Path(__file__).parent / "corpus"
SESSION = "f48e1590-37ab-4621-b5ce-58a8843c6751"  # the recorded transcript's session


def claude_home(root: Path) -> Path:
    transcript = root / ".claude" / "projects" / "-home-u-project" / f"{SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_bytes((CORPUS / "claude-transcript-401.jsonl").read_bytes())
    return transcript


def test_the_last_api_error_of_a_real_claude_transcript(tmp_path: Path) -> None:
    claude_home(tmp_path)
    said = transcripts.last_api_error({"HOME": str(tmp_path)}, SESSION)
    assert said is not None and said.startswith("401 invalid x-api-key (attempt 4 of 10, next")
    assert transcripts.last_api_error({"HOME": str(tmp_path)}, "another-session") is None
    # An id from the wire names its own transcript only, even one that reads as a pattern.
    for pattern in ("*", SESSION[:4] + "*", "[" + SESSION[0] + "]" + SESSION[1:]):
        assert transcripts.last_api_error({"HOME": str(tmp_path)}, pattern) is None


def test_claude_config_dir_a_big_transcript_and_a_torn_line(tmp_path: Path) -> None:
    transcript = claude_home(tmp_path / "elsewhere")
    recorded = transcript.read_bytes()
    padding = b'{"type":"attachment","text":"' + b"x" * 200_000 + b'"}\n'
    transcript.write_bytes(padding + recorded + b'{"type":"system","subtype":"api_err')
    env = {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "elsewhere" / ".claude")}
    said = transcripts.last_api_error(env, SESSION)
    assert said is not None and said.startswith("401 invalid x-api-key")


@pytest.mark.parametrize("session", ["../" + SESSION, "a/b", ".hidden", ""])
def test_a_session_id_from_the_wire_never_becomes_a_path(tmp_path: Path, session: str) -> None:
    claude_home(tmp_path)
    assert transcripts.last_api_error({"HOME": str(tmp_path)}, session) is None


@pytest.fixture
def listening() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepting = threading.Thread(target=lambda: server.accept(), daemon=True)
    accepting.start()
    yield int(server.getsockname()[1])
    server.close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def agent(name: str, env: dict[str, str]) -> ResolvedAgent:
    return ResolvedAgent(name, name, "acp", "config", ["/bin/true"], env, entry=lookup(name))


def test_an_endpoint_set_in_config_that_accepts(listening: int) -> None:
    claude = agent("claude", {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{listening}/v1"})
    (finding,) = endpoints.check_endpoints([claude])
    assert finding.status == "ok" and finding.check == "agent claude"
    assert f"http://127.0.0.1:{listening} accepts connections" in finding.message
    assert "ANTHROPIC_BASE_URL in config.toml" in finding.message


def test_an_endpoint_that_refuses_is_a_problem_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = closed_port()
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://user:secret@127.0.0.1:{port}")
    (finding,) = endpoints.check_endpoints([agent("custom", {})])
    assert finding.status == "problem"
    assert f"127.0.0.1:{port} refused the connection" in finding.message
    assert "OPENAI_BASE_URL in your environment" in finding.message
    assert "secret" not in finding.message


def test_the_catalogs_default_endpoint_and_the_proxy(
    listening: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("HTTPS_PROXY", f"http://me:pw@127.0.0.1:{listening}")
    (finding,) = endpoints.check_endpoints([agent("claude", {})])
    assert finding.status == "ok", finding.message
    assert "https://api.anthropic.com:443 through the proxy" in finding.message
    assert f"http://127.0.0.1:{listening} (HTTPS_PROXY)" in finding.message
    assert "claude's default endpoint" in finding.message and "pw" not in finding.message
    # NO_PROXY exempts the host: the connection goes to it, and nothing here resolves it
    monkeypatch.setenv("NO_PROXY", "localhost,.anthropic.com")
    (finding,) = endpoints.check_endpoints([agent("claude", {})])
    assert "through the proxy" not in finding.message


@pytest.mark.parametrize(
    ("host", "no_proxy", "exempt"),
    [
        ("api.anthropic.com", "*", True),
        ("api.anthropic.com", "anthropic.com", True),
        ("api.anthropic.com", ".anthropic.com:443", True),
        ("api.anthropic.com", "thropic.com", False),
        ("api.anthropic.com", "", False),
    ],
)
def test_no_proxy_rules(host: str, no_proxy: str, exempt: bool) -> None:
    assert endpoints._exempt(host, no_proxy) is exempt


def test_agents_without_a_known_endpoint_are_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in endpoints.BASE_URL_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    assert endpoints.check_endpoints([agent("demo", {}), agent("pi", {})]) == []


def test_a_python_import_error_is_not_a_network_failure() -> None:
    """Issue 31, 4: ENOTFOUND matched inside ModuleNotFoundError and FileNotFoundError."""
    from acpctl.agents.signatures import match

    missing = match("ModuleNotFoundError: No module named 'acp'")
    assert missing is not None and missing.id == "python-module-missing"
    absent = match("FileNotFoundError: [Errno 2] No such file or directory: 'x'")
    assert absent is None or absent.id != "model-api-unreachable"
    offline = match("Error: getaddrinfo ENOTFOUND api.anthropic.com")
    assert offline is not None and offline.id == "model-api-unreachable"
    assert match("connect ECONNREFUSED 127.0.0.1:9") is not None


def test_the_demo_agent_has_no_model_api_to_check() -> None:
    """Issue 31, 16: doctor checked ANTHROPIC_BASE_URL for the demo agent."""
    from acpctl.agents.discovery import _demo
    from acpctl.doctor.endpoints import endpoints_of

    environ = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    assert endpoints_of(_demo(), environ) == []


def test_a_status_code_inside_a_path_or_a_number_is_no_status() -> None:
    """A traceback's path in pytest's 429th temporary directory read as "the model API is
    rate-limiting the agent (429)"; a status is a number standing alone."""
    from acpctl.agents.signatures import match

    assert match('File "/tmp/pytest-of-root/pytest-429/t0/agent.py", line 1, in <module>') is None
    assert match("version 1.529.0 of the agent") is None
    assert match("API Error: 429 rate limited") is not None
    assert match("the server said (529).") is not None
