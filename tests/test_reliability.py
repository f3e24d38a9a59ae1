"""No single input wedges or kills a connection, and no file acpctl touches is damaged:
regression tests for each hole found, through real processes where it matters."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acpctl import protocol as acp
from acpctl.runner import runs
from tests.conftest import TEST_AGENTS, cli, run_cli, write_executable
from tests.fake_backend import Harness
from tests.raw_peer import raw_editor


async def _until(condition: Any, timeout: float = 20) -> None:
    """Until `condition()` holds: for what another process shows only in its files."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the condition never held"
        await asyncio.sleep(0.02)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 90))


# -- the connection ---------------------------------------------------------------------


@pytest.mark.e2e
def test_deeply_nested_lines_from_the_editor_get_errors_and_serving_goes_on(
    home: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with raw_editor() as editor:
            editor.write(b"[" * 100_000 + b"\n")
            params = "{" + '"a":{' * 5_000 + "}" * 5_000 + "}"
            editor.write(
                b'{"jsonrpc":"2.0","id":"deep","method":"x","params":' + params.encode() + b"}\n"
            )
            errors = [
                await editor.wait_for(
                    lambda m: isinstance(m, dict) and "error" in m and m.get("id") is None
                )
            ]
            assert errors[0]["error"]["code"] == acp.PARSE_ERROR
            sid = await editor.session(str(tmp_path))
            answer = await editor.prompt(sid, "still here?")
            assert answer["result"]["stopReason"] == acp.END_TURN
            parse_errors = [
                m
                for m in editor.messages
                if isinstance(m, dict) and m.get("error", {}).get("code") == acp.PARSE_ERROR
            ]
            assert len(parse_errors) == 2
        assert editor.process.returncode == 0

    run(scenario())


@pytest.mark.e2e
def test_an_unreadable_message_from_the_agent_fails_the_prompt_not_the_session(
    home: Path, tmp_path: Path
) -> None:
    starts = tmp_path / "starts.log"
    agent = write_executable(
        tmp_path / "hostile",
        f"#!/bin/sh\nexec {sys.executable} {TEST_AGENTS / 'hostile_agent.py'}\n",
    )
    assert (
        run_cli(
            "agents", "add", "hostile", "--env", f"HOSTILE_AGENT_LOG={starts}", "--", str(agent)
        ).returncode
        == 0
    )

    async def scenario() -> None:
        async with raw_editor("--agent", "hostile") as editor:
            sid = await editor.session(str(tmp_path))
            failed = await editor.prompt(sid, "go deep")
            assert "cannot read (nested too deeply)" in failed["error"]["message"]
            again = await editor.prompt(sid, "and now?")
            assert again["result"]["stopReason"] == acp.END_TURN
        assert starts.read_text().count("started") == 2  # ended, then started again

    run(scenario())


@pytest.mark.e2e
def test_a_huge_batch_does_not_starve_other_input(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with raw_editor() as editor:
            await editor.call("initialize", {"protocolVersion": 1})
            editor.send(
                [
                    {"jsonrpc": "2.0", "id": f"b{i}", "method": "session/list", "params": {}}
                    for i in range(10_000)
                ]
            )
            after = await editor.call("session/list", {})
            assert "result" in after
            batch = await editor.wait_for(lambda m: isinstance(m, list), timeout=60)
            assert len(batch) == 10_000
            order = editor.messages.index(after) < editor.messages.index(batch)
            assert order, "the request sent after the batch waited for all of it"

    run(scenario())


@pytest.mark.e2e
def test_closing_the_connection_exits_quietly(home: Path, tmp_path: Path) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "acpctl", "run", "--acp"],
        input=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert process.returncode == 0
    assert "Traceback" not in process.stderr and "Exception ignored" not in process.stderr


# -- recording on a full disk -------------------------------------------------------------


@contextlib.contextmanager
def small_disk(path: Path, size: str = "256k") -> Iterator[Path]:
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> Path:
    """Fill the disk to the last page (tmpfs counts whole pages: appends still fit into the
    last page of a file, then fail part-way)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 4096)
    return filler


@pytest.mark.e2e
def test_a_full_disk_never_stops_the_relay_and_loses_no_event(
    home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_disk(tmp_path / "disk") as disk:

        async def scenario(h: Harness) -> None:
            sid = await h.session()
            await h.result(
                acp.SESSION_PROMPT,
                {"sessionId": sid, "prompt": [{"type": "text", "text": "before"}]},
            )
            filler = fill(disk)
            for turn in range(3):  # each turn needs a new page: writes fail
                result = await h.result(
                    acp.SESSION_PROMPT,
                    {
                        "sessionId": sid,
                        "prompt": [{"type": "text", "text": f"while full {turn} " + "x" * 5000}],
                    },
                )
                assert result == {"stopReason": acp.END_TURN}
            await h.conn.recorder.committed()  # the metadata's write fails too
            lines = (disk / "sessions" / sid / "events.jsonl").read_bytes()
            assert lines.endswith(b"\n")  # no partial line was left behind
            filler.unlink()  # space returns
            await h.result(
                acp.SESSION_PROMPT,
                {"sessionId": sid, "prompt": [{"type": "text", "text": "after"}]},
            )
            prompts = [
                e["update"]["content"]["text"][:12]
                for e in h.store.iter_events(sid)
                if e["type"] == "update"
            ]
            assert prompts == ["before", "while full 0", "while full 1", "while full 2", "after"]
            assert [e["type"] for e in h.store.iter_events(sid)].count("turn_end") == 5
            await h.conn.recorder.committed()
            assert h.store.read_meta(sid).turns == 5

        caplog.set_level(logging.WARNING, "tests.fake")

        async def main() -> None:
            h = Harness(disk / "sessions")
            await asyncio.wait_for(scenario(h), 20)

        asyncio.run(main())
        warnings = [r.getMessage() for r in caplog.records]
        failed = [w.split(" of session")[0] for w in warnings if "cannot write" in w]
        assert sorted(failed) == ["cannot write the events", "cannot write the metadata"]
        assert sum("are written again" in w for w in warnings) == 2


# -- settings files -------------------------------------------------------------------------


def test_settings_that_are_not_regular_files_are_refused_untouched(
    home: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    targets = [fifo]
    if os.geteuid() == 0:  # a device node of our own, never a real one
        device = tmp_path / "null.json"
        os.mknod(device, 0o600 | __import__("stat").S_IFCHR, os.makedev(1, 3))
        targets.append(device)
    for target in targets:
        before = sorted(os.listdir(tmp_path))
        for command in ("install", "uninstall"):
            result = cli(command, "zed", "--settings", str(target))
            assert result.returncode == 2, result.stderr
            assert "not a regular file" in result.stderr and "Traceback" not in result.stderr
        assert sorted(os.listdir(tmp_path)) == before


def test_backups_are_counted_by_exact_name(tmp_path: Path) -> None:
    from acpctl.editors.settings_file import Change, edit

    odd = tmp_path / "set[1].json"
    plain = tmp_path / "settings.json"
    starry = tmp_path / "s*"
    for path in (odd, plain, starry):
        path.write_text("{}\n")
    for index in range(3):
        edit(plain, [Change(("a",), "k", index)])
    for index in range(8):
        edit(odd, [Change(("a",), "k", index)])
        edit(starry, [Change(("a",), "k", index)])
    names = os.listdir(tmp_path)

    def backups(name: str) -> int:
        return sum(n.startswith(name + ".acpctl-") and n.endswith(".bak") for n in names)

    assert (backups("set[1].json"), backups("s*"), backups("settings.json")) == (5, 5, 3)


@pytest.mark.parametrize(
    "original",
    [
        '{"agent_servers": {/* keep */}}\n',
        '{\n  "agent_servers": {// keep\n  }\n}\n',
        '{ "a": 1, // c\n  "agent_servers": {} }\n',
        "// nothing but comments\n/* here */\n",
    ],
)
def test_comments_round_trip_through_install_and_uninstall(tmp_path: Path, original: str) -> None:
    from acpctl.editors.settings_file import Change, edit

    path = tmp_path / "settings.json"
    path.write_text(original)
    edit(path, [Change(("agent_servers",), "Mine", {"command": "x"})])
    assert "keep" in path.read_text() or "keep" not in original
    edit(path, [Change(("agent_servers",), "Mine")])
    if original.startswith("//"):  # a file of comments gets an object, comments kept
        assert path.read_text().startswith(original)
    else:
        assert path.read_text() == original


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[" * 1000 + "]" * 1000, "nested more than"),
        ('{"a": "tab\tinside"}', "invalid string"),
        ('{"a": NaN}', "unexpected character"),
        ('{"a": {"b": [Infinity]}}', "unexpected character"),
        ('{"a": {,}}', "expected 'string'"),
        ('{"a": [1,,]}', "unexpected character ','"),
        ('{"a": 1} /* open', "unterminated /* comment"),
    ],
)
def test_unusable_settings_get_one_line_errors(
    home: Path, tmp_path: Path, text: str, says: str
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(text)
    result = cli("install", "zed", "--settings", str(settings))
    assert result.returncode == 2 and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and settings.read_text() == text


# -- the store ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"acpctlExport": 1, "session": {"id": "a", "turns": "many"}}\n', "turns must be"),
        (b'{"acpctlExport": 1, "session": {"id": "a", "command": "ls"}}\n', "command must be"),
        (b"\xff\xfe not text", "not UTF-8"),
        (b"[" * 100_000, "nested too deeply"),
        (b'{"acpctlExport": 1, "session": {"id": "a"}, "events": 5}', "not an acpctl export"),
    ],
)
def test_crafted_imports_get_one_line_errors_and_write_nothing(
    home: Path, tmp_path: Path, content: bytes, says: str
) -> None:
    crafted = tmp_path / "crafted.json"
    crafted.write_bytes(content)
    result = cli("sessions", "import", str(crafted))
    assert result.returncode == 2 and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    sessions = home / "data" / "sessions"
    assert not sessions.exists() or not any(
        p.is_dir() and not p.name.startswith(".") for p in sessions.iterdir()
    )


def test_an_import_whose_id_cannot_be_a_directory_says_so(home: Path, tmp_path: Path) -> None:
    crafted = tmp_path / "export.jsonl"
    crafted.write_text(json.dumps({"acpctlExport": 1, "session": {"id": "../../etc"}}) + "\n")
    result = cli("sessions", "import", str(crafted))
    assert result.returncode == 0, result.stderr
    assert "cannot name a session directory" in result.stdout
    assert "taken" not in result.stdout


def _count_turns(root: str, session_id: str, turns: int) -> None:
    from acpctl.store.sessions import SessionStore

    store = SessionStore(Path(root))
    meta = store.read_meta(session_id)  # each writer has its own, soon stale, copy
    for _ in range(turns):
        meta.turns += 1  # as the recorder counts a turn the file does not have yet
        store.record_meta(meta, turns_added=1)


def test_concurrent_writers_lose_no_turn(tmp_path: Path) -> None:
    import multiprocessing

    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore(tmp_path / "sessions")
    store.create(SessionMeta(id="shared", agent="demo", command=[], cwd="/tmp")).close()
    context = multiprocessing.get_context("fork")
    writers = [
        context.Process(target=_count_turns, args=(str(store.root), "shared", 40)) for _ in range(3)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
    assert store.read_meta("shared").turns == 120


def load_is_refused(root: Path, session_id: str, said: str) -> None:
    """session/load of the session, through a server in this process on the store at
    `root`, is answered within 10 s with an error that says `said`."""

    async def load() -> None:
        h = Harness(root)
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        answer = await h.request(acp.SESSION_LOAD, {"sessionId": session_id, "cwd": "/tmp"})
        assert said in answer["error"]["message"]

    asyncio.run(asyncio.wait_for(load(), 10))


def test_a_symlinked_event_log_is_refused_not_followed(tmp_path: Path) -> None:
    from acpctl.store.lines import CorruptSession
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore(tmp_path / "sessions")
    store.create(SessionMeta(id="s1", agent="demo", command=[], cwd="/tmp")).close()
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    events = store.root / "s1" / "events.jsonl"
    events.unlink()
    events.symlink_to(outside)
    with pytest.raises(CorruptSession, match="symbolic link"):
        store.open_writer("s1")
    with pytest.raises(CorruptSession, match="symbolic link"):
        list(store.iter_events("s1"))

    load_is_refused(store.root, "s1", "symbolic link")
    assert outside.read_text() == "not yours\n"


def test_an_event_log_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO (or a device) in place of events.jsonl: every reader and writer refuses it
    with a clear error at once, where opening it would block (and a host with it); a
    resume that would read it back is refused."""
    from acpctl.store.lines import CorruptSession
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore(tmp_path / "sessions")
    store.create(SessionMeta(id="s1", agent="demo", command=[], cwd="/tmp")).close()
    events = store.root / "s1" / "events.jsonl"
    events.unlink()
    os.mkfifo(events, 0o600)
    with pytest.raises(CorruptSession, match="not a regular file"):
        store.open_writer("s1")
    with pytest.raises(CorruptSession, match="not a regular file"):
        list(store.iter_events("s1"))
    assert list(store.agent_lines(("s1", 0, 0), 10)) == []

    load_is_refused(store.root, "s1", "not a regular file")


def test_verify_names_an_event_log_that_is_not_a_regular_file_and_repairs_nothing_from_it(
    home: Path,
) -> None:
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore()
    meta = SessionMeta(id="s1", agent="demo", command=[], cwd="/tmp")
    meta.turns = 3
    store.create(meta).close()
    events = store.root / "s1" / "events.jsonl"
    events.unlink()
    os.mkfifo(events, 0o600)
    for args in ((), ("--repair",)):
        verified = cli("sessions", "verify", *args)
        assert verified.returncode == 1, verified.stdout
        assert "not a regular file" in verified.stdout and "Traceback" not in verified.stderr
    assert store.read_meta("s1").turns == 3  # not "repaired" from a log it could not read
    assert stat.S_ISFIFO(events.lstat().st_mode)


def test_a_symlinked_session_directory_is_refused_not_followed(home: Path, tmp_path: Path) -> None:
    """sessions/<id> replaced by a link to a directory elsewhere: nothing reads or writes
    through it, verify names it, and deleting the session removes the link only."""
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore()
    store.create(SessionMeta(id="real", agent="demo", command=[], cwd="/tmp")).close()
    elsewhere = tmp_path / "elsewhere"
    (store.root / "real").rename(elsewhere)
    (store.root / "linked").symlink_to(elsewhere, target_is_directory=True)
    before = (elsewhere / "events.jsonl").read_bytes()
    shown = cli("sessions", "show", "linked")
    assert shown.returncode != 0 and "Traceback" not in shown.stderr
    verified = cli("sessions", "verify")
    assert verified.returncode == 1 and "linked" in verified.stdout
    assert "symbolic link" in verified.stdout

    async def load(h: Harness) -> None:
        await h.result(acp.INITIALIZE, {"protocolVersion": 1})
        answer = await h.request(acp.SESSION_LOAD, {"sessionId": "linked", "cwd": "/tmp"})
        assert "symbolic link" in answer["error"]["message"]
        prompt = {"sessionId": "linked", "prompt": [{"type": "text", "text": "hi"}]}
        assert "error" in await h.request(acp.SESSION_PROMPT, prompt)

    async def main() -> None:
        await asyncio.wait_for(load(Harness(store.root)), 10)

    run(main())
    assert (elsewhere / "events.jsonl").read_bytes() == before
    deleted = cli("sessions", "delete", "linked")
    assert deleted.returncode == 0, deleted.stderr
    assert not (store.root / "linked").exists() and (elsewhere / "events.jsonl").exists()


@pytest.mark.e2e
def test_everything_is_private_whatever_the_umask(home: Path, tmp_path: Path) -> None:
    def umask_zero() -> None:
        os.umask(0)

    turn = subprocess.run(
        [sys.executable, "-m", "acpctl", "run", "--approve-all", "hello"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        preexec_fn=umask_zero,
        stdin=subprocess.DEVNULL,
    )
    assert turn.returncode == 0, turn.stderr
    export = tmp_path / "export.md"
    sid = json.loads(run_cli("sessions", "list", "--json").stdout)[0]["id"]
    exported = subprocess.run(
        [sys.executable, "-m", "acpctl", "sessions", "export", sid, "-o", str(export)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=umask_zero,
    )
    assert exported.returncode == 0, exported.stderr
    assert export.stat().st_mode & 0o777 == 0o600
    for root in (home / "data", home / "state"):
        for directory, _, files in os.walk(root):
            assert os.stat(directory).st_mode & 0o777 == 0o700, directory
            for name in files:
                path = os.path.join(directory, name)
                assert os.stat(path).st_mode & 0o777 == 0o600, path
    verify = run_cli("sessions", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr  # ordinary use is clean


# -- commands and processes -----------------------------------------------------------------


@pytest.mark.e2e
def test_doctor_ends_a_probe_that_prints_a_banner_then_waits(home: Path, tmp_path: Path) -> None:
    agent = write_executable(
        tmp_path / "quiet",
        f"#!/bin/sh\nFAKE_AGENT_MODE=banner-hang exec {sys.executable} "
        f"{TEST_AGENTS / 'fake_agent.py'}\n",
    )
    assert run_cli("agents", "add", "quiet", "--", str(agent)).returncode == 0
    result = run_cli("doctor", "--agent", "quiet", "--timeout", "2", timeout=60)
    assert "no answer to initialize" in result.stdout
    assert "Welcome to FancyAgent" in result.stdout


def test_pi_commands_get_rpc_mode() -> None:
    from acpctl.runner.backends.pi.child import rpc_argv

    assert rpc_argv(["pi"]) == ["pi", "--mode", "rpc"]
    assert rpc_argv(["pi", "--mode", "rpc"]) == ["pi", "--mode", "rpc"]
    assert rpc_argv(["pi", "--mode=rpc", "--model", "x"]) == ["pi", "--mode=rpc", "--model", "x"]


@pytest.mark.e2e
def test_a_pi_agent_that_prints_text_fails_session_new_with_a_hint(
    home: Path, tmp_path: Path
) -> None:
    not_pi = write_executable(
        tmp_path / "not-pi", "#!/bin/sh\necho 'Hello from a chat tool'\nexec sleep 60\n"
    )
    assert run_cli("agents", "add", "notpi", "--kind", "pi-rpc", "--", str(not_pi)).returncode == 0

    async def scenario() -> None:
        async with raw_editor("--agent", "notpi") as editor:
            await editor.call("initialize", {"protocolVersion": 1})
            answer = await editor.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            message = answer["error"]["message"]
            assert "Hello from a chat tool" in message and "--mode rpc" in message

    run(scenario())


@pytest.mark.e2e
def test_a_closed_output_pipe_ends_the_run_quietly(home: Path, tmp_path: Path) -> None:
    import psutil

    # The processes this run starts carry a mark in their environment: the other xdist
    # worker's acpctl processes are not this test's to wait for (issue 53).
    mark = f"closed-pipe-{os.getpid()}-{tmp_path.name}"
    result = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m acpctl run slow | head -c 5"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "ACPCTL_TEST_MARK": mark},
    )
    assert result.stdout == "You s" and result.returncode == 0
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr

    def marked(process: psutil.Process) -> bool:
        try:
            return bool(process.environ().get("ACPCTL_TEST_MARK") == mark)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False

    left = [p for p in psutil.process_iter() if marked(p)]
    assert psutil.wait_procs(left, timeout=10)[1] == []


@pytest.mark.e2e
def test_a_prompt_in_a_shell_loop_leaves_the_loops_input_alone(home: Path, tmp_path: Path) -> None:
    script = (
        f'printf "one\\ntwo\\n" | while read x; do {sys.executable} -m acpctl run '
        '--format quiet "$x"; done'
    )
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.stdout == "You said: one\nYou said: two\n", result.stderr


# -- fault injection ------------------------------------------------------------------------


@pytest.mark.e2e
def test_agent_kill_9_in_a_loop_every_next_prompt_works(home: Path, tmp_path: Path) -> None:
    import psutil

    async def scenario() -> None:
        async with raw_editor() as editor:
            sid = await editor.session(str(tmp_path))
            record = runs.path_of(editor.process.pid)
            for round_ in range(4):  # the restart limit allows 5 a minute
                agents = psutil.Process(editor.process.pid).children(recursive=True)
                for agent in agents:
                    agent.kill()
                psutil.wait_procs(agents, timeout=10)
                # Once the run has seen the death (its record drops the agent's pid), the
                # next prompt restarts the agent and succeeds.
                await _until(lambda: json.loads(record.read_text())["agentPid"] is None)
                answer = await editor.prompt(sid, f"round {round_}")
                assert answer["result"]["stopReason"] == acp.END_TURN, answer

    run(scenario())


@pytest.mark.e2e
def test_acpctl_kill_9_then_load_in_a_loop(home: Path, tmp_path: Path) -> None:
    import psutil

    async def doomed(turn: int, sid: str | None) -> str:
        async with raw_editor() as editor:
            if sid is None:
                sid = await editor.session(str(tmp_path))
            else:
                await editor.call("initialize", {"protocolVersion": 1})
                loaded = await editor.call(
                    "session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
                )
                assert "result" in loaded, loaded
            await editor.prompt(sid, f"turn {turn}")
            editor.send(jsonrpc_prompt(sid, "slow and doomed"))
            await editor.wait_for(
                lambda m: (
                    isinstance(m, dict)
                    and m.get("method") == "session/update"
                    and "doomed" in json.dumps(m)
                )
            )
            tree = [
                editor.process.pid,
                *(p.pid for p in psutil.Process(editor.process.pid).children(recursive=True)),
            ]
            for pid in tree:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
        return sid

    sid = None
    for turn in range(3):
        sid = run(doomed(turn, sid))
    assert sid is not None
    assert run_cli("sessions", "verify", "--repair").returncode in (0, 1)
    shown = run_cli("sessions", "show", sid)
    for turn in range(3):
        assert f"turn {turn}" in shown.stdout


def jsonrpc_prompt(sid: str, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": "doomed",
        "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
    }


@pytest.mark.e2e
def test_a_kill_right_after_the_response_loses_nothing(home: Path, tmp_path: Path) -> None:
    """Issue 16: the fsync is off the response's path, but every event of a turn is in the
    OS before the editor sees the response: kill -9 at once, and the turn is all there."""
    import signal

    import psutil

    async def scenario() -> str:
        async with raw_editor() as editor:
            sid = await editor.session(str(tmp_path))
            answer = await editor.prompt(sid, "think and plan hello")
            assert answer["result"]["stopReason"] == "end_turn"
            agents = psutil.Process(editor.process.pid).children(recursive=True)
            os.kill(editor.process.pid, signal.SIGKILL)
            for agent in agents:
                agent.kill()
            return str(sid)

    sid = asyncio.run(asyncio.wait_for(scenario(), 30))
    lines = (home / "data" / "sessions" / sid / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert events[0]["type"] == "update"  # the prompt
    assert [e["type"] for e in events[1:-1]] == ["agent"] * (len(events) - 2)
    assert events[-1] == {**events[-1], "type": "turn_end", "stopReason": "end_turn"}


@pytest.mark.e2e
def test_every_prompt_is_answered_when_the_agent_sends_unreadable_lines_under_load(
    home: Path, tmp_path: Path
) -> None:
    """The agent is ended for each unreadable answer and started again: every waiting
    prompt settles, with CPU burners competing for both cores (the race this guards: the
    agent's reader died on the stderr pump's cancellation, and a prompt waited forever)."""
    agent = write_executable(
        tmp_path / "hostile",
        f"#!/bin/sh\nexec {sys.executable} {TEST_AGENTS / 'hostile_agent.py'}\n",
    )
    assert run_cli("agents", "add", "hostile", "--", str(agent)).returncode == 0
    burn = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass\n"
    burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(2)]

    async def scenario() -> None:
        answered = 0
        async with raw_editor("--agent", "hostile") as editor:
            sid = await editor.session(str(tmp_path))
            for _ in range(4):  # the crash-loop guard allows 5 restarts a minute
                failed = await editor.prompt(sid, "go deep")
                assert "cannot read (nested too deeply)" in failed["error"]["message"]
                again = await editor.prompt(sid, "and now?")
                assert again["result"]["stopReason"] == acp.END_TURN
                answered += 2
        assert answered == 8

    try:
        run(scenario())
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


@pytest.mark.e2e
def test_waiting_for_an_agent_whose_stderr_pump_was_ended_returns_its_status() -> None:
    """terminate() ends the stderr pump; wait() afterwards still returns the exit status
    (it raised CancelledError, which killed the agent's reader before it failed the
    requests waiting on it)."""
    from acpctl.runner.supervisor import AgentProcess

    async def scenario() -> int:
        process = AgentProcess(["/bin/sh", "-c", "echo bye >&2; exit 7"], {})
        process.spawn()
        await process.attach(logging.getLogger("tests"))
        assert process._stderr_task is not None
        process._stderr_task.cancel()
        return await process.wait()

    assert run(scenario()) == 7


def test_a_broken_jsonl_export_names_its_bad_line(home: Path, tmp_path: Path) -> None:
    export = tmp_path / "export.jsonl"
    export.write_text(
        json.dumps({"acpctlExport": 1, "session": {"id": "s1"}}) + '\n{"ts": 1, "type": "upd\n'
    )
    result = cli("sessions", "import", str(export))
    assert result.returncode == 2
    assert "line 2 is not JSON" in result.stderr and "neither" not in result.stderr


def test_a_session_opened_on_a_full_disk_is_recorded_when_space_returns(tmp_path: Path) -> None:
    import errno

    from acpctl.store.sessions import SessionStore

    store = SessionStore(tmp_path / "sessions")
    full = True
    real_create = store.create

    def create(meta: Any) -> Any:
        if full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_create(meta)

    store.create = create  # type: ignore[method-assign]

    async def scenario() -> None:
        nonlocal full
        h = Harness(store.root)
        h.store = store
        h.conn.store = store
        h.conn.recorder.store = store
        sid = await h.session()
        blocks = [{"type": "text", "text": "written while full"}]
        assert "result" in await h.request(acp.SESSION_PROMPT, {"sessionId": sid, "prompt": blocks})
        assert not store.exists(sid)
        full = False
        blocks = [{"type": "text", "text": "after space returned"}]
        assert "result" in await h.request(acp.SESSION_PROMPT, {"sessionId": sid, "prompt": blocks})
        await h.server.shutdown()
        texts = [
            event["update"]["content"]["text"]
            for event in store.iter_events(sid)
            if event.get("type") == "update"
        ]
        assert texts == ["written while full", "after space returned"]
        assert store.read_meta(sid).turns == 2

    run(asyncio.wait_for(scenario(), 10))


@pytest.mark.e2e
def test_a_child_that_just_exited_is_signalled_without_a_python_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 53, 5: asyncio's terminate() polls the child first, reaping one that has just
    exited under the child watcher, which then logs "Unknown child process pid N, will
    report returncode 255" on the user's terminal (doctor against an unreachable ssh agent,
    4 runs in 8). signal_child signals by pid: the exit status is the child's."""
    import psutil

    from acpctl.processes import signal_child

    def exited(pid: int) -> bool:
        try:
            return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return True

    async def scenario() -> list[int]:
        codes = []
        for _ in range(20):
            process = await asyncio.create_subprocess_exec("sh", "-c", "exit 3")
            while not exited(process.pid):  # exited, and maybe not reaped yet: the race
                await asyncio.sleep(0.001)
            signal_child(process)
            codes.append(await process.wait())
        return codes

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        assert run(scenario()) == [3] * 20
    assert not [r for r in caplog.records if "Unknown child" in r.getMessage()]
