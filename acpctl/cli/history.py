"""`acpctl sessions search`, `acpctl sessions watch` and `acpctl usage`: the history as a
whole, and as it is being written."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import click
import typer

from acpctl.cli.completions import agent_option, session_argument
from acpctl.cli.moments import parse_since
from acpctl.errors import UsageError

USAGE_GROUPS = ("agent", "day", "session", "model")


def search(
    query: list[str] = typer.Argument(
        ..., help='Words that must all occur ("a phrase" in quotes; word* for a prefix).'
    ),
    agent: str = agent_option(None, "Only this agent's sessions.", short=False),
    since: str = typer.Option(None, "--since", help="Since a date (2026-11-01) or 7d, 12h."),
    cwd: Path = typer.Option(None, "--cwd", help="Only sessions in this directory."),
    limit: int = typer.Option(20, "--limit", help="At most N matches."),
    hosts: list[str] = typer.Option(
        [], "--host", help="A linked host's history instead (repeat; `all`: here and all)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
) -> None:
    """Search all history (prompts, answers, tool call titles), best matches first; a
    linked host's is searched there (--host).

    Exit status: 0 with matches, 1 without, 2 on usage errors.
    """
    import json

    from acpctl.store.history_index import fts_query
    from acpctl.store.search import search as searched
    from acpctl.store.sessions import SessionStore
    from acpctl.terminal.render import status

    words = " ".join(query)
    if not fts_query(words):
        raise UsageError("give some words to search for")
    if limit < 1:
        raise UsageError("--limit must be 1 or more")
    moment = parse_since(since) if since else None
    where = str(cwd.resolve()) if cwd else None
    found: list[dict[str, Any]] = []
    if not hosts or "all" in hosts:
        with status("indexing the history..."):
            found = searched(SessionStore(), words, agent, where, moment, limit)
    if hosts:
        found = [{"host": None, **hit} for hit in found]
        asked = {"words": words, "agent": agent, "cwd": where, "since": moment, "limit": limit}
        found += _searched_at(hosts, asked)
    if as_json:
        typer.echo(json.dumps(found, indent=2, ensure_ascii=False))
    else:
        _print_hits(found)
    raise typer.Exit(0 if found else 1)


def _searched_at(hosts: list[str], asked: dict[str, Any]) -> list[dict[str, Any]]:
    """The linked hosts' matches (`all`: every linked host's), each marked with its host;
    a host that does not answer is said on stderr."""
    import asyncio

    from acpctl import config
    from acpctl import protocol as acp
    from acpctl.cli.linked import unreachable
    from acpctl.host_links import links_of
    from acpctl.remote.fleet import ask_all

    links = links_of(config.load())
    unknown = [h for h in hosts if h != "all" and h not in links]
    if unknown:
        raise UsageError(f"no linked host {unknown[0]!r} (`acpctl host link list`)")
    chosen = [link for name, link in links.items() if "all" in hosts or name in hosts]
    found = []
    for answer in asyncio.run(ask_all(chosen, acp.HOST_SEARCH, asked)):
        if answer.result is None:
            typer.echo(f"acpctl: {unreachable(answer)}", err=True)
            continue
        hits = answer.result.get("matches") if isinstance(answer.result, dict) else None
        for hit in hits if isinstance(hits, list) else []:
            if isinstance(hit, dict) and isinstance(hit.get("session"), str):
                found.append({**hit, "host": answer.link.name})
    return found


def _print_hits(hits: list[dict[str, Any]]) -> None:
    from rich.markup import escape

    from acpctl.terminal.render import rich_console

    console = rich_console()
    if not hits:
        console.print("no matches", style="dim")
        return
    for hit in hits:
        label = str(hit.get("name") or hit.get("title") or "")
        at = f"{hit['host']}:" if hit.get("host") else ""
        said = [escape(str(hit.get(key))) for key in ("agent", "time", "kind")]
        console.print(
            f"[bold]{escape(at + str(hit['session'])[:14])}[/] {said[0]} · {said[1]} · "
            f"turn {hit.get('turn')} · {said[2]} [dim]{escape(label[:50])}[/]"
        )
        console.print("  " + _highlighted(str(hit.get("snippet") or ""), hit.get("matches") or []))


def _highlighted(snippet: str, marks: list[Any]) -> str:
    """The snippet on one line, its matches reversed: rich markup, the agent's text made
    printable and escaped."""
    from rich.markup import escape

    from acpctl.terminal.screen import one_line

    def text(part: str) -> str:
        return escape(one_line(part))

    shown, at = "", 0
    for mark in marks:
        if not isinstance(mark, list) or len(mark) != 2:
            continue
        if not all(isinstance(i, int) for i in mark):
            continue
        start, end = max(mark[0], at), mark[1]
        shown += text(snippet[at:start]) + "[reverse]" + text(snippet[start:end]) + "[/reverse]"
        at = max(at, end)
    return shown + text(snippet[at:])


def watch(
    session: str = session_argument(
        None, "Session id, name, or a unique prefix of either (default: --latest)."
    ),
    latest: bool = typer.Option(
        False, "--latest", help="The session updated last (of --agent's, with it)."
    ),
    agent: str = agent_option(None, "With --latest: this agent's newest session.", short=False),
) -> None:
    """Follow a session an editor or another shell is running: its last turn so far, then
    every update as it happens, until the run that has it open ends (or Ctrl-C). A linked
    host's (HOST:ID) is followed through the link, as `sessions attach --observe`.

    Exit status: 0 when it followed a live run (or the host's), 1 when none has it open (the
    last turn is shown), 2 on usage errors.
    """
    import sys

    from acpctl.remote.host_socket import held_sessions
    from acpctl.runner.runs import live_runs
    from acpctl.store.index import SessionIndex
    from acpctl.store.sessions import SessionStore
    from acpctl.terminal.watch import follow

    if session and latest:
        raise UsageError("name a session or give --latest, not both")
    if session and ":" in session:  # HOST:ID, a linked host's
        from acpctl.cli.linked import session_at

        linked = session_at(session)
        if linked is not None:
            from acpctl.terminal.attach import attach

            raise typer.Exit(attach(linked[0], True, "text", remote=linked[1]))
    store = SessionStore()
    index = SessionIndex(store)
    try:
        session_id = index.resolve(session) if session else index.newest(agent)
    except LookupError as exc:
        raise UsageError(str(exc)) from exc
    meta = store.read_meta(session_id)

    def is_live() -> bool:  # an acpctl run has it open, or the session host holds it
        held = any(session_id in run.get("sessions", []) for run in live_runs())
        return held or session_id in held_sessions()

    raise typer.Exit(0 if follow(store, meta, sys.stdout, is_live) else 1)


def usage(
    by: str = typer.Option(
        "agent", "--by", click_type=click.Choice(USAGE_GROUPS), help="Group by this."
    ),
    since: str = typer.Option(None, "--since", help="Since a date (2026-11-01) or 7d, 12h."),
    agent: str = agent_option(None, "Only this agent's sessions.", short=False),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
) -> None:
    """Tokens and cost across sessions and agents, from what the agents reported (prompt
    responses' usage, usage_update's cost)."""
    import json

    from acpctl.store.history_index import TOKEN_FIELDS, HistoryIndex
    from acpctl.store.index import SessionIndex
    from acpctl.store.sessions import SessionStore
    from acpctl.terminal.render import status

    since_day = time.strftime("%Y-%m-%d", time.localtime(parse_since(since))) if since else None
    store = SessionStore()
    listing = SessionIndex(store)
    history = HistoryIndex(store)
    with status("reading the history..."), history.connected(listing) as connection:
        rows = history.usage(connection, since_day)
        contexts = history.contexts(connection) if by == "session" else {}
    metas = {sid: s.meta for sid, s in listing.rows(row.session for row in rows).items()}
    groups: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"turns": 0, "sessions": set(), "tokens": {}, "cost": {}}
    )
    for row in rows:
        meta = metas.get(row.session)
        if meta is None or (agent and meta.agent != agent):
            continue
        key = {
            "agent": meta.agent,
            "day": row.day,
            "session": row.session,
            "model": row.model or "(not reported)",
        }[by]
        group = groups[key]
        group["turns"] += row.turns
        group["sessions"].add(row.session)
        for name, value in row.tokens.items():
            group["tokens"][name] = group["tokens"].get(name, 0) + value
        for currency, amount in row.cost.items():
            group["cost"][currency] = group["cost"].get(currency, 0.0) + amount
    ordered = sorted(groups.items(), reverse=by == "day")
    if by != "day":
        ordered.sort(key=lambda item: -item[1]["tokens"].get("totalTokens", 0))
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        by: key,
                        **({} if by == "session" else {"sessions": len(group["sessions"])}),
                        "turns": group["turns"],
                        "tokens": {
                            n: group["tokens"][n] for n in TOKEN_FIELDS if n in group["tokens"]
                        },
                        "cost": {c: round(a, 6) for c, a in sorted(group["cost"].items())},
                        **_session_fields(by, key, metas, contexts),
                    }
                    for key, group in ordered
                ],
                indent=2,
            )
        )
        return
    _print_usage(by, ordered, metas, contexts)


def _session_fields(
    by: str, key: str, metas: dict[str, Any], contexts: dict[str, tuple[int, int]]
) -> dict[str, Any]:
    if by != "session":
        return {}
    meta = metas[key]
    fields = {"agent": meta.agent, "name": meta.name, "title": meta.title}
    if key in contexts:  # the context window as the agent last reported it
        fields["context"] = dict(zip(("used", "size"), contexts[key], strict=True))
    return fields


def _print_usage(
    by: str,
    ordered: list[tuple[str, dict[str, Any]]],
    metas: dict[str, Any],
    contexts: dict[str, tuple[int, int]],
) -> None:
    from rich.markup import escape
    from rich.table import Table

    from acpctl.terminal.render import money, rich_console
    from acpctl.terminal.screen import printable
    from acpctl.terminal.status_line import context_fill

    console = rich_console()
    if not ordered:
        console.print("no usage recorded yet: agents report it with their answers", style="dim")
        return
    rows = []
    for key, group in ordered:
        tokens = group["tokens"]
        label, second = key, str(len(group["sessions"]))
        if by == "session":  # one session a row: its agent says more than a count of 1
            meta = metas[key]
            label, second = f"{key[:8]} {(meta.name or meta.title or '')[:22]}", meta.agent
        row = [
            escape(printable(label)),  # a title is the agent's text: no markup, no escapes
            escape(second),
            str(group["turns"]),
            f"{tokens.get('inputTokens', 0):,}",
            f"{tokens.get('outputTokens', 0):,}",
            f"{tokens.get('totalTokens', 0):,}",
            money(group["cost"]) or "-",
        ]
        if by == "session":
            used, size = contexts.get(key, (None, None))
            fill = context_fill({"used": used, "size": size})
            row.append(fill.removeprefix("context ") if fill else "-")
        rows.append(row)
    second = "AGENT" if by == "session" else "SESSIONS"
    headers = [by.upper(), second, "TURNS", "INPUT", "OUTPUT", "TOTAL", "COST"]
    if by == "session":
        headers.append("CONTEXT")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    bar = console.width - sum(widths) - 2 * len(widths) - 1  # what is left for the chart
    table = Table(box=None, pad_edge=False)
    for index, header in enumerate(headers):
        table.add_column(header, justify="left" if index == 0 else "right", no_wrap=True)
    if bar >= 8 and console.is_terminal:  # the chart is for a person at a terminal
        table.add_column("", no_wrap=True)
        most = max(group["tokens"].get("totalTokens", 0) for _, group in ordered) or 1
        for row, (_, group) in zip(rows, ordered, strict=True):
            total = group["tokens"].get("totalTokens", 0)
            row.append("[cyan]" + "█" * max(1 if total else 0, round(bar * total / most)) + "[/]")
    for row in rows:
        table.add_row(*row)
    console.print(table)
