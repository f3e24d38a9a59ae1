"""A sandboxed agent cannot get out through acpctl itself (issue 51): not through the
terminal commands acpctl's own client starts for it, not through its file requests by a
race, not by a root nobody chose, not by the environment. Each attack is written as the
agent would make it; the e2e ones run the real engine (bubblewrap)."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from acpctl import sandbox
from acpctl.jsonrpc import RpcError
from acpctl.processes import WholeEnvironment
from acpctl.terminal.host import ClientHost
from tests.conftest import cli, run, run_cli

needs_linux = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's")


# -- files: checked, then opened through no link --------------------------------------------


def _client(project: Path) -> ClientHost:
    policy = sandbox.policy(sandbox.SandboxSettings(), str(project), [])
    return ClientHost([str(project)], "approve-all", sandbox=policy)


def test_a_directory_swapped_for_a_link_after_the_check_is_refused(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deterministic form of the race: between the client's check of the path and its
    open, the agent swaps a directory of its project for a link to the outside."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "dir").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_text("outside's")
    (project / "dir" / "secret").write_text("inside's")
    client = _client(project)
    checked = ClientHost._confined

    def swapped_after_the_check(self: ClientHost, path: Any) -> Path:
        resolved = checked(self, path)
        if (project / "dir").is_dir() and not (project / "dir").is_symlink():
            (project / "dir").rename(project / "was-dir")
            (project / "dir").symlink_to(outside)
        return resolved

    monkeypatch.setattr(ClientHost, "_confined", swapped_after_the_check)

    async def scenario() -> None:
        with pytest.raises(RpcError, match="changed while being opened"):
            await client.write_text_file({"path": str(project / "dir" / "pwn"), "content": "x"})
        (project / "dir").unlink()
        (project / "was-dir").rename(project / "dir")
        with pytest.raises(RpcError, match="changed while being opened"):
            await client.read_text_file({"path": str(project / "dir" / "secret")})

    asyncio.run(scenario())
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


RENAME_EXCHANGE = 2
AT_FDCWD = -100


def test_the_rename_exchange_race_lands_nothing_outside_and_answers_every_request(
    home: Path, tmp_path: Path
) -> None:
    """An agent exchanging a directory of its project with a link to the outside
    (renameat2's RENAME_EXCHANGE), as fast as it can, while it asks for 1,000 writes into
    that directory: none lands outside, and every request is answered."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "renameat2"):
        pytest.skip("this C library has no renameat2")
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "dir").mkdir(parents=True)
    outside.mkdir()
    (project / "link").symlink_to(outside)
    client = _client(project)
    stop = threading.Event()
    swaps = [0]

    def swap() -> None:
        a, b = str(project / "dir").encode(), str(project / "link").encode()
        while not stop.is_set():
            if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0:
                swaps[0] += 1

    async def writes() -> tuple[int, int]:
        accepted = refused = 0
        for n in range(1000):
            params = {"path": str(project / "dir" / f"f{n}"), "content": "x"}
            try:
                await client.write_text_file(params)
                accepted += 1
            except RpcError:
                refused += 1
        return accepted, refused

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        accepted, refused = asyncio.run(writes())
    finally:
        stop.set()
        swapper.join()
    assert accepted + refused == 1000 and swaps[0] > 0
    assert list(outside.iterdir()) == []


def test_a_fifo_in_the_project_is_refused_without_hanging(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    os.mkfifo(project / "pipe")
    client = _client(project)

    async def scenario() -> None:
        for call, params in (
            (client.read_text_file, {"path": str(project / "pipe")}),
            (client.write_text_file, {"path": str(project / "pipe"), "content": "x"}),
        ):
            with pytest.raises(RpcError, match=r"not a regular file|No such device"):
                await asyncio.wait_for(call(params), 5)

    asyncio.run(scenario())


def test_a_terminal_s_env_is_checked_before_anything_runs(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    client = _client(project)

    async def scenario() -> None:
        for env in (
            [{"name": "A=B", "value": "x"}],
            [{"name": "", "value": "x"}],
            [{"name": "OK", "value": "nul\0inside"}],
            {"PATH": "/x"},
        ):
            with pytest.raises(RpcError, match="env"):
                await client.terminal_create({"command": "true", "env": env})

    asyncio.run(scenario())


# -- what the engine gets, and what the agent gets ------------------------------------------


def test_what_the_agent_asks_for_is_set_inside_only(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine runs by its absolute path, in an environment with no loader variable and
    nothing the agent asked for; those reach the program inside, by --setenv."""
    monkeypatch.setenv("LD_PRELOAD", "/users/own.so")  # the user's, not named: withheld
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/lib")  # named in sandbox_env: inside only
    project = tmp_path / "project"
    project.mkdir()
    settings = sandbox.SandboxSettings(env=("LD_LIBRARY_PATH",))
    policy = sandbox.policy(settings, str(project), [])
    requested = {"PATH": f"{project}/bin", "LD_PRELOAD": f"{project}/x.so"}
    started = sandbox.launch(policy, ["true"], {"MINE": "1"}, requested=requested)
    assert isinstance(started.env, WholeEnvironment)
    assert started.env["PATH"] == os.environ["PATH"] and started.env["MINE"] == "1"
    assert not any(name.startswith("LD_") for name in started.env)
    assert os.path.isabs(started.argv[0]) or shutil.which("bwrap") is None
    argv = started.argv
    setenv = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
    assert setenv == {"LD_LIBRARY_PATH": "/opt/lib", **requested}
    assert argv.index("--setenv") < argv.index("--")


def test_the_environment_is_an_allow_list(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (
        ("AWS_SECRET_ACCESS_KEY", "aws"),
        ("GITHUB_TOKEN", "gh"),
        ("OPENAI_API_KEY", "openai"),
        ("ANTHROPIC_API_KEY", "anthropic"),
        ("HTTPS_PROXY", "http://proxy:3128"),
        ("LC_ALL", "C.UTF-8"),
        ("AWS_PROFILE", "work"),
    ):
        monkeypatch.setenv(name, value)
    project = home.parent / "project"
    project.mkdir()
    mine = sandbox.policy(sandbox.SandboxSettings(env=("AWS_PROFILE",)), str(project), [])
    env = mine.environment({"OWN": "set in config"})
    assert {"HTTPS_PROXY", "LC_ALL", "PATH", "HOME", "AWS_PROFILE", "OWN"} <= set(env)
    for secret in ("AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert secret not in env and secret in mine.withheld()
    # A catalog agent gets its provider's variables (claude: ANTHROPIC_*), no one else's.
    claude = sandbox.policy(sandbox.SandboxSettings(), str(project), [], ["ANTHROPIC_*"])
    assert "ANTHROPIC_API_KEY" in claude.environment({})
    assert "OPENAI_API_KEY" not in claude.environment({})
    # config.toml's sandbox_env
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[sandbox]\nenv = ["GITHUB_*"]\n[agents.c]\ncommand = "x"\nsandbox = true\n')
    from acpctl.config import load

    settings = load().sandbox_for("c")
    assert settings is not None and settings.env == ("GITHUB_*",)
    config.write_text('[agents.c]\ncommand = "x"\nsandbox = true\nsandbox_env = ["A=B"]\n')
    with pytest.raises(Exception, match="sandbox_env must be a list of variable names"):
        load()


# -- roots a person chose -------------------------------------------------------------------


def test_the_home_and_the_root_are_never_roots_unless_named(home: Path, tmp_path: Path) -> None:
    (home / ".ssh").mkdir()
    for wide in (home, Path("/"), home.parent):
        with pytest.raises(sandbox.RootRefused) as refused:
            sandbox.policy(sandbox.SandboxSettings(), str(wide), [])
        assert "sandbox_roots" in (refused.value.hint or "")
    with pytest.raises(sandbox.RootRefused, match=r"holds .*\.ssh"):
        sandbox.policy(sandbox.SandboxSettings(), str(home / ".ssh"), [])
    named = sandbox.policy(sandbox.SandboxSettings(roots=(str(home),)), str(home), [])
    assert named.roots == (home.resolve(),) and home / ".ssh" in named.hidden


def test_a_remote_client_s_roots_are_config_s_alone(home: Path, tmp_path: Path) -> None:
    none = sandbox.policy(sandbox.SandboxSettings(), None, [])
    assert none.roots == ()
    assert none.outside([str(home / "proj")]) == [str(home / "proj")]
    said = none.refusal("the session's", [str(home / "proj")])
    assert "from config.toml only" in said and "sandbox_roots" in said
    assert sandbox.command(none, ["agent"])[-4:] == ["--chdir", "/", "--", "agent"]
    project = tmp_path / "proj"
    project.mkdir()
    some = sandbox.policy(sandbox.SandboxSettings(roots=(str(project),)), None, [])
    assert some.roots == (project.resolve(),)


def test_acpctl_s_own_directories_are_hidden_from_the_first_run(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    assert not (home / "data").exists()
    policy = sandbox.policy(sandbox.SandboxSettings(), str(project), [])
    for own in ("config", "data", "state"):
        assert home / own in policy.hidden
        assert (home / own).stat().st_mode & 0o777 == 0o700


def test_a_program_behind_a_link_to_tmp_keeps_its_directory(home: Path, tmp_path: Path) -> None:
    import tempfile

    kept = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        program = kept / "agent"
        program.write_text("#!/bin/sh\n")
        link = home / "bin" / "agent"
        link.parent.mkdir()
        link.symlink_to(program)
        project = tmp_path / "project"
        project.mkdir()
        policy = sandbox.policy(sandbox.SandboxSettings(), str(project), [])
        argv = sandbox.command(policy, [str(link)])
        assert argv[argv.index(str(kept)) - 1] == "--ro-bind"
    finally:
        shutil.rmtree(kept)


# -- the attacks, end to end, with the real engine ------------------------------------------


FILE_AGENT = [sys.executable, str(Path(__file__).parent / "agents" / "file_agent.py")]


@pytest.fixture
def escapee(home: Path, outside_tmp: Path) -> Path:
    """The file agent, sandboxed, with its project outside /tmp (the sandbox's /tmp is
    private: a project there would make every refusal pass for free)."""
    problem = sandbox.engine_problem()
    if problem is not None:
        pytest.skip(f"no sandbox here: {problem}")
    assert cli("agents", "add", "files", "--sandbox", "--", *FILE_AGENT).returncode == 0
    project = outside_tmp / "project"
    (project / "bin").mkdir(parents=True)
    return project


def _preload_library(project: Path, mark: Path) -> Path | None:
    """A library whose constructor writes `mark`, built with the machine's C compiler."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    source = project / "x.c"
    source.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void taken(void) {\n"
        f'  FILE *f = fopen("{mark}", "w"); if (f) {{ fputs("out", f); fclose(f); }}\n'
        "}\n"
    )
    library = project / "x.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


@pytest.mark.e2e
@needs_linux
@pytest.mark.parametrize("through", ["direct", "through the host"])
def test_terminal_create_cannot_run_code_outside_the_sandbox(
    escapee: Path, outside_tmp: Path, through: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent plants a fake `bwrap` in its project and asks for a terminal with its own
    PATH; then a library, with LD_PRELOAD. Neither runs outside: the command runs in the
    sandbox, where the outside is read-only."""
    from tests.conftest import stop_running_host

    if through != "direct":
        import tempfile

        state = Path(tempfile.mkdtemp(prefix="acps", dir="/tmp"))
        monkeypatch.setenv("ACPCTL_STATE_DIR", str(state))
        assert cli("agents", "host", "on", "files").returncode == 0
    fake, preloaded = outside_tmp / "fake-bwrap-ran", outside_tmp / "preload-ran"
    (escapee / "bin" / "bwrap").write_text(f"#!/bin/sh\necho out > {fake}\nexec /bin/true\n")
    (escapee / "bin" / "bwrap").chmod(0o755)
    attacks = [{"command": "true", "env": [{"name": "PATH", "value": f"{escapee}/bin:/bin"}]}]
    library = _preload_library(escapee, preloaded)
    if library is not None:
        attacks.append({"command": "true", "env": [{"name": "LD_PRELOAD", "value": str(library)}]})
    try:
        for attack in attacks:
            prompt = f"terminal {json.dumps(attack)}"
            done = run_cli("run", "--agent", "files", "--cwd", str(escapee), prompt)
            assert done.returncode == 0, done.stderr
            assert "exit 0" in done.stdout, done.stdout
    finally:
        if through != "direct":
            stop_running_host()
    assert not fake.exists(), "the agent's bwrap ran outside the sandbox"
    assert not preloaded.exists(), "the agent's library was loaded outside the sandbox"


@pytest.mark.e2e
@needs_linux
def test_a_sandboxed_agent_gets_no_withheld_variable(
    escapee: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.raw_peer import raw_editor
    from tests.test_sandbox import said

    async def scenario() -> None:
        async with raw_editor(
            "--agent", "files", cwd=str(escapee), AWS_SECRET_ACCESS_KEY="aws", LC_ALL="C.UTF-8"
        ) as editor:
            session = await editor.session(str(escapee))
            for name, expected in (("AWS_SECRET_ACCESS_KEY", "unset"), ("LC_ALL", "C.UTF-8")):
                assert said(await editor.prompt(session, f"env {name}"), editor) == expected

    run(scenario())


@pytest.mark.e2e
@needs_linux
def test_a_host_started_in_the_home_gives_remote_clients_no_root_of_its_own(
    escapee: Path, home: Path, outside_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """systemd starts the host in the home; a WebSocket client with the token asks for a
    session in ~/proj. Its roots are config.toml's alone: none, so it is refused with what
    to set; with ~/proj named, the session runs and ~/.bashrc stays read-only."""
    from tests.test_host import LISTENING, Host, raw_client, serving

    user = outside_tmp / "user"  # outside /tmp, which is the sandbox's own
    proj = user / "proj"
    proj.mkdir(parents=True)
    (user / ".bashrc").write_text("# mine\n")
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.chdir(user)
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0")
    with serving(monkeypatch, *args, until=LISTENING) as (process, found, _):
        token = cli("serve", "--show-token").stdout.strip()
        host = Host(found.group(1).decode() + "/files", token, "", process)

        async def session_in_proj() -> dict[str, Any]:
            async with raw_client(host) as client:
                new = await client.request("session/new", {"cwd": str(proj), "mcpServers": []})
                if "result" in new:
                    session = new["result"]["sessionId"]
                    await client.send_prompt(session, f"write {user / '.bashrc'}")
                    await client.until(lambda m: m.get("id") == 7)
                return new

        refused = run(session_in_proj())
        assert refused["error"]["code"] == -32602
        assert "sandbox_roots" in refused["error"]["message"]
        import tomlkit

        config = home / "config" / "config.toml"  # [serve] holds the listener now, too
        document = tomlkit.parse(config.read_text())
        document["agents"]["files"]["sandbox_roots"] = [str(proj)]
        config.write_text(tomlkit.dumps(document))
        allowed = run(session_in_proj())
        assert "result" in allowed, allowed
    assert (user / ".bashrc").read_text() == "# mine\n"


@pytest.mark.e2e  # agents show asks the agent's version
def test_what_is_withheld_and_where_remote_roots_come_from_are_said(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """agents show and doctor list the withheld variables by name (never a value); doctor
    says where remote clients' roots come from; a home under /tmp is warned about; the
    systemd unit says its directory."""
    monkeypatch.setattr(sandbox, "engine_problem", lambda: None)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-print")
    assert cli("agents", "add", "mine", "--", "/bin/cat").returncode == 0
    on = cli("agents", "sandbox", "mine", "on")
    assert on.returncode == 0 and "is under /tmp" in on.stderr  # the test's home is
    shown = json.loads(cli("agents", "show", "mine", "--json").stdout)
    assert "AWS_SECRET_ACCESS_KEY" in shown["sandbox_withheld"]
    from acpctl.config import load
    from acpctl.doctor.checks.sandbox import check_sandbox

    monkeypatch.chdir(home.parent)
    said = [f.message for f in check_sandbox(load())]
    assert any("withheld from its environment: " in m and "AWS_SECRET" in m for m in said)
    assert any("remote clients" in m and "sandbox_roots" in m for m in said), said
    assert not any("do-not-print" in m for m in said)
    monkeypatch.chdir(home)
    refused = [
        f for f in check_sandbox(load()) if "cannot be a sandboxed agent's root" in f.message
    ]
    assert refused and refused[0].status == "warning" and "sandbox_roots" in refused[0].fix
    assert "WorkingDirectory=%h" in cli("serve", "--print-systemd").stdout


# -- what a person approves is what runs ----------------------------------------------------


def test_a_permission_s_command_is_shown_whole_with_its_turning_characters_visible(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bidi override in a command would show "rm -rf build #txt.evil" reversed; the
    terminal shows it as ⟨U+202E⟩, and the whole command beside the agent's own title."""
    from acpctl.terminal import questions

    async def typed(prompt: str) -> str:
        return "2"

    monkeypatch.setattr(questions, "read_line", typed)
    tool = {
        "title": "Bash\u202e",
        "rawInput": {"command": "rm -rf build \u202e#lmth.xedni && git push --force\x1b[2K"},
        "locations": [{"path": "/p/\u2066a\u2069"}],
    }
    options = [
        {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
        {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
    ]
    chosen = asyncio.run(questions.ask_on_terminal({"toolCall": tool, "options": options}))
    assert chosen == "reject"
    shown = capsys.readouterr().err
    assert "Bash⟨U+202E⟩" in shown
    assert "$ rm -rf build ⟨U+202E⟩#lmth.xedni && git push --force^[[2K" in shown
    assert "at /p/⟨U+2066⟩a⟨U+2069⟩" in shown
    assert "\u202e" not in shown and "\x1b" not in shown


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_page_shows_turning_characters_of_what_is_approved() -> None:
    """The page's visible() (the module acpctl/host/web/visible.js), run by node."""
    script = Path(__file__).parent.parent / "acpctl" / "host" / "web" / "visible.js"
    check = (
        f"import {{ visible }} from {json.dumps(script.as_uri())};"
        "process.stdout.write(JSON.stringify(visible(process.argv[1])));"
    )
    said = "rm -rf build \u202e#lmth.x\u2066\u200b\x1b[2K\u0007\nline two\ttab"
    done = subprocess.run(
        ["node", "--input-type=module", "-e", check, said],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == (
        "rm -rf build ⟨U+202E⟩#lmth.x⟨U+2066⟩⟨U+200B⟩⟨U+001B⟩[2K⟨U+0007⟩\nline two\ttab"
    )


@pytest.mark.e2e
def test_a_stopped_agent_shows_as_not_responding_and_its_cancel_is_settled(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent stopped with SIGSTOP mid-turn hung its clients: a cancel was never
    answered, and `serve --status` said "running". Now the status and `ps` say since when
    it does not respond, and the cancel is settled for the client after the deadline."""
    import signal
    import time

    import psutil

    from acpctl.runner.turns import CANCEL_DEADLINE_S
    from tests.test_host import serving, unix_client

    with serving(monkeypatch, "--idle-stop", "0") as (process, _, _):

        async def scenario() -> dict[str, Any]:
            async with unix_client("demo") as client:
                await client.request("initialize", {"protocolVersion": 1})
                new = await client.request("session/new", {"cwd": "/tmp", "mcpServers": []})
                session = new["result"]["sessionId"]
                await client.send_prompt(session, "slow", msg_id=7)
                await client.until(lambda m: m.get("method") == "session/update")
                agents = [c for c in psutil.Process(process.pid).children() if c.is_running()]
                for agent in agents:
                    agent.send_signal(signal.SIGSTOP)
                try:
                    said = await asyncio.to_thread(cli, "serve", "--status", "--json")
                    status: dict[str, Any] = json.loads(said.stdout)
                    shown = await asyncio.to_thread(cli, "ps")
                    assert "not responding since" in shown.stdout, shown.stdout
                    began = time.monotonic()
                    await client.send(
                        {
                            "jsonrpc": "2.0",
                            "method": "session/cancel",
                            "params": {"sessionId": session},
                        }
                    )
                    answer = await client.until(lambda m: m.get("id") == 7, CANCEL_DEADLINE_S + 20)
                    assert time.monotonic() - began >= CANCEL_DEADLINE_S * 0.9
                    assert answer["result"]["stopReason"] == "cancelled"
                    return status
                finally:
                    for agent in agents:
                        agent.send_signal(signal.SIGCONT)

        status = run(scenario())
    (demo,) = [a for a in status["agents"] if a["agent"] == "demo"]
    assert demo["notRespondingSince"] is not None


@pytest.mark.e2e
@needs_linux
def test_an_agent_acpctl_installed_runs_in_its_sandbox(escapee: Path, home: Path) -> None:
    """acpctl's own data directory is hidden from a sandboxed agent, and the agents it
    installed live there: they stay visible, read-only, so that they run confined."""
    from acpctl import paths
    from tests.raw_peer import raw_editor
    from tests.test_sandbox import said

    installed = paths.agents_dir() / "files-agent" / "1.0.0"
    installed.mkdir(parents=True)
    program = installed / "file_agent.py"
    shutil.copy(FILE_AGENT[1], program)
    assert (
        cli("agents", "add", "kept", "--sandbox", "--", sys.executable, str(program)).returncode
        == 0
    )
    (paths.data_dir() / "sessions").mkdir(exist_ok=True)
    secret = paths.data_dir() / "sessions" / "other.jsonl"
    secret.write_text("history")

    async def scenario() -> None:
        async with raw_editor("--agent", "kept", cwd=str(escapee)) as editor:
            session = await editor.session(str(escapee))
            assert said(await editor.prompt(session, f"write {program}"), editor).startswith(
                "error"
            )
            assert said(await editor.prompt(session, f"read {secret}"), editor).startswith("error")
            assert said(await editor.prompt(session, f"write {escapee / 'x'}"), editor).startswith(
                "wrote"
            )

    run(scenario())


@pytest.mark.e2e
@needs_linux
def test_a_terminal_command_naming_a_directory_of_tmp_does_not_open_it(escapee: Path) -> None:
    """The sandbox's /tmp is its own; a program of the agent's installed under the real
    /tmp keeps its directory. A terminal command's words are the agent's: naming a
    directory of the real /tmp (an ssh agent's socket is there) must not bind it in."""
    import tempfile

    kept = Path(tempfile.mkdtemp(prefix="acpctl-secret-", dir="/tmp"))
    try:
        (kept / "secret").write_text("THE USER'S")
        attack = {"command": "cat", "args": [str(kept / "secret")]}
        done = run_cli(
            "run", "--agent", "files", "--cwd", str(escapee), f"terminal {json.dumps(attack)}"
        )
        assert done.returncode == 0, done.stderr
        assert "THE USER'S" not in done.stdout, done.stdout
        assert "exit 1" in done.stdout, done.stdout  # no such file, in its own /tmp
    finally:
        shutil.rmtree(kept)
