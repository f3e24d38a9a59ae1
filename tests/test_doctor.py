"""Issue 8: `acpctl doctor` and `acpctl logs`, against real misbehaving processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import psutil
import pytest

from acpctl.agents.signatures import SIGNATURES, match
from tests.conftest import TEST_AGENTS, run_cli, write_executable

pytestmark = pytest.mark.e2e


def add_fake(tmp_path: Path, name: str, mode: str) -> None:
    script = write_executable(
        tmp_path / f"{name}.sh",
        (
            f"#!/bin/sh\nFAKE_AGENT_MODE={mode} exec {sys.executable} "
            f"{TEST_AGENTS / 'fake_agent.py'}\n"
        ),
    )
    assert run_cli("agents", "add", name, "--", str(script)).returncode == 0


def doctor(*args: str, timeout: float = 60) -> tuple[int, list[dict[str, object]]]:
    result = run_cli("doctor", "--json", *args, timeout=timeout)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, json.loads(result.stdout)


def about(findings: list[dict[str, object]], check: str) -> list[dict[str, object]]:
    return [f for f in findings if f["check"] == check]


@pytest.mark.parametrize("signature", SIGNATURES, ids=lambda s: s.id)
def test_every_signature_matches_its_examples(signature: object) -> None:
    for example in signature.examples:  # type: ignore[attr-defined]
        assert match(example) is signature, example
    assert signature.fix and signature.diagnosis  # type: ignore[attr-defined]


def test_healthy_setup_exits_0_with_stable_json(home: Path) -> None:
    code, findings = doctor("--agent", "demo")
    assert code == 0, [f for f in findings if f["status"] == "problem"]
    for finding in findings:
        assert set(finding) == {"check", "status", "message", "fix", "evidence"}
        assert finding["status"] in ("ok", "warning", "problem")
    demo = about(findings, "agent demo")
    assert any("answers initialize" in str(f["message"]) for f in demo)


def test_misbehaving_agents_are_diagnosed(home: Path, tmp_path: Path) -> None:
    add_fake(tmp_path, "banner", "banner")
    add_fake(tmp_path, "hang", "hang")
    add_fake(tmp_path, "crash", "crash")
    add_fake(tmp_path, "auth", "auth")
    missing = write_executable(
        tmp_path / "needs-interp", "#!/usr/bin/env no-such-interpreter-xyz\nprint(1)\n"
    )
    assert run_cli("agents", "add", "interp", "--", str(missing)).returncode == 0
    plain = tmp_path / "not-executable"
    plain.write_text("#!/bin/sh\n")
    assert run_cli("agents", "add", "noexec", "--", str(plain)).returncode == 0
    code, findings = doctor("--timeout", "3")
    assert code == 1

    def messages(agent: str) -> str:
        return " | ".join(
            str(f["message"]) for f in about(findings, f"agent {agent}") if f["status"] != "ok"
        )

    assert "non-JSON to stdout" in messages("banner")
    banner = next(f for f in about(findings, "agent banner") if f["status"] == "problem")
    assert banner["evidence"] == ["stdout: Welcome to FancyAgent v1.0!"]
    assert "no answer to initialize within 3s" in messages("hang")
    assert "exited with status 1 during initialize" in messages("crash")
    crash = next(f for f in about(findings, "agent crash") if f["status"] == "problem")
    assert "npx cache" in str(crash["fix"])  # the stderr matched a known signature
    assert "needs authentication" in messages("auth")
    auth = next(f for f in about(findings, "agent auth") if f["status"] == "warning")
    assert "Terminal login (in a terminal: acpctl run --acp --agent auth -- --login)" in str(
        auth["message"]
    )
    assert auth["fix"] == "sign in once: acpctl run --acp --agent auth -- --login"
    assert "no-such-interpreter-xyz" in messages("interp")
    assert "not executable" in messages("noexec")


def test_shebang_found_only_on_login_path(home: Path, tmp_path: Path) -> None:
    shell_bin = tmp_path / "nvm-bin"
    shell_bin.mkdir()
    write_executable(shell_bin / "fakenode", "#!/bin/sh\nexit 0\n")
    agent = write_executable(tmp_path / "agent-js", "#!/usr/bin/env fakenode\n")
    assert run_cli("agents", "add", "js", "--", str(agent)).returncode == 0
    env = {**os.environ, "PATH": f"{shell_bin}:{os.environ['PATH']}"}
    result = subprocess.run(
        [sys.executable, "-m", "acpctl", "doctor", "--json", "--agent", "js", "--timeout", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    findings = json.loads(result.stdout)
    warning = next(f for f in about(findings, "agent js") if "shell's PATH" in str(f["message"]))
    assert warning["status"] == "warning" and "--env PATH=" in str(warning["fix"])


def test_orphaned_agent_is_found_and_ended(home: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    marks = {"ACPCTL_RUN_PID": str(gone.pid), "ACPCTL_RUN_STATE": str(home / "state")}
    orphan = subprocess.Popen(["sleep", "300"], env={**os.environ, **marks})
    try:
        code, findings = doctor("--agent", "demo")
        problem = next(f for f in about(findings, "processes") if f["status"] == "problem")
        assert code == 1 and f"pid {orphan.pid}" in " ".join(
            map(str, cast(list[Any], problem["evidence"]))
        )
        assert problem["fix"] == "acpctl doctor --fix"
        code, findings = doctor("--agent", "demo", "--fix")
        assert any("ended 1 orphaned" in str(f["message"]) for f in findings)
        assert orphan.wait(10) is not None
    finally:
        if orphan.poll() is None:
            orphan.kill()


def test_an_agent_acpctl_marked_is_its_orphan_whatever_the_state_path_looks_like(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark an agent carries and the home doctor compares it with come from one
    function: a state directory given with a trailing slash must not hide its orphans."""
    from acpctl.runner import runs

    monkeypatch.setenv("ACPCTL_STATE_DIR", str(home / "state") + "/")
    spawn = "from acpctl import processes; print(processes.spawn(['sleep', '300'], {}).pid)"
    orphan = int(
        subprocess.run(
            [sys.executable, "-c", spawn], capture_output=True, text=True, check=True
        ).stdout
    )  # its acpctl has exited
    try:
        assert orphan in {process.pid for process in runs.orphans()}
    finally:
        os.kill(orphan, 9)


def test_editor_entry_pointing_at_a_moved_acpctl(home: Path) -> None:
    settings = home / ".config" / "zed" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(
        json.dumps(
            {
                "agent_servers": {
                    "Old (acpctl)": {
                        "type": "custom",
                        "command": "/gone/venv/bin/acpctl",
                        "args": ["run", "--acp", "--agent", "demo"],
                    },
                    "Ghost (acpctl)": {
                        "type": "custom",
                        "command": sys.executable,
                        "args": ["-m", "acpctl", "run", "--acp", "--agent", "ghost"],
                    },
                }
            }
        )
    )
    code, findings = doctor("--agent", "demo")
    zed = about(findings, "editor zed")
    assert code == 1
    assert any("/gone/venv/bin/acpctl does not exist" in str(f["message"]) for f in zed)
    assert any("unknown agent 'ghost'" in str(f["message"]) for f in zed)
    broken = home / ".config" / "Code" / "User" / "settings.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"acp.agents": {,}}')
    code, findings = doctor("--agent", "demo")
    assert any(
        f["status"] == "problem" and "settings.json" in str(f["message"])
        for f in about(findings, "editor vscode")
    )


def test_logs_are_scanned_for_signatures(home: Path) -> None:
    logs = home / "state" / "logs"
    logs.mkdir(parents=True)
    (logs / "claude-20261129T000000-42.log").write_text(
        "2026-11-29 00:00:00,000 INFO started agent pid 43: claude-agent-acp\n"
        "2026-11-29 00:00:01,000 INFO agent stderr: Error: Query closed before response "
        "received\n"
    )
    zed_log = home / ".local" / "share" / "zed" / "logs" / "Zed.log"
    zed_log.parent.mkdir(parents=True)
    zed_log.write_text(
        "2026-11-29T00:00:00 WARN [agent_servers::acp] agent stderr: "
        "APIError: 429 Too Many Requests\n"
        "2026-11-29T00:00:01 INFO unrelated line with 429 in it\n"
    )
    _, findings = doctor("--agent", "demo")
    found = {str(f["message"]).split(" (")[0]: f for f in about(findings, "logs")}
    query = next(f for k, f in found.items() if "Claude Code" in k)
    assert "IS_SANDBOX=1" in str(query["fix"])
    assert "claude-20261129T000000-42.log:2" in str(query["evidence"])
    limited = next(f for k, f in found.items() if "rate-limiting" in k)
    assert "Zed.log:1" in str(limited["evidence"]) and "(1 line(s))" in str(limited["message"])


def test_storage_problems(home: Path) -> None:
    sessions = home / "data" / "sessions"
    sessions.mkdir(parents=True, mode=0o755)
    os.chmod(sessions, 0o755)
    _, findings = doctor("--agent", "demo")
    assert any("mode 755" in str(f["message"]) for f in about(findings, "storage"))


def test_logs_command(home: Path, tmp_path: Path) -> None:
    assert run_cli("logs").returncode == 2
    subprocess.run(
        [sys.executable, "-m", "acpctl", "run", "hello"],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        timeout=60,
        env=dict(os.environ),
    )
    result = run_cli("logs", "--agent", "demo", "-n", "100")
    assert result.returncode == 0 and "agent stderr: acpctl demo agent" in result.stdout
    assert run_cli("logs", "--agent", "nosuch").returncode == 2
    listed = run_cli("logs", "--list")
    assert "demo-" in listed.stdout
    as_json = json.loads(run_cli("logs", "--list", "--json").stdout)  # issue 31, 13
    assert as_json and as_json[-1]["agent"] == "demo" and isinstance(as_json[-1]["pid"], int)
    assert run_cli("logs", "--json").returncode == 2  # it goes with --list


def test_doctor_probe_leaves_no_process_behind(home: Path, tmp_path: Path) -> None:
    add_fake(tmp_path, "hang", "hang")
    before = {p.pid for p in psutil.process_iter()}
    doctor("--agent", "hang", "--timeout", "1")

    def leftovers() -> list[psutil.Process]:
        return [
            p
            for p in psutil.process_iter(["cmdline"])
            if p.pid not in before
            and "fake_agent.py" in " ".join(p.info["cmdline"] or [])
            and ours(p, home)  # not another test's, running beside this one
        ]

    deadline = time.monotonic() + 10  # an ended process may take a moment to be reaped
    while (left := leftovers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == []


@pytest.mark.parametrize(
    ("versions", "status", "said"),
    [
        ("1", "ok", "speaks ACP v1"),
        ("1,2", "ok", "speaks ACP v1 and v2 (acpctl speaks v1 to it)"),
        ("2", "problem", "speaks only ACP 2: acpctl speaks ACP v1 and cannot relay it"),
        (  # issue 54, 2: it answers 2 when asked for 1, which run --acp refuses
            "always 2",
            "problem",
            "speaks only ACP 2 (it answered 2 when asked for 1): acpctl speaks ACP v1 and "
            "cannot relay it; run --acp refuses it: acpctl speaks ACP v1; the agent answered 2",
        ),
    ],
)
def test_doctor_says_which_acp_versions_an_agent_speaks(
    home: Path, tmp_path: Path, versions: str, status: str, said: str
) -> None:
    """Issue 43, 6: doctor and `agents add --probe` ask for v1 and, in a second probe,
    for v2 (the draft)."""
    script = write_executable(
        tmp_path / "versioned.sh",
        f"#!/bin/sh\nVERSIONS='{versions}' exec {sys.executable} "
        f"{TEST_AGENTS / 'versioned_agent.py'}\n",
    )
    added = run_cli("agents", "add", "versioned", "--probe", "--", str(script))
    assert added.returncode == 0
    assert f"versioned {said.split(':')[0]}" in added.stdout + added.stderr
    _, findings = doctor("--agent", "versioned", "--timeout", "10")
    (spoken,) = [f for f in about(findings, "agent versioned") if "speaks" in str(f["message"])]
    assert (spoken["status"], spoken["message"]) == (status, said)
    if status == "problem":  # and no ✓ for its answer beside it
        answered = [f for f in about(findings, "agent versioned") if f["status"] == "ok"]
        assert not [f for f in answered if "initialize" in str(f["message"])], answered


def ours(process: psutil.Process, home: Path) -> bool:
    try:
        return bool(process.environ().get("ACPCTL_RUN_STATE") == str(home / "state"))
    except psutil.Error:
        return False


def test_doctor_shows_one_section_per_agent(home: Path, tmp_path: Path) -> None:
    """Issue 17: an agent's install and probe findings come from two passes; the report
    groups them under one heading."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    goose = bin_dir / "goose"
    goose.write_text("#!/bin/sh\necho goose 1.0\n")
    goose.chmod(0o755)
    result = run_cli(
        "doctor",
        "--agent",
        "goose",
        env={**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "NO_COLOR": "1"},
    )
    assert result.stdout.count("\nagent goose\n") == 1, result.stdout


def test_a_status_line_on_a_terminal_and_none_when_piped(home: Path) -> None:
    """Issue 17: slow work (doctor's probes here) shows a status line on stderr when it
    is a terminal, and prints nothing of it into a pipe."""
    import pty

    from tests.conftest import acpctl_argv

    master, slave = pty.openpty()
    process = subprocess.Popen(
        acpctl_argv("doctor", "--agent", "demo"),
        stdout=subprocess.DEVNULL,
        stderr=slave,
        env={**os.environ, "NO_COLOR": "1"},
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    process.wait(30)
    os.close(master)
    assert b"probing the agents" in seen
    piped = run_cli("doctor", "--agent", "demo")
    assert "probing" not in piped.stderr and "probing" not in piped.stdout


def test_doctor_prompt_times_a_turn_through_acpctl(home: Path, tmp_path: Path) -> None:
    code, findings = doctor("--agent", "demo", "--prompt")
    assert code == 0, [f for f in findings if f["status"] == "problem"]
    (turn,) = [f for f in about(findings, "agent demo") if "a prompt" in str(f["message"])]
    assert turn["status"] == "ok"
    assert "first chunk after" in str(turn["message"])
    assert "end of turn (end_turn) after" in str(turn["message"])
    assert not list((home / "data" / "sessions").glob("*/session.json"))  # nothing recorded


def test_doctor_prompt_names_the_failure_and_the_wait_that_gave_up(
    home: Path, tmp_path: Path
) -> None:
    add_fake(tmp_path, "broken", "fail")
    code, findings = doctor("--agent", "broken", "--prompt")
    assert code == 1
    (turn,) = [f for f in about(findings, "agent broken") if "a prompt" in str(f["message"])]
    assert "session/prompt failed: Internal error: API Error: 404" in str(turn["message"])
    assert "model-not-found" in str(turn["evidence"]) and "another model" in str(turn["fix"])
    script = write_executable(
        tmp_path / "slow.sh",
        f"#!/bin/sh\nFAKE_SILENCE_S=30 FAKE_AGENT_MODE=silent exec {sys.executable} "
        f"{TEST_AGENTS / 'fake_agent.py'}\n",
    )
    assert run_cli("agents", "add", "slow", "--", str(script)).returncode == 0
    code, findings = doctor("--agent", "slow", "--prompt", "--timeout", "2")
    (turn,) = [f for f in about(findings, "agent slow") if "a prompt" in str(f["message"])]
    assert code == 1 and "no answer to session/prompt within 2 s" in str(turn["message"])


@pytest.mark.parametrize(
    ("serve", "said"),
    [
        ("", {("ok", "the page is off: no TCP listener")}),
        (
            'listen = "0.0.0.0:8765"\n',
            {("problem", "without TLS on an address other devices reach")},
        ),
        (
            'listen = "127.0.0.1:8765"\npage_url = "https://desk.example.ts.net"\n',
            {
                ("problem", "neither has TLS nor runs --behind-tls-proxy"),
                ("problem", "does not answer to desk.example.ts.net"),
            },
        ),
        (
            'listen = "127.0.0.1:8765"\npage_url = "http://desk.lan:8765"\n',
            {("warning", "is not https"), ("problem", "does not answer to desk.lan:8765")},
        ),
        (
            'listen = "127.0.0.1:8765"\npage_url = "https://desk.example.ts.net"\n'
            'behind_tls_proxy = true\nallow_hosts = ["desk.example.ts.net"]\n',
            {
                ("ok", "devices reach the page at https://desk.example.ts.net"),
                ("ok", "the device cookie is Secure"),
            },
        ),
    ],
    ids=["off", "lan-no-tls", "https-no-proxy", "http-url", "tailscale-serve"],
)
def test_doctor_checks_how_a_device_reaches_the_page(
    home: Path, serve: str, said: set[tuple[str, str]]
) -> None:
    """Issue 52, 6: the reach settings, as config.toml keeps them for the host's next start
    (no host runs here): the listener, the public URL and the name the host answers to,
    TLS or a proxy, and so a Secure cookie."""
    from acpctl import config
    from acpctl.doctor.checks.reach import check_reach

    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[serve]\n" + serve)
    found = check_reach(config.load())
    for status, words in said:
        assert any(f.status == status and words in f.message for f in found), found
    if all(status == "ok" for status, _ in said):
        assert all(f.status == "ok" for f in found), found


def test_doctor_forgets_a_failure_once_the_agent_has_worked_since(home: Path) -> None:
    """Issue 53, 5: doctor kept warning of a failure three good runs after it was mended
    (an agent added with a relative path, say). A run in which the agent worked mends the
    runs before it: their failed requests and their logs' known failures are not told."""
    from acpctl.doctor.checks.logs import check_incidents

    crashed = run_cli("run", "--agent", "demo", "crash")
    assert crashed.returncode != 0
    told = [f for f in check_incidents() if f.check == "agent demo"]
    assert told and "failed in recent runs" in told[0].message, told
    assert run_cli("run", "--agent", "demo", "hello").returncode == 0
    assert [f for f in check_incidents() if f.check == "agent demo"] == []
    shown = run_cli("logs", "demo")
    assert "worked" not in shown.stdout  # the mark is doctor's, not a failure to list


def test_doctor_on_a_pipe_keeps_each_line_whole(home: Path, tmp_path: Path) -> None:
    """Issue 53, 5: doctor's output wrapped at 80 columns on a pipe, breaking a path in
    two; each finding is one line there now."""
    plain = tmp_path / ("a-directory-with-a-long-name-" * 3) / "not-executable"
    plain.parent.mkdir()
    plain.write_text("#!/bin/sh\n")
    assert run_cli("agents", "add", "noexec", "--", str(plain)).returncode == 0
    shown = run_cli("doctor", "--agent", "noexec", env={**os.environ, "COLUMNS": "80"})
    message = next(
        str(f["message"])
        for f in json.loads(run_cli("doctor", "--agent", "noexec", "--json").stdout)
        if "not executable" in str(f["message"])
    )
    assert len(message) > 80 and any(message in line for line in shown.stdout.splitlines())
