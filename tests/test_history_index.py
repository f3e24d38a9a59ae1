"""Issue 19 (items 2 and 3): the history index behind `sessions search` and `acpctl usage`,
on real store files: incremental, tolerant of torn and rewritten files, forks not counted
twice, and FTS5's syntax never reaching the query."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from acpctl.store.history_index import HistoryIndex, fts_query
from acpctl.store.index import SessionIndex
from acpctl.store.sessions import EVENTS_FILE, SessionMeta, SessionStore


def agent_line(session: str, update: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session}}
    message["params"]["update"] = update  # type: ignore[index]
    return json.dumps(message).encode()


def turn(
    store: SessionStore, writer: Any, session: str, prompt: str, answer: str, **usage: Any
) -> None:
    """A turn as the relay records it: events, then the session's metadata rewritten."""
    writer.update(
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": prompt}}
    )
    for word in answer.split(" "):
        writer.agent_message(
            agent_line(
                session,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": word + " "},
                },
            )
        )
    writer.agent_message(
        agent_line(
            session, {"sessionUpdate": "tool_call", "toolCallId": "t", "title": "Read parser.py"}
        )
    )
    cost = usage.pop("cost", None)
    ran = usage.pop("ran", None)
    if cost is not None:
        update: dict[str, Any] = {
            "sessionUpdate": "usage_update",
            "used": 1,
            "size": 2,
            "cost": {"amount": cost, "currency": "USD"},
        }
        if ran is not None:
            update["_meta"] = {"_claude/model": ran}
        writer.agent_message(agent_line(session, update))
    writer.turn_end("end_turn", usage or None)
    writer.flush()
    store.write_meta(store.read_meta(session))


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def new(store: SessionStore, sid: str, agent: str = "claude", model: str | None = None) -> Any:
    meta = SessionMeta(id=sid, agent=agent, command=[], cwd="/w")
    if model:
        meta.state = {"model": model}
    return store.create(meta)


def search(store: SessionStore, words: str, **kwargs: Any) -> list[Any]:
    history = HistoryIndex(store)
    with history.connected(SessionIndex(store)) as connection:
        return history.search(
            connection, fts_query(words), kwargs.get("sessions"), kwargs.get("since"), 20
        )


def usage(store: SessionStore) -> list[Any]:
    history = HistoryIndex(store)
    with history.connected(SessionIndex(store)) as connection:
        return history.usage(connection, None)


def test_prompts_answers_and_tool_titles_are_found_best_first(store: SessionStore) -> None:
    a = new(store, "a")
    turn(store, a, "a", "fix the tokenizer", "the tokenizer now handles tokenizer edge cases")
    b = new(store, "b")
    turn(store, b, "b", "write docs", "mentions the tokenizer once")
    hits = search(store, "tokenizer")
    assert [(h.session, h.kind) for h in hits][:2] == [("a", "answer"), ("a", "prompt")]
    assert {h.session for h in hits} == {"a", "b"}
    assert "\x02tokenizer\x03" in hits[0].snippet
    assert [h.kind for h in search(store, "parser.py")] == ["tool", "tool"]
    assert [h.session for h in search(store, "tokenizer", sessions={"b"})] == ["b"]
    assert search(store, '"handles tokenizer"')[0].session == "a"
    assert search(store, "tokeni*") and not search(store, "tokeni")


def test_appended_turns_torn_lines_and_rewritten_files(store: SessionStore) -> None:
    a = new(store, "a")
    turn(store, a, "a", "first question", "first answer")
    assert len(search(store, "first")) == 2
    events = store.session_dir("a") / EVENTS_FILE
    with events.open("ab") as handle:  # a line still being written is read next time
        handle.write(b'{"ts":1,"type":"update","update":{"sessionUpdate":"user_message_chu')
    assert not search(store, "second")
    a2 = store.open_writer("a")  # ends the torn line, as a writer after a crash does
    turn(store, a2, "a", "second question", "second answer")
    assert {h.turn for h in search(store, "second")} == {1}
    assert len(search(store, "first")) == 2  # nothing read twice
    events.write_bytes(b"")  # rewritten shorter: the session starts over
    turn(store, store.open_writer("a"), "a", "third", "answer")
    assert not search(store, "first") and search(store, "third")
    store.delete("a")
    assert not search(store, "third")


def test_usage_per_day_cost_deltas_and_forks_counted_once(store: SessionStore) -> None:
    a = new(store, "a", model="opus")
    turn(store, a, "a", "q", "a", inputTokens=10, outputTokens=5, totalTokens=15, cost=0.25)
    turn(store, a, "a", "q", "a", inputTokens=1, outputTokens=1, totalTokens=2, cost=0.75)
    parent = SessionMeta(id="a", agent="claude", command=[], cwd="/w")
    fork = store.fork(parent.id, SessionMeta(id="f", agent="claude", command=[], cwd="/w"))
    turn(store, fork, "f", "q", "a", inputTokens=3, outputTokens=3, totalTokens=6, cost=1.0)
    rows = {row.session: row for row in usage(store)}
    assert rows["a"].turns == 2 and rows["a"].tokens["totalTokens"] == 17
    assert rows["a"].cost == {"USD": pytest.approx(0.75)} and rows["a"].model == "opus"
    # the fork: its own turn only; its cost grows from the parent's 0.75 it inherited
    assert rows["f"].turns == 1 and rows["f"].tokens["totalTokens"] == 6
    assert rows["f"].cost == {"USD": pytest.approx(0.25)}
    assert [h.session for h in search(store, "q")].count("f") == 1


@pytest.mark.parametrize(
    ("words", "query"),
    [
        ("foo bar", '"foo" "bar"'),
        ('say "hello world" now', '"say" "hello world" "now"'),
        ("NEAR(a b) OR c", '"NEAR(a" "b)" "OR" "c"'),
        ("col:value -x", '"col:value" "-x"'),
        ("pre* *", '"pre"*'),
        ('a"b', '"a" "b"'),
        ("", ""),
    ],
)
def test_search_words_never_reach_fts5_as_syntax(words: str, query: str) -> None:
    assert fts_query(words) == query


def test_a_corrupt_index_is_rebuilt_from_the_files(store: SessionStore) -> None:
    turn(store, new(store, "a"), "a", "kept in files", "yes")
    assert search(store, "kept")
    HistoryIndex(store).path.write_bytes(b"not a database" * 100)
    assert search(store, "kept")


def test_since_keeps_only_what_was_said_after(store: SessionStore) -> None:
    turn(store, new(store, "a"), "a", "tokenizer", "done")
    assert search(store, "tokenizer", since=0.0)
    assert not search(store, "tokenizer", since=time.time() + 60)


def test_usage_in_a_pipe_has_no_chart_and_keeps_small_costs(home: Path) -> None:
    """Issue 31, 11: the bars are for a terminal; $0.00098 is not $0.00."""
    from tests.conftest import cli

    store = SessionStore()
    writer = new(store, "tiny")
    turn(
        store, writer, "tiny", "q", "a", inputTokens=3, outputTokens=2, totalTokens=5, cost=0.00098
    )
    shown = cli("usage")
    assert shown.returncode == 0, shown.stderr
    assert "$0.00098" in shown.stdout and "█" not in shown.stdout


def test_usage_by_model_counts_the_model_the_agent_reported(store: SessionStore) -> None:
    """Issue 31, 11: claude-agent-acp's model option says "default"; its usage_update says
    which model ran (`_meta["_claude/model"]`): that is the model usage is counted under,
    also after a later reading that brings no report of its own."""
    writer = new(store, "c", model="default")
    turn(store, writer, "c", "q", "a", totalTokens=5, cost=0.5, ran="claude-opus-4-5")
    assert {row.model for row in usage(store)} == {"claude-opus-4-5"}
    turn(store, writer, "c", "q", "a", totalTokens=5)  # no usage_update this time
    rows = usage(store)
    assert {row.model for row in rows} == {"claude-opus-4-5"} and rows[0].turns == 2


def usage_update(store: SessionStore, writer: Any, session: str, **fields: Any) -> None:
    """A turn whose only report is a usage_update with `fields` (no prompt usage)."""
    writer.agent_message(agent_line(session, {"sessionUpdate": "usage_update", **fields}))
    writer.turn_end("end_turn", None)
    writer.flush()
    store.write_meta(store.read_meta(session))


def test_usage_by_session_says_the_context_fill_and_follows_the_cumulative_rules(
    home: Path,
) -> None:
    """Issue 43, 4: the context window's fill (the last used of size, not a sum) in
    `usage --by session`, for an agent that reports only used/size; one that reports only
    cost has its cost and no fill; a cost that falls (a fresh agent session) is a new
    running total, its fall never subtracted."""
    from tests.conftest import cli

    store = SessionStore()
    fill = new(store, "fill-only")
    usage_update(store, fill, "fill-only", used=20_000, size=200_000)
    usage_update(store, fill, "fill-only", used=82_000, size=200_000)
    paid = new(store, "cost-only")
    for amount in (0.5, 1.25, 0.25, 0.75):  # the agent's session began again after 1.25
        usage_update(store, paid, "cost-only", cost={"amount": amount, "currency": "USD"})
    rows = {
        row["session"]: row for row in json.loads(cli("usage", "--by", "session", "--json").stdout)
    }
    assert rows["fill-only"]["context"] == {"used": 82_000, "size": 200_000}
    assert rows["fill-only"]["cost"] == {}
    assert "context" not in rows["cost-only"]
    assert rows["cost-only"]["cost"] == {"USD": pytest.approx(1.25 + 0.5)}
    table = cli("usage", "--by", "session").stdout
    header, *lines = table.splitlines()
    assert header.split()[-1] == "CONTEXT"
    (filled,) = [line for line in lines if line.startswith("fill-onl")]
    assert filled.split()[-1] == "200k" and "41% of 200k" in filled
    (costed,) = [line for line in lines if line.startswith("cost-onl")]
    assert costed.split()[-1] == "-" and "$1.75" in costed
    shown = cli("sessions", "show", "fill-only").stdout
    assert "[end_turn] · context 41% of 200k" in shown  # the fill as it was at each end
    assert "[end_turn] · context 10% of 200k" in shown
