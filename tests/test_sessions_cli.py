"""Issue 7: `acpctl sessions`, on stores written by real `acpctl run` processes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from acp import text_block

from acpctl import protocol as acp_names
from acpctl.store.sessions import SessionMeta, SessionStore
from tests.acp_peer import connect, initialized
from tests.conftest import acpctl_argv, cli, run_cli, stored_updates


def turn(cwd: Path, *args: str) -> None:
    result = subprocess.run(
        acpctl_argv("run", "--approve-all", *args),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr


def listed(*args: str) -> list[dict[str, object]]:
    result = run_cli("sessions", "list", "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def store(home: Path) -> SessionStore:
    return SessionStore(home / "data" / "sessions")


def old_session(home: Path, sid: str, updated: str, agent: str = "demo") -> None:
    writer = store(home).create(
        SessionMeta(
            id=sid, agent=agent, command=[], cwd="/old", title=f"old {sid}", updated=updated
        )
    )
    writer.update(
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "long ago"}}
    )
    writer.turn_end("end_turn")
    writer.close()


@pytest.mark.e2e
def test_list_filters_and_json(home: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    turn(a, "first in a")
    turn(b, "first in b")
    turn(a, "--continue", "second in a")
    old_session(home, "ancient", "2020-01-01T00:00:00.000Z", agent="other")
    everything = listed()
    assert [s["title"] for s in everything][:2] == ["first in a", "first in b"]
    assert everything[-1]["id"] == "ancient"
    for record in everything:
        assert {"id", "agent", "title", "cwd", "created", "updated", "turns"} <= set(record)
    in_a = listed("--cwd", str(a))
    assert len(in_a) == 1 and in_a[0]["turns"] == 2
    assert [s["id"] for s in listed("--agent", "other")] == ["ancient"]
    assert "ancient" not in [s["id"] for s in listed("--since", "7d")]
    assert len(listed("--limit", "1")) == 1
    table = run_cli("sessions", "list").stdout
    assert "first in a" in table and "ago" in table
    # Issue 53, 5: the table fits the terminal's width (it was about 113 wide), a long
    # title cut with "…"; --json has it whole.
    turn(a, "a prompt much longer than any narrow terminal has room for, to be cut")
    for columns in (80, 100):
        narrow = run_cli("sessions", "list", env={**os.environ, "COLUMNS": str(columns)})
        rows = narrow.stdout.splitlines()
        assert rows and all(len(row) <= columns for row in rows), rows
        assert "…" in narrow.stdout
    assert str(listed()[0]["title"]).endswith("to be cut")


@pytest.mark.e2e
def test_corrupt_session_is_listed_with_a_warning(home: Path, tmp_path: Path) -> None:
    turn(tmp_path, "fine")
    broken = store(home).root / "broken-session"
    broken.mkdir()
    (broken / "session.json").write_text("{not json")
    result = run_cli("sessions", "list")
    assert result.returncode == 0 and "broken-session" in result.stdout
    assert "unreadable" in result.stdout and "warning" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.e2e
def test_show_and_prefixes(home: Path, tmp_path: Path) -> None:
    turn(tmp_path, "think, plan and edit this")
    sid = str(listed()[0]["id"])
    shown = run_cli("sessions", "show", sid[:10])
    assert shown.returncode == 0
    for needle in (
        "> think, plan and edit this",
        "Plan:",
        "+hello, world",
        "You said: think, plan and edit this",
        "[end_turn]",
    ):
        assert needle in shown.stdout, needle
    as_json = json.loads(run_cli("sessions", "show", sid, "--json").stdout)
    assert as_json["session"]["id"] == sid and len(as_json["events"]) > 5
    old_session(home, "dup-one", "2020-01-01T00:00:00.000Z")
    old_session(home, "dup-two", "2020-01-01T00:00:00.000Z")
    ambiguous = run_cli("sessions", "show", "dup")
    assert (
        ambiguous.returncode == 2
        and "dup-one" in ambiguous.stderr
        and "dup-two" in ambiguous.stderr
    )
    unknown = run_cli("sessions", "show", "nothing-like-it")
    assert unknown.returncode == 2 and "no stored session" in unknown.stderr


@pytest.mark.e2e
def test_export_import_round_trip_then_load(home: Path, tmp_path: Path) -> None:
    turn(tmp_path, "edit and plan this")
    sid = str(listed()[0]["id"])
    original = stored_updates(store(home), sid)
    markdown = run_cli("sessions", "export", sid).stdout
    assert markdown.startswith("# edit and plan this") and "```diff" in markdown
    for output_format in ("json", "jsonl"):
        exported = tmp_path / f"export.{output_format}"
        result = run_cli("sessions", "export", sid, "--format", output_format, "-o", str(exported))
        assert result.returncode == 0, result.stderr
        assert run_cli("sessions", "delete", sid).returncode == 0
        imported = run_cli("sessions", "import", str(exported))
        assert imported.returncode == 0 and sid in imported.stdout
        assert stored_updates(store(home), sid) == original
    again = run_cli("sessions", "import", str(tmp_path / "export.jsonl"))
    assert "new one" in again.stdout  # the id is taken now

    async def load() -> list[str]:
        async with connect() as (conn, _, client):
            await initialized(conn)
            as_recorded = {acp_names.REPLAY_META: acp_names.REPLAY_AS_RECORDED}  # one by one
            await conn.load_session(
                cwd=str(tmp_path), session_id=sid, mcp_servers=[], **as_recorded
            )
            return client.kinds(sid)

    kinds = asyncio.run(load())
    assert kinds == [u["sessionUpdate"] for u in original]
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    assert run_cli("sessions", "import", str(bad)).returncode == 2


@pytest.mark.e2e
def test_delete_refuses_sessions_open_in_a_live_run(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, _):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            refused = run_cli("sessions", "delete", sid)
            assert refused.returncode == 2 and "live acpctl run" in refused.stderr
            assert run_cli("sessions", "delete", "--force", sid).returncode == 0
            assert not (store(home).root / sid).exists()

    asyncio.run(scenario())


@pytest.mark.e2e
def test_prune_and_dry_run(home: Path, tmp_path: Path) -> None:
    turn(tmp_path, "recent")
    old_session(home, "old-a", "2020-01-01T00:00:00.000Z")
    old_session(home, "old-b", "2020-02-01T00:00:00.000Z", agent="other")
    dry = run_cli("sessions", "prune", "--older-than", "30d", "--dry-run")
    assert "would delete old-a" in dry.stdout and (store(home).root / "old-a").exists()
    agent_only = run_cli("sessions", "prune", "--older-than", "30d", "--agent", "other")
    assert "deleted old-b" in agent_only.stdout and (store(home).root / "old-a").exists()
    assert run_cli("sessions", "prune", "--older-than", "30d").returncode == 0
    assert [s["title"] for s in listed()] == ["recent"]
    assert run_cli("sessions", "prune", "--older-than", "soon").returncode == 2


@pytest.mark.e2e
def test_prune_while_a_run_appends(home: Path, tmp_path: Path) -> None:
    for index in range(20):
        old_session(home, f"old-{index}", "2020-01-01T00:00:00.000Z")

    async def scenario() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            streaming = asyncio.create_task(
                conn.prompt(session_id=sid, prompt=[text_block("slow")])
            )
            await client.streaming(sid)
            pruned = await asyncio.to_thread(run_cli, "sessions", "prune", "--older-than", "1d")
            assert pruned.returncode == 0 and "20 session(s) pruned" in pruned.stdout
            assert (await streaming).stop_reason == "end_turn"
            assert len(client.updates[sid]) == 20

    asyncio.run(scenario())
    remaining = listed()
    assert len(remaining) == 1 and remaining[0]["turns"] == 1
    assert len(stored_updates(store(home), str(remaining[0]["id"]))) == 21


@pytest.mark.e2e
def test_verify_reports_and_repairs(home: Path, tmp_path: Path) -> None:
    turn(tmp_path, "one")
    turn(tmp_path, "two")
    first, second = (str(s["id"]) for s in listed())
    root = store(home).root
    with (root / first / "events.jsonl").open("ab") as handle:
        handle.write(b'{"ts": 1, "type": "upd')  # torn
    lines = (root / second / "events.jsonl").read_bytes().splitlines(keepends=True)
    (root / second / "events.jsonl").write_bytes(lines[0] + b"garbage\n" + b"".join(lines[1:]))
    os.chmod(root / second, 0o755)
    lost = root / "lost-meta"
    lost.mkdir(mode=0o700)
    (lost / "events.jsonl").write_bytes(
        lines[0] + b'{"ts": 5, "type": "turn_end", "stopReason": "end_turn"}\n'
    )
    os.chmod(lost / "events.jsonl", 0o600)
    check = run_cli("sessions", "verify")
    assert check.returncode == 1
    for needle in (
        "torn last line",
        "1 corrupt line(s): 2",
        "mode is 755",
        "lost-meta",
        "session.json: missing",
    ):
        assert needle in check.stdout, needle
    repaired = run_cli("sessions", "verify", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert run_cli("sessions", "verify").returncode == 0
    assert (root / second / "events.corrupt.jsonl").read_bytes() == b"garbage\n"
    rebuilt = json.loads((lost / "session.json").read_text())
    assert rebuilt["turns"] == 1 and rebuilt["title"] == "one"  # from the log it was cut from


@pytest.mark.e2e
def test_index_rebuilds_when_stale_or_broken(home: Path, tmp_path: Path) -> None:
    turn(tmp_path, "keep")
    turn(tmp_path, "drop")
    assert len(listed()) == 2
    drop = next(s for s in listed() if s["title"] == "drop")
    import shutil

    shutil.rmtree(store(home).root / str(drop["id"]))  # behind the index's back
    assert [s["title"] for s in listed()] == ["keep"]
    drift_free = run_cli("sessions", "verify")
    assert drift_free.returncode == 0
    (store(home).root / ".index" / "sessions.sqlite3").write_bytes(b"this is not sqlite" * 100)
    assert [s["title"] for s in listed()] == ["keep"]
    meta_path = store(home).root / str(listed()[0]["id"]) / "session.json"
    meta = json.loads(meta_path.read_text())
    meta["title"] = "renamed by hand"
    time.sleep(0.01)
    meta_path.write_text(json.dumps(meta))  # acpctl's change mark does not move
    drift = run_cli("sessions", "verify")
    assert drift.returncode == 1 and "index" in drift.stdout
    assert run_cli("sessions", "verify", "--repair").returncode == 0
    assert [s["title"] for s in listed()] == ["renamed by hand"]


@pytest.mark.e2e
def test_unwritable_export_target_is_an_error_not_a_traceback(home: Path, tmp_path: Path) -> None:
    turn(tmp_path, "x")
    sid = str(listed()[0]["id"])
    result = run_cli("sessions", "export", sid, "-o", str(tmp_path / "missing" / "x.md"))
    assert result.returncode == 1 and "No such file or directory" in result.stderr
    assert "Traceback" not in result.stderr
    directory = run_cli("sessions", "import", str(tmp_path))
    assert directory.returncode == 2 and "not a file" in directory.stderr


def test_verify_and_install_list_speak_json(home: Path, tmp_path: Path) -> None:
    """Issue 17: the two reports scripts need, as JSON."""
    verified = cli("sessions", "verify", "--json")
    assert verified.returncode == 0
    assert json.loads(verified.stdout) == {"checked": 0, "findings": []}
    listed = cli("install", "--list", "--json")
    assert listed.returncode == 0 and isinstance(json.loads(listed.stdout), list)


def test_since_takes_a_date_or_a_duration_everywhere(home: Path, tmp_path: Path) -> None:
    """One --since parser: `sessions list` and `usage` take the same forms (sessions list
    refused a date)."""
    for command in (("sessions", "list"), ("usage",)):
        for since in ("2026-11-01", "7d"):
            assert cli(*command, "--since", since).returncode == 0, (command, since)
        refused = cli(*command, "--since", "soon")
        assert refused.returncode == 2 and "--since 'soon' is neither a date" in refused.stderr


def test_the_metadata_table_round_trips_every_field_through_json_and_the_index(
    tmp_path: Path,
) -> None:
    import dataclasses

    from acpctl.store.index import SessionIndex
    from acpctl.store.sessions import META_FIELDS, SessionMeta, SessionStore

    assert [f.name for f in dataclasses.fields(SessionMeta)] == [f.attr for f in META_FIELDS]
    store = SessionStore(tmp_path / "sessions")
    meta = SessionMeta(
        id="s1",
        agent="demo",
        command=["demo", "--x"],
        cwd="/p",
        additional_directories=["/q"],
        title="t",
        agent_session_id="a1",
        turns=3,
        last_stop_reason="end_turn",
        parent_id="s0",
        name="n",
        state={"mode": "shout", "config": {"tone": "dry"}},
    )
    store.create(meta).close()
    assert SessionMeta.from_json(meta.to_json()) == meta
    (indexed,) = SessionIndex(store).query()
    assert indexed.meta == meta  # the index dropped `state` before it had a column


def test_without_a_usable_index_the_same_queries_run_in_memory(tmp_path: Path) -> None:
    from acpctl.store.index import INDEX_DIR, SessionIndex
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore(tmp_path / "sessions")
    for sid, agent, updated in (("a", "demo", "2026-01-01"), ("b", "pi", "2026-06-01")):
        meta = SessionMeta(id=sid, agent=agent, command=[], cwd="/p", updated=updated)
        store.create(meta).close()
    (store.root / INDEX_DIR).write_text("not a directory")  # the index cannot live here
    index = SessionIndex(store)
    assert [s.meta.id for s in index.query()] == ["b", "a"]
    assert [s.meta.id for s in index.query(agent="demo")] == ["a"]
    assert [s.meta.id for s in index.query(since="2026-03-01")] == ["b"]
    assert set(index.rows(["a", "zz"])) == {"a"}
    assert index.resolve("b") == "b"


def test_verify_counts_failed_turns_as_the_recorder_does(home: Path) -> None:
    """Prompts refused by the crash-loop guard end in turn_error, and session.json counts
    them: verify must count them too (it reported 11 against 5)."""
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore()
    writer = store.create(SessionMeta(id="v1", agent="demo", command=[], cwd="/p", turns=5))
    for _ in range(2):
        writer.turn_end("end_turn")
    for _ in range(3):
        writer.turn_error("the agent crashed 5 times in the last minute")
    writer.close()
    result = cli("sessions", "verify")
    assert result.returncode == 0, result.stdout


def test_a_session_id_with_a_trailing_newline_is_not_valid() -> None:
    from acpctl.store.sessions import valid_session_id

    assert valid_session_id("abc") and not valid_session_id("abc\n")


def test_show_latest_and_exports_name_the_session(home: Path) -> None:
    """Issue 31, 13: `sessions show --latest` (watch had it), and an export's head carries
    the session's id as `sessionId`."""
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore()
    for sid, updated in (("older-one", "2026-01-01"), ("newer-one", "2026-06-01")):
        meta = SessionMeta(id=sid, agent="demo", command=[], cwd="/p", updated=updated)
        store.create(meta).close()
    shown = cli("sessions", "show", "--latest", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["sessionId"] == "newer-one"
    assert cli("sessions", "show").returncode == 2  # neither a session nor --latest
    exported = cli("sessions", "export", "older-one", "--format", "jsonl")
    assert json.loads(exported.stdout.splitlines()[0])["sessionId"] == "older-one"
