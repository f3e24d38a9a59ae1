"""Shared fixtures: a private acpctl home per test, and helpers to run real processes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_AGENTS = Path(__file__).resolve().parent / "agents"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty home with every acpctl directory inside it, set in os.environ."""
    root = tmp_path / "home"
    root.mkdir()
    # Nothing of the caller's environment decides where a test reads or writes.
    for variable in list(os.environ):
        if variable.startswith(("XDG_", "ACPCTL_")):
            monkeypatch.delenv(variable)
    for variable, sub in (
        ("ACPCTL_CONFIG_DIR", "config"),
        ("ACPCTL_DATA_DIR", "data"),
        ("ACPCTL_STATE_DIR", "state"),
    ):
        monkeypatch.setenv(variable, str(root / sub))
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / ".config"))
    yield root


@pytest.fixture(params=["direct", "through the host"])
def way(
    request: pytest.FixtureRequest, home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The relay's fidelity tests both ways: `run --acp` serving the agent itself, and
    `run --acp` as the session host's thin client (config.toml's `host = true`; the host is
    started detached by the first run, and stopped at the end)."""
    if request.param == "direct":
        yield request.param
        return
    import shutil
    import tempfile

    # A unix socket path has ~107 bytes: the state directory goes somewhere short.
    state = Path(tempfile.mkdtemp(prefix="acps", dir="/tmp"))
    monkeypatch.setenv("ACPCTL_STATE_DIR", str(state))
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("host = true\n")
    try:
        yield request.param
    finally:
        stop_running_host()
        shutil.rmtree(state, ignore_errors=True)


def stop_running_host() -> None:
    """The session host of this state directory, started in the background (by a run, as
    for a user), stopped, when one runs."""
    import signal

    import psutil

    from acpctl.remote.host_socket import read_status

    status = asyncio.run(read_status())
    if status is not None:
        host = psutil.Process(status["pid"])
        host.send_signal(signal.SIGTERM)
        psutil.wait_procs([host], timeout=10)


@pytest.fixture(autouse=True)
def _tiers_hold(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that starts a process is marked e2e or npm: the fast tier starts none."""
    if request.node.get_closest_marker("e2e") or request.node.get_closest_marker("npm"):
        return

    def refuse(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        raise AssertionError(
            f"{request.node.nodeid} starts a process: mark it e2e, or run it in-process"
        )

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


def cli(
    *args: str, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """acpctl's command line run in this process (as `acpctl ARGS` would run), its output
    captured: the fast tier's way to test a command. `env` replaces the environment for
    the call."""
    from click.testing import CliRunner

    from acpctl.cli import main

    saved = dict(os.environ)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    try:
        with CliRunner().isolation(input=input) as (stdout, stderr, _):
            code = main(list(args))
            sys.stdout.flush()
            sys.stderr.flush()
            out, err = stdout.getvalue().decode(), stderr.getvalue().decode()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["acpctl", *args], code, out, err)


T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
    """A test's asyncio scenario, run to its end within `timeout` seconds."""
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


def acpctl_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "acpctl", *args]


def run_cli(
    *args: str, input: str | None = None, timeout: float = 30, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        acpctl_argv(*args),
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        env=env or dict(os.environ),
    )


def write_executable(path: Path, body: str) -> Path:
    path.write_text(body)
    path.chmod(0o755)
    return path


def stored_updates(store: Any, session_id: str) -> list[dict[str, Any]]:
    """A stored session's session/update payloads, in order."""
    from acpctl.store.lines import event_update

    return [u for u in map(event_update, store.iter_events(session_id)) if u is not None]


@pytest.fixture
def outside_tmp() -> Any:
    """A directory outside /tmp, which is the sandbox's own (a write there lands in the
    sandbox's private /tmp, and no error tells it): where the user's home and other
    projects stand in these tests."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="acpctl-sandbox-", dir="/var/tmp"))
    yield base
    shutil.rmtree(base, ignore_errors=True)
