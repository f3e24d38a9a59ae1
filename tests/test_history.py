"""Issue 5: the session store and session/list, load, resume, close and delete."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from acp import RequestError, text_block

from acpctl import protocol as acp_names
from acpctl.store.sessions import SessionMeta, SessionStore, valid_session_id
from tests.acp_peer import RecordingClient, connect, initialized
from tests.conftest import TEST_AGENTS, run, run_cli, stored_updates, write_executable

pytestmark = pytest.mark.e2e


def sessions_root(home: Path) -> Path:
    return home / "data" / "sessions"


def add_sdk_agent(tmp_path: Path, name: str = "sdk", **env: str) -> None:
    exports = "".join(f"export {k}={v}\n" for k, v in env.items())
    agent = write_executable(
        tmp_path / f"{name}-agent",
        (f"#!/bin/sh\n{exports}exec {sys.executable} {TEST_AGENTS / 'sdk_agent.py'}\n"),
    )
    assert run_cli("agents", "add", name, "--", str(agent)).returncode == 0


async def new_session_with_turn(conn: Any, cwd: Path, text: str) -> str:
    await initialized(conn)
    sid = (await conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id
    result = await conn.prompt(session_id=sid, prompt=[text_block(text)])
    assert result.stop_reason == "end_turn"
    return str(sid)


def transcript(client: RecordingClient, sid: str) -> list[tuple[str, str]]:
    return [
        (u.session_update, getattr(u.content, "text", ""))
        for u in client.updates[sid]
        if hasattr(u, "content") and not isinstance(u.content, list)
    ]


def test_store_layout_permissions_and_metadata(home: Path, tmp_path: Path) -> None:
    async def scenario() -> str:
        async with connect() as (conn, _, _):
            return await new_session_with_turn(conn, tmp_path, "first line\nsecond line")

    sid = run(scenario())
    directory = sessions_root(home) / sid
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(sessions_root(home).stat().st_mode) == 0o700
    for name in ("session.json", "events.jsonl"):
        assert stat.S_IMODE((directory / name).stat().st_mode) == 0o600
    meta = json.loads((directory / "session.json").read_text())
    assert meta["title"] == "first line" and meta["turns"] == 1
    assert meta["lastStopReason"] == "end_turn" and meta["cwd"] == str(tmp_path)
    assert meta["agent"] == "demo" and meta["agentSessionId"] == sid
    events = [json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines()]
    assert events[0]["update"]["sessionUpdate"] == "user_message_chunk"
    agent = [e for e in events if e["type"] == "agent"]
    assert agent and all(e["message"]["method"] == "session/update" for e in agent)
    assert events[-1] == {**events[-1], "type": "turn_end", "stopReason": "end_turn"}
    assert all("ts" in e for e in events)


# A load's replay update for update as recorded, not joined (acpctl's own extension).
AS_RECORDED = {acp_names.REPLAY_META: acp_names.REPLAY_AS_RECORDED}


def joined(transcript: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(kind, text) pairs with a stream's adjacent fragments of one kind joined."""
    out: list[tuple[str, str]] = []
    for kind, text in transcript:
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


def test_list_load_and_resume_in_a_new_process(home: Path, tmp_path: Path) -> None:
    async def first() -> tuple[str, list[tuple[str, str]]]:
        async with connect() as (conn, _, client):
            sid = await new_session_with_turn(conn, tmp_path, "think about title")
            return sid, transcript(client, sid)

    sid, live = run(first())

    async def second() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            listed = await conn.list_sessions(cwd=str(tmp_path))
            assert [s.session_id for s in listed.sessions] == [sid]
            assert listed.sessions[0].title.startswith("Demo: think about title")
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            replayed = transcript(client, sid)
            # One update a message, as the agent would replay it (issue 32, 9)
            assert replayed == joined([("user_message_chunk", "think about title"), *live])
            result = await conn.prompt(session_id=sid, prompt=[text_block("more")])
            assert result.stop_reason == "end_turn"

    run(second())

    async def third() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            await conn.resume_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert client.updates[sid] == []  # resume does not replay
            await conn.prompt(session_id=sid, prompt=[text_block("again")])
            assert client.text(sid) == "You said: again"

    run(third())
    meta = SessionStore(sessions_root(home)).read_meta(sid)
    assert meta.turns == 3


def test_agent_without_load_gets_fresh_context_and_a_note(home: Path, tmp_path: Path) -> None:
    add_sdk_agent(tmp_path)

    async def first() -> str:
        async with connect("--agent", "sdk") as (conn, _, _):
            return await new_session_with_turn(conn, tmp_path, "remember me")

    sid = run(first())

    async def second() -> None:
        async with connect("--agent", "sdk") as (conn, _, client):
            await initialized(conn)
            response = await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert response.field_meta["acpctl"]["contextRestored"] is False
            assert transcript(client, sid) == [
                ("user_message_chunk", "remember me"),
                ("agent_message_chunk", "sdk: remember me"),
            ]
            await conn.prompt(session_id=sid, prompt=[text_block("next")])
            assert client.text(sid).endswith("sdk: next")  # under the stable id

    run(second())
    meta = SessionStore(sessions_root(home)).read_meta(sid)
    assert meta.agent_session_id != sid  # the agent handed out a new id; ours is stable


def test_agent_replay_on_load_is_suppressed(home: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    add_sdk_agent(tmp_path, SDK_AGENT_LOAD="1", SDK_AGENT_STATE=str(state))

    async def first() -> str:
        async with connect("--agent", "sdk") as (conn, _, _):
            return await new_session_with_turn(conn, tmp_path, "only once")

    sid = run(first())

    async def second() -> None:
        async with connect("--agent", "sdk") as (conn, _, client):
            await initialized(conn)
            response = await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert not (response and response.field_meta)  # context restored: no note
            assert transcript(client, sid) == [
                ("user_message_chunk", "only once"),
                ("agent_message_chunk", "sdk: only once"),
            ]
            await conn.prompt(session_id=sid, prompt=[text_block("twice")])
            assert client.text(sid) == "sdk: only oncesdk: twice"

    run(second())
    # The agent kept its own session (loaded, not recreated).
    assert (state / f"{sid}.json").exists()
    assert json.loads((state / f"{sid}.json").read_text()) == ["only once", "twice"]


async def agent_death_noticed(home: Path, run_pid: int) -> None:
    """Until the run at `run_pid` has seen its agent die: its run record then shows no
    agent pid (the next request restarts the agent)."""
    record = home / "state" / "runs" / f"{run_pid}.json"
    for _ in range(1500):
        with contextlib.suppress(OSError, ValueError):
            if json.loads(record.read_text()).get("agentPid") is None:
                return
        await asyncio.sleep(0.02)
    raise AssertionError("acpctl did not notice that its agent died")


def test_load_after_the_agent_was_killed(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, process, client):
            sid = await new_session_with_turn(conn, tmp_path, "before")
            for child in psutil.Process(process.pid).children():
                child.send_signal(signal.SIGKILL)
            await agent_death_noticed(home, process.pid)
            client.updates.clear()
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert transcript(client, sid)[0] == ("user_message_chunk", "before")
            result = await conn.prompt(session_id=sid, prompt=[text_block("after")])
            assert result.stop_reason == "end_turn"

    run(scenario())


def test_ids_stay_stable_when_a_restarted_agent_hands_out_new_ones(
    home: Path, tmp_path: Path
) -> None:
    add_sdk_agent(tmp_path)

    async def scenario() -> None:
        async with connect("--agent", "sdk") as (conn, process, client):
            sid = await new_session_with_turn(conn, tmp_path, "one")
            for child in psutil.Process(process.pid).children(recursive=True):
                child.send_signal(signal.SIGKILL)
            await agent_death_noticed(home, process.pid)
            await conn.prompt(session_id=sid, prompt=[text_block("two")])
            assert client.text(sid) == "sdk: onesdk: two"

    run(scenario())


def test_concurrent_loads_from_two_clients(home: Path, tmp_path: Path) -> None:
    async def make() -> list[str]:
        async with connect() as (conn, _, _):
            return [await new_session_with_turn(conn, tmp_path, f"s{i}") for i in range(2)]

    a, b = run(make())

    async def load(sid: str) -> list[tuple[str, str]]:
        async with connect() as (conn, _, client):
            await initialized(conn)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            return transcript(client, sid)

    async def together() -> None:
        same = await asyncio.gather(load(a), load(a))
        assert same[0] == same[1] and same[0][0] == ("user_message_chunk", "s0")
        different = await asyncio.gather(load(a), load(b))
        assert different[0][0][1] == "s0" and different[1][0][1] == "s1"

    run(together())


def test_kill_9_mid_stream_leaves_a_loadable_history(home: Path, tmp_path: Path) -> None:
    async def doomed() -> str:
        async with connect() as (conn, process, client):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slow one")]))
            await client.streaming(sid, 5)
            agents = psutil.Process(process.pid).children(recursive=True)
            os.kill(process.pid, signal.SIGKILL)
            for agent in agents:
                agent.kill()
            turn.cancel()
            return str(sid)

    sid = asyncio.run(doomed())
    events = sessions_root(home) / sid / "events.jsonl"
    with events.open("ab") as handle:
        handle.write(b'{"ts": 1, "type": "update", "update": {"sessionUpd')  # a torn line

    async def reload() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            await conn.load_session(
                cwd=str(tmp_path), session_id=sid, mcp_servers=[], **AS_RECORDED
            )
            replayed = transcript(client, sid)
            assert replayed[0] == ("user_message_chunk", "slow one")
            assert len(replayed) >= 5  # chunks flushed before the kill
            await conn.prompt(session_id=sid, prompt=[text_block("next")])

    run(reload())


def test_corrupt_line_is_skipped(home: Path, tmp_path: Path) -> None:
    async def make() -> str:
        async with connect() as (conn, _, _):
            return await new_session_with_turn(conn, tmp_path, "hello")

    sid = run(make())
    events = sessions_root(home) / sid / "events.jsonl"
    lines = events.read_bytes().splitlines(keepends=True)
    events.write_bytes(lines[0] + b"{corrupt\n" + b"".join(lines[1:]))

    async def load() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert client.text(sid) == "You said: hello"

    run(load())


def test_unknown_and_malicious_ids(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, _):
            await initialized(conn)
            with pytest.raises(RequestError) as unknown:
                await conn.load_session(cwd=str(tmp_path), session_id="nope", mcp_servers=[])
            assert unknown.value.code == -32002 and "nope" in str(unknown.value)
            for bad in ("../../etc/passwd", "a/b", "..", ".hidden", "x" * 200):
                with pytest.raises(RequestError) as invalid:
                    await conn.resume_session(cwd=str(tmp_path), session_id=bad, mcp_servers=[])
                assert invalid.value.code == -32602

    run(scenario())
    assert not (home / "etc").exists()


def test_close_keeps_history_and_delete_removes_it(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, _):
            sid = await new_session_with_turn(conn, tmp_path, "x")
            await conn.close_session(session_id=sid)
            assert (sessions_root(home) / sid / "events.jsonl").exists()
            with pytest.raises(RequestError):
                await conn.prompt(session_id=sid, prompt=[text_block("closed")])
            await conn.resume_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            await conn._conn.send_request("session/delete", {"sessionId": sid})
            assert not (sessions_root(home) / sid).exists()
            listed = await conn.list_sessions()
            assert listed.sessions == []

    run(scenario())


def test_list_filters_by_cwd_and_pages(home: Path, tmp_path: Path) -> None:
    store = SessionStore(sessions_root(home))
    for i in range(130):
        meta = SessionMeta(
            id=f"s{i:03d}",
            agent="demo",
            command=[],
            cwd="/a" if i % 2 else "/b",
            updated=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}.000Z",
        )
        store.create(meta).close()

    async def scenario() -> None:
        async with connect() as (conn, _, _):
            await initialized(conn)
            first = await conn.list_sessions()
            assert len(first.sessions) == 100 and first.next_cursor
            assert first.sessions[0].session_id == "s129"  # newest first
            rest = await conn.list_sessions(cursor=first.next_cursor)
            assert len(rest.sessions) == 30 and rest.next_cursor is None
            only_a = await conn.list_sessions(cwd="/a")
            assert len(only_a.sessions) == 65 and {s.cwd for s in only_a.sessions} == {"/a"}
            with pytest.raises(RequestError):
                await conn.list_sessions(cursor="garbage!")

    run(scenario())


@pytest.mark.parametrize(
    "candidate,ok",
    [
        ("abc", True),
        ("0f3e-4a.b_c", True),
        ("", False),
        ("..", False),
        ("a/b", False),
        ("a\\b", False),
        (".x", False),
        ("a..b", False),
        ("x" * 128, True),
        ("x" * 129, False),
        (None, False),
        (5, False),
    ],
)
def test_session_id_validation(candidate: object, ok: bool) -> None:
    assert valid_session_id(candidate) is ok


def test_reader_tolerates_torn_last_line(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    writer = store.create(SessionMeta(id="s", agent="a", command=[], cwd="/"))
    writer.update(
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "a"}}
    )
    writer.close()
    with (tmp_path / "s" / "events.jsonl").open("ab") as handle:
        handle.write(b'{"ts":1,"type":"upd')
    writer = store.open_writer("s")
    writer.agent_message(
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
        b'"x","update":{"sessionUpdate":"plan","entries":[]}}}\n'
    )
    writer.close()
    # The fragment is skipped; the event appended after it survives.
    assert [u["sessionUpdate"] for u in stored_updates(store, "s")] == [
        "agent_message_chunk",
        "plan",
    ]


def test_reader_skips_a_corrupt_line_in_a_chunk_and_keeps_the_rest(tmp_path: Path) -> None:
    """The store parses a chunk of lines at once; one bad line (or a blank one, or one
    that is two values) sends that chunk through line by line, losing only the bad ones."""
    store = SessionStore(tmp_path)
    writer = store.create(SessionMeta(id="s", agent="a", command=[], cwd="/"))
    for text in ("one", "two"):
        writer.update({"sessionUpdate": "agent_message_chunk", "content": {"text": text}})
    writer.flush()
    writer.write_through(b'{"ts":1,"type":"update","update":{"session\n\n1, 2\n')
    # Two broken halves that would make one value together: neither is read.
    writer.write_through(b'{"ts":1,"type":"update","update":{"sessionUpdate":"x","a":[1\n')
    writer.write_through(b'2]}}\n  {"ts":1,"type":"update","update":{"content":{"text":"sp"}}}\n')
    writer.update({"sessionUpdate": "agent_message_chunk", "content": {"text": "three"}})
    writer.close()
    texts = [u["content"]["text"] for u in stored_updates(store, "s")]
    assert texts == ["one", "two", "sp", "three"]


def test_an_event_after_another_writers_torn_line_starts_a_line_of_its_own(
    tmp_path: Path,
) -> None:
    from acpctl.store.sessions import SessionMeta, SessionStore

    store = SessionStore(tmp_path / "sessions")
    writer = store.create(SessionMeta(id="s1", agent="demo", command=[], cwd="/p"))
    writer.event("turn_end", stopReason="end_turn")
    writer.flush()
    with open(writer.path, "ab") as other:  # another writer, killed half-way through a line
        other.write(b'{"ts":1.0,"type":"upd')
    writer.event("turn_error", message="after the torn line")
    writer.flush()
    writer.close()
    kinds = [event["type"] for event in store.iter_events("s1")]
    assert kinds == ["turn_end", "turn_error"]
    assert writer.path.read_bytes().count(b"\n") == 3  # the fragment ended by acpctl


@pytest.mark.parametrize("seed", range(40))
def test_generated_torn_lines_from_other_writers_never_swallow_an_event(
    tmp_path: Path, seed: int
) -> None:
    """Another writer leaves a fragment of a line, cut anywhere, between our flushes:
    every event of ours is read back, in order."""
    import random

    from acpctl.store.sessions import SessionMeta, SessionStore

    generator = random.Random(seed)
    store = SessionStore(tmp_path / "sessions")
    writer = store.create(SessionMeta(id="g1", agent="demo", command=[], cwd="/p"))
    ours: list[str] = []
    for n in range(generator.randint(1, 6)):
        for _ in range(generator.randint(1, 3)):
            writer.turn_error(f"ours {n}-{len(ours)}")
            ours.append(f"ours {n}-{len(ours)}")
        writer.flush()
        if generator.random() < 0.7:
            foreign = json.dumps({"ts": 1.0, "type": "turn_error", "message": "theirs"})
            with open(writer.path, "ab") as other:
                other.write(foreign.encode()[: generator.randint(1, len(foreign) - 1)])
    writer.close()
    read = [e["message"] for e in store.iter_events("g1") if e.get("type") == "turn_error"]
    assert read == ours


def test_small_costs_keep_their_digits_and_the_chart_is_for_terminals(home: Path) -> None:
    """Issue 31, 11: $0.00098 was shown as $0.00; bars were printed into a pipe."""
    from acpctl.terminal.render import money

    assert money({"USD": 0.00098}) == "$0.00098"
    assert money({"USD": 1.256}) == "$1.26" and money({"USD": 0}) == "$0.00"
    assert money({"EUR": 0.0000123}) == "0.000012 EUR"


def test_two_messages_of_the_agent_do_not_run_together(home: Path) -> None:
    """Issue 31, 10: chunks of messages with different messageIds were printed as one
    line, in the chat and in `sessions show` and the Markdown export."""
    import io

    from acpctl.store.sessions import SessionMeta, SessionStore
    from acpctl.terminal.render import Renderer
    from acpctl.terminal.transcript import markdown

    def chunk(text: str, message: str | None) -> dict[str, Any]:
        update: dict[str, Any] = {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
        }
        if message is not None:
            update["messageId"] = message
        return update

    chunks = [chunk("Hello ", "m1"), chunk("there.", "m1"), chunk("**Warning:** x", "m2")]
    out = io.StringIO()
    renderer = Renderer(out)
    for update in [*chunks, chunk(" and more", None)]:
        renderer.update(update)
    assert out.getvalue() == "Hello there.\n**Warning:** x and more"

    store = SessionStore()
    writer = store.create(SessionMeta(id="two", agent="demo", command=[], cwd="/p"))
    for update in chunks:
        writer.update(update)
    writer.close()
    text = "".join(markdown(store, store.read_meta("two")))
    assert "Hello there.\n\n**Warning:** x" in text


def test_without_colour_a_thought_is_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31, 16: without colour a thought looked the same as the answer."""
    import io

    from acpctl.terminal.render import Renderer

    monkeypatch.setenv("NO_COLOR", "1")
    out = io.StringIO()
    renderer = Renderer(out)
    for kind, text in (
        ("agent_thought_chunk", "Let me "),
        ("agent_thought_chunk", "see."),
        ("agent_message_chunk", "Done."),
    ):
        renderer.update({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
    assert out.getvalue() == "(thinking) Let me see.\nDone."
