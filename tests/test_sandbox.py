"""Agents in a sandbox (issue 44, docs/sandbox.md), with the real engine: bubblewrap, which
.ci/run installs from Debian's packages. Skipped, with the reason, where it cannot run."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from acpctl import sandbox
from acpctl.config import load
from tests.conftest import TEST_AGENTS, cli, run
from tests.raw_peer import RawEditor, raw_editor

FILE_AGENT = [sys.executable, str(TEST_AGENTS / "file_agent.py")]


needs_bwrap = pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's")


def said(answer: Any, editor: RawEditor) -> str:
    """The agent's words in the turn `answer` ended."""
    assert "result" in answer, answer
    chunks = [
        m["params"]["update"]["content"]["text"]
        for m in editor.messages
        if isinstance(m, dict)
        and m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
    ]
    return str(chunks[-1])


@pytest.fixture
def sandboxed(home: Path, outside_tmp: Path) -> Path:
    """The file agent added with --sandbox; its project, a directory of its own, outside
    /tmp (the sandbox's /tmp is its own: a project there would hide what is refused)."""
    problem = sandbox.engine_problem()
    if problem is not None:
        pytest.skip(f"no sandbox here: {problem}")
    assert cli("agents", "add", "files", "--sandbox", "--", *FILE_AGENT).returncode == 0
    project = outside_tmp / "project"
    project.mkdir()
    return project


@pytest.mark.e2e
@needs_bwrap
def test_a_sandboxed_agent_writes_its_project_and_nothing_else(
    sandboxed: Path, outside_tmp: Path
) -> None:
    home = outside_tmp / "user"  # the user's home, as the sandbox sees it
    other = outside_tmp / "other-project"
    fake_etc = outside_tmp / "root" / "etc"  # /etc in a temporary root: never the real one
    secret = home / ".ssh" / "id_ed25519"
    for directory in (other, fake_etc, secret.parent):
        directory.mkdir(parents=True)
    secret.write_text("PRIVATE KEY")
    (home / ".netrc").write_text("machine example.com password hunter2")

    async def scenario() -> None:
        async with raw_editor("--agent", "files", cwd=str(sandboxed), HOME=str(home)) as editor:
            session = await editor.session(str(sandboxed))

            async def do(text: str) -> str:
                return said(await editor.prompt(session, text), editor)

            assert await do(f"write {sandboxed / 'made.txt'}") == f"wrote {sandboxed / 'made.txt'}"
            for outside in (home / "note.txt", other / "x.txt", fake_etc / "passwd"):
                assert await do(f"write {outside}") == "error: Read-only file system"
            # Hidden: a directory empty (a tmpfs over it), a file unreadable (/dev/null over
            # it, on a mount without devices).
            assert await do(f"read {secret}") == "error: No such file or directory"
            assert await do(f"read {home / '.netrc'}") == "error: Permission denied"
            assert await do(f"read {sandboxed / 'made.txt'}") == "read: written in the sandbox"
            # Its own pid namespace: it sees none of the user's other processes.
            assert int((await do("pid")).split()[1]) < 10
            # The session's cwd outside the roots: refused with the roots named.
            new = await editor.call("session/new", {"cwd": str(other), "mcpServers": []})
            assert new["error"]["code"] == -32602
            assert str(other) in new["error"]["message"]
            assert str(sandboxed.resolve()) in new["error"]["message"]
            extra = {"cwd": str(sandboxed), "mcpServers": [], "additionalDirectories": [str(home)]}
            assert "error" in await editor.call("session/new", extra)

    run(scenario())
    assert (sandboxed / "made.txt").read_text() == "written in the sandbox\n"
    assert not (home / "note.txt").exists()
    assert not (other / "x.txt").exists()
    assert not (fake_etc / "passwd").exists()
    assert secret.read_text() == "PRIVATE KEY"


@pytest.mark.e2e
@needs_bwrap
def test_the_terminal_client_runs_a_sandboxed_agent_s_commands_in_its_sandbox(
    sandboxed: Path, outside_tmp: Path
) -> None:
    """terminal/create from a sandboxed agent to acpctl's own client (`acpctl run`): the
    command runs in the agent's sandbox, so it cannot write outside the roots either."""
    from tests.conftest import run_cli

    outside, inside = outside_tmp / "touched", sandboxed / "touched"
    for target, exit_code in ((inside, 0), (outside, 1)):
        done = run_cli("run", "--agent", "files", "--cwd", str(sandboxed), f"term {target}")
        assert done.returncode == 0, done.stderr
        assert f"term exit {exit_code}" in done.stdout
    assert inside.exists() and not outside.exists()


@pytest.mark.e2e
@needs_bwrap
def test_config_roots_and_state_directories_are_writable(
    sandboxed: Path, home: Path, outside_tmp: Path
) -> None:
    shared = outside_tmp / "shared"
    shared.mkdir()
    state = home / ".files-agent"
    state.mkdir()
    config = home / "config" / "config.toml"
    config.write_text(
        config.read_text().replace(
            "sandbox = true",
            f'sandbox = true\nsandbox_roots = ["{shared}"]\nsandbox_writable = ["{state}"]',
        )
    )

    async def scenario() -> None:
        async with raw_editor("--agent", "files", cwd=str(sandboxed)) as editor:
            session = await editor.session(str(sandboxed))
            for path in (shared / "a.txt", state / "token"):
                assert said(await editor.prompt(session, f"write {path}"), editor).startswith(
                    "wrote"
                )
            # The second root is a session's directory too.
            new = await editor.call("session/new", {"cwd": str(shared), "mcpServers": []})
            assert "result" in new

    run(scenario())
    assert (shared / "a.txt").exists() and (state / "token").exists()


@pytest.mark.e2e
@needs_bwrap
def test_without_the_engine_the_agent_does_not_start(
    sandboxed: Path, tmp_path: Path, home: Path
) -> None:
    """Fail closed: no bwrap on PATH, and run --acp says why and how to fix it, and the
    agent never runs unconfined."""
    empty = tmp_path / "bin"
    empty.mkdir()

    async def scenario() -> None:
        async with raw_editor(
            "--agent", "files", cwd=str(sandboxed), log=tmp_path / "err", PATH=str(empty)
        ) as editor:
            assert await editor.process.wait() != 0

    run(scenario())
    said = (tmp_path / "err").read_text()
    assert "bubblewrap" in said and "apt install bubblewrap" in said


@pytest.mark.e2e
@needs_bwrap
def test_through_the_host_two_projects_get_two_processes(
    sandboxed: Path, outside_tmp: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import tempfile

    from tests.conftest import stop_running_host

    state = Path(tempfile.mkdtemp(prefix="acps", dir="/tmp"))
    monkeypatch.setenv("ACPCTL_STATE_DIR", str(state))
    assert cli("agents", "host", "on", "files").returncode == 0
    second = outside_tmp / "second"
    second.mkdir()

    async def one(project: Path) -> str:
        async with raw_editor("--agent", "files", cwd=str(project)) as editor:
            session = await editor.session(str(project))
            made = project / "made.txt"
            assert said(await editor.prompt(session, f"write {made}"), editor) == f"wrote {made}"
            other = second if project == sandboxed else sandboxed
            assert said(await editor.prompt(session, f"write {other}/x"), editor).startswith(
                "error"
            )
            return str(session)

    async def again(project: Path, session: str) -> None:
        """Load, fork and attach keep working on the sandboxed agent through the host."""
        async with raw_editor("--agent", "files", cwd=str(project)) as editor:
            await editor.call("initialize", {"protocolVersion": 1})
            opened = {"sessionId": session, "cwd": str(project), "mcpServers": []}
            assert "result" in await editor.call("session/load", opened)
            fork = await editor.call("session/fork", opened)
            forked = fork["result"]["sessionId"]
            made = project / "forked.txt"
            assert said(await editor.prompt(forked, f"write {made}"), editor) == f"wrote {made}"
            assert "result" in await editor.call("session/attach", {"sessionId": session})

    try:
        first = run(one(sandboxed))
        run(again(sandboxed, first))
        run(one(second))
        status = cli("serve", "--status", "--json")
        import json

        agents = json.loads(status.stdout)["agents"]
        roots = sorted(a["sandbox"][0] for a in agents if a["agent"] == "files")
        assert roots == sorted([str(sandboxed.resolve()), str(second.resolve())])
    finally:
        stop_running_host()
        shutil.rmtree(state, ignore_errors=True)


def test_sandbox_settings_and_their_errors(home: Path) -> None:
    """config.toml's [sandbox] and [agents.NAME] sandbox keys; a catalog agent's settings
    table; a remote agent is refused."""
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        '[sandbox]\nroots = ["/srv/a"]\nnetwork = false\n\n'
        '[agents.claude]\nsandbox = true\nsandbox_roots = ["/srv/b"]\n\n'
        '[agents.mine]\ncommand = "x"\nsandbox = false\n'
    )
    cfg = load()
    settings = cfg.sandbox_for("claude")
    assert settings is not None and settings.roots == ("/srv/a", "/srv/b")
    assert settings.network is False
    assert cfg.sandbox_for("mine") is None and cfg.sandbox_for("codex") is None
    assert "claude" not in cfg.agents  # settings alone: still the catalog's agent
    config.write_text(config.read_text() + "\n[sandbox]\n")
    config.write_text('[agents.r]\nurl = "wss://h:1/acp"\nsandbox = true\n')
    with pytest.raises(Exception, match="remote agent is sandboxed by the session host"):
        load()
    config.write_text('[agents.c]\ncommand = "x"\nsandbox = "yes"\n')
    with pytest.raises(Exception, match="sandbox must be true or false"):
        load()
    refused = cli("agents", "add", "far", "--url", "wss://h:1/acp", "--sandbox")
    assert refused.returncode == 2
    assert "remote agent is sandboxed by the session host" in refused.stderr


def test_agents_sandbox_on_and_off_and_agents_list(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox, "engine_problem", lambda: "no bwrap (said by the test)")
    assert cli("agents", "add", "mine", "--", "/bin/cat").returncode == 0
    on = cli("agents", "sandbox", "mine", "on")
    assert on.returncode == 0 and "runs in a sandbox" in on.stdout
    assert "no bwrap (said by the test); until then mine does not start" in on.stderr
    assert load().sandbox_for("mine") is not None
    import json

    listed = json.loads(cli("agents", "list", "--json", "--no-probe").stdout)
    assert next(a for a in listed if a["name"] == "mine")["sandbox"] is True
    assert cli("agents", "sandbox", "claude", "on").returncode == 0  # a catalog agent
    assert load().sandbox_for("claude") is not None
    assert cli("agents", "sandbox", "mine", "off").returncode == 0
    assert load().sandbox_for("mine") is None
    assert cli("agents", "sandbox", "nobody", "on").returncode == 2


def test_the_policy_hides_secrets_and_acpctl_s_own_directories(home: Path, tmp_path: Path) -> None:
    (home / ".ssh").mkdir()
    (home / ".netrc").write_text("machine x password y")
    for sub in ("config", "data", "state"):
        (home / sub).mkdir()
    project = tmp_path / "p"
    project.mkdir()
    state = ["~/.agent.json", "~/.agent"]
    policy = sandbox.policy(sandbox.SandboxSettings(network=False), str(project), state)
    assert policy.roots == (project.resolve(),)
    # A state file that does not exist binds nothing; a state directory is made (0700),
    # so that the agent's first start can write there (pi's ~/.pi).
    assert policy.writable == ((home / ".agent").resolve(),)
    assert (home / ".agent").stat().st_mode & 0o777 == 0o700
    hidden = set(policy.hidden)
    assert {home / ".ssh", home / ".netrc", home / "config", home / "data", home / "state"} <= {
        h for h in hidden
    }
    argv = sandbox.command(policy, ["agent", "--acp"])
    # The engine by its absolute path, found once on acpctl's own PATH.
    assert Path(argv[0]).is_absolute() or shutil.which("bwrap") is None
    assert Path(argv[0]).name == "bwrap" and argv[-3:] == ["--", "agent", "--acp"]
    assert "--unshare-net" in argv
    # What is hidden comes after the roots: a root that holds a secret keeps it hidden.
    assert argv.index(str(project.resolve())) < argv.index(str(home / ".ssh"))
    assert policy.outside([str(project / "sub"), "/etc"]) == ["/etc"]
    # An agent installed under /tmp (a checkout, a venv) keeps its directory, read-only,
    # over the private /tmp; a path that does not exist binds nothing.
    import tempfile

    kept = Path(tempfile.mkdtemp(dir="/tmp"))
    program = kept / "venv" / "agent.py"
    program.parent.mkdir()
    program.write_text("")
    argv = sandbox.command(policy, ["python", str(program), "/tmp/nothing-here/x"])
    assert argv.index("--tmpfs") < argv.index(str(kept))
    assert argv[argv.index(str(kept)) - 1 : argv.index(str(kept)) + 1] == ["--ro-bind", str(kept)]
    assert "/tmp/nothing-here" not in argv
    shutil.rmtree(kept)


def test_acpctl_s_own_client_refuses_what_the_sandbox_hides(home: Path, tmp_path: Path) -> None:
    """fs/read_text_file and fs/write_text_file from a sandboxed agent to acpctl's own client:
    a session in the home directory may not reach what the sandbox hides through the client."""
    import asyncio

    from acpctl.jsonrpc import RpcError
    from acpctl.terminal.host import ClientHost

    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (home / "notes.txt").write_text("mine")
    # The home as a root only where config.toml names it (docs/sandbox.md).
    policy = sandbox.policy(sandbox.SandboxSettings(roots=(str(home),)), str(home), [])
    client = ClientHost([str(home)], "approve-all", sandbox=policy)

    async def scenario() -> None:
        read = await client.read_text_file({"path": str(home / "notes.txt")})
        assert read == {"content": "mine"}
        for method, params in (
            (client.read_text_file, {"path": str(home / ".ssh" / "id_ed25519")}),
            (client.write_text_file, {"path": str(home / ".ssh" / "config"), "content": "x"}),
        ):
            with pytest.raises(RpcError, match="hidden by the agent's sandbox"):
                await method(params)

    asyncio.run(scenario())
    assert not (home / ".ssh" / "config").exists()


@pytest.mark.e2e
@needs_bwrap
def test_doctor_probes_a_sandboxed_agent_in_its_sandbox(sandboxed: Path, outside_tmp: Path) -> None:
    """The probe starts the agent as `run --acp` does: one whose start writes outside its
    roots fails in the doctor too, and the file is not there afterwards."""
    import json

    mark = outside_tmp / "started"
    start = f'touch "{mark}" && exec "$0" "$@"'
    added = cli("agents", "add", "marks", "--sandbox", "--", "sh", "-c", start, *FILE_AGENT)
    assert added.returncode == 0, added.stderr
    findings = {}
    for name in ("files", "marks"):
        done = cli("doctor", "--agent", name, "--json", "--timeout", "10")
        findings[name] = [f for f in json.loads(done.stdout) if f["check"] == f"agent {name}"]
    assert findings["files"] and all(f["status"] != "problem" for f in findings["files"])
    assert any(f["status"] == "problem" for f in findings["marks"]), findings["marks"]
    assert not mark.exists()
