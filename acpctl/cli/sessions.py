"""`acpctl sessions`: list, show, export, import, delete, prune and verify the history."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import click
import typer

from acpctl.cli import history
from acpctl.cli.completions import agent_option, session_argument
from acpctl.cli.moments import parse_since
from acpctl.errors import UsageError

if TYPE_CHECKING:
    from acpctl.remote.fleet import Answer
    from acpctl.store.sessions import SessionMeta, SessionStore

DEFAULT_LIMIT = 20
EXPORT_FORMATS = ("markdown", "html", "json", "jsonl")

app = typer.Typer(
    help="Browse and manage the session history.", no_args_is_help=True, rich_markup_mode=None
)


def _cutoff(text: str, option: str) -> str:
    from acpctl.store.sessions import utc_stamp

    return utc_stamp(parse_since(text, option))


def _relative(iso: str) -> str:
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    seconds = int((datetime.now(timezone.utc) - moment).total_seconds())
    for size, unit in ((86400 * 7, "w"), (86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now"


# The list's columns: ID, AGENT, TURNS and UPDATED are fixed; TITLE and CWD share what is
# left of the terminal's width (3 parts to 2), up to 40 and 28; --json has every value whole.
FIXED_COLUMNS = 14 + 1 + 10 + 1 + 1 + 1 + 5 + 2 + 10
MOST_TITLE, MOST_CWD = 40, 28


def _list_widths(host_width: int = 0) -> tuple[int, int]:
    """TITLE's and CWD's widths for the terminal the list goes to (120 off a terminal),
    after a HOST column of `host_width`."""
    import shutil

    room = max(shutil.get_terminal_size((120, 24)).columns - FIXED_COLUMNS - host_width, 16)
    title = min(max(room * 3 // 5, 8), MOST_TITLE)
    return title, min(max(room - title, 8), MOST_CWD)


def _cut(text: str, width: int, keep_end: bool = False) -> str:
    """`text` in `width` columns, padded; cut with "…" (at the start, for a path)."""
    if len(text) <= width:
        return text.ljust(width)
    return "…" + text[-(width - 1) :] if keep_end else text[: width - 1] + "…"


SESSION_HELP = "Session id, name, or a unique prefix of either."
NAME_LENGTH = 80


def check_name(name: str, session_id: str | None = None) -> str:
    """A session name as `run --name` and `sessions rename` take it: one line, and no
    other session's."""
    from acpctl.store.index import SessionIndex

    name = name.strip()
    if not name or len(name) > NAME_LENGTH or any(c in name for c in "\n\r\t"):
        raise UsageError(f"a session name is 1 to {NAME_LENGTH} characters on one line")
    for meta in SessionIndex(_store()).readable():
        if meta.name == name and meta.id != session_id:
            raise UsageError(f"session {meta.id} is already named {name!r}")
    return name


def _store() -> SessionStore:
    from acpctl.store.sessions import SessionStore

    return SessionStore()


def _resolve(store: SessionStore, text: str) -> str:
    from acpctl.store.index import SessionIndex

    try:
        return SessionIndex(store).resolve(text)
    except LookupError as exc:
        raise UsageError(str(exc)) from exc


def _live_sessions() -> set[str]:
    from acpctl.runner.runs import live_runs

    return {sid for run in live_runs() for sid in run.get("sessions", [])}


@app.command("list")
def list_sessions(
    agent: str = agent_option(None, "Only this agent's sessions.", short=False),
    cwd: Path = typer.Option(None, "--cwd", help="Only sessions in this directory."),
    since: str = typer.Option(
        None, "--since", help="Updated since a date (2026-11-01) or within 7d, 12h."
    ),
    limit: int = typer.Option(
        None,
        "--limit",
        help=f"At most N sessions (default: {DEFAULT_LIMIT} in the table, all with --json; "
        "0: all).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
) -> None:
    """Sessions, newest first; with linked hosts (`acpctl host link`), their live ones
    too."""
    from acpctl.cli import linked
    from acpctl.remote.host_socket import held_sessions
    from acpctl.store.index import SessionIndex

    if limit is None:
        limit = 0 if as_json else DEFAULT_LIMIT
    if limit < 0:
        raise UsageError("--limit must be 0 (all) or more")
    found, total = SessionIndex(_store()).page(
        agent=agent,
        cwd=str(cwd.resolve()) if cwd else None,
        since=_cutoff(since, "--since") if since else None,
        limit=limit or None,
    )
    held = held_sessions() if found else {}
    answers = linked.asked()
    if as_json:
        _list_json(found, held, answers)
    elif not found and not answers:
        typer.echo("no sessions yet: they appear here once an editor or `acpctl run` starts one")
    else:
        _list_table(found, total, held, answers)


def _list_json(found: list[Any], held: dict[str, Any], answers: list[Answer]) -> None:
    import json

    from acpctl.cli import linked

    here = [
        {
            **({"host": None} if answers else {}),
            "id": s.meta.id,
            "agent": s.meta.agent,
            "name": s.meta.name,
            "title": s.meta.title,
            "cwd": s.meta.cwd,
            "created": s.meta.created,
            "updated": s.meta.updated,
            "turns": s.meta.turns,
            "lastStopReason": s.meta.last_stop_reason,
            "parentId": s.meta.parent_id,
            "subagentOf": s.meta.subagent_of,
            "problem": s.problem,
            "live": _live(held.get(s.meta.id)),
        }
        for s in found
    ]
    there = [entry for answer in answers for entry in linked.as_json(answer)]
    typer.echo(json.dumps(here + there, indent=2))
    for answer in answers:
        if answer.result is None:
            typer.echo(f"acpctl: {linked.unreachable(answer)}", err=True)


def _list_table(found: list[Any], total: int, held: dict[str, Any], answers: list[Answer]) -> None:
    from acpctl.cli import linked
    from acpctl.terminal.screen import printable

    home = os.path.expanduser("~")
    here = linked.this_machine()
    names = [here, "HOST", *(a.link.name for a in answers)]
    host_width = max(map(len, names)) + 1 if answers else 0
    title_width, cwd_width = _list_widths(host_width)

    def cells(
        host: str, sid: str, agent: str, title: str, where: str, turns: str, updated: str, at: str
    ) -> str:
        column = f"{host[: host_width - 1]:<{host_width}}" if answers else ""
        return (
            f"{column}{sid[:14]:<14} {agent[:10]:<10} {_cut(title, title_width)} "
            f"{_cut(where, cwd_width, keep_end=True)} {turns:>5}  {updated}{at}"
        )

    lines = [cells("HOST", "ID", "AGENT", "TITLE", "CWD", "TURNS", "UPDATED", "")]
    for session in found:
        meta = session.meta
        if session.problem:
            lines.append(f"{meta.id[:14]:<14} ! unreadable: {session.problem}")
            continue
        where = "~" + meta.cwd[len(home) :] if meta.cwd.startswith(home + os.sep) else meta.cwd
        title = (f"[{meta.name}] " if meta.name else "") + (meta.title or "")
        if meta.parent_id:
            title = f"(fork of {meta.parent_id[:8]}) {title}"
        elif meta.subagent_of:
            title = f"(subagent of {meta.subagent_of[:8]}) {title}"
        live = _live(held.get(meta.id))
        at_host = ""
        if live is not None:
            state = "running" if live["running"] else "open"
            at_host = f"  {state} at the host" + (
                f": {', '.join(live['clients'])}" if live["clients"] else ""
            )
        title, where = (printable(text).replace("\n", " ") for text in (title, where))
        turns, updated = str(meta.turns), _relative(meta.updated)
        lines.append(cells(here, meta.id, meta.agent, title, where, turns, updated, at_host))
    lines += linked.rows(answers, cells, _relative)
    if total > len(found):
        lines.append(f"... and {total - len(found):,} more (--limit 0 lists them all)")
    typer.echo("\n".join(lines))
    problems = sum(1 for s in found if s.problem)
    if problems:
        typer.echo(
            f"warning: {problems} session(s) could not be read; run `acpctl sessions verify`",
            err=True,
        )


@app.command("rename")
def rename(
    session: str = session_argument(..., SESSION_HELP),
    name: str = typer.Argument(..., help="The new name (`-`: no name)."),
) -> None:
    """Name a session: `acpctl run --session NAME` and every sessions command take it."""

    store = _store()
    sid = _resolve(store, session)
    new = None if name == "-" else check_name(name, sid)
    store.rename(sid, new)
    typer.echo(f"{sid}: {'named ' + repr(new) if new else 'name removed'}")


@app.command("fork")
def fork(
    session: str = session_argument(..., SESSION_HELP),
    name: str = typer.Option(None, "--name", help="Name the fork."),
    as_json: bool = typer.Option(False, "--json", help="Print the fork as JSON."),
) -> None:
    """A new session that starts as a copy of this one (through its agent: the agent's
    own fork, else acpctl's, which starts the agent afresh with the history copied).
    `acpctl run --session ID --fork PROMPT` forks and prompts in one step."""
    import json

    from acpctl.jsonrpc import RpcError
    from acpctl.terminal import attach as attaching

    if name is not None:
        name = check_name(name)
    # Looked up once, now: once the fork has its name, a prefix may name both.
    parent = _resolve(_store(), session)
    try:
        forked = attaching.fork(parent, name)
    except RpcError as exc:
        typer.echo(f"acpctl: error: the fork failed: {exc.message}", err=True)
        raise typer.Exit(1) from exc
    if as_json:
        typer.echo(json.dumps({"id": forked, "parentId": parent}))
    else:
        typer.echo(forked)


@app.command("attach")
def attach(
    session: str = session_argument(None, SESSION_HELP + " (default with --latest)."),
    latest: bool = typer.Option(
        False, "--latest", help="The session updated last (of --agent's, with it)."
    ),
    agent: str = agent_option(None, "With --latest: this agent's newest session.", short=False),
    observe: bool = typer.Option(
        False, "--observe", help="Watch only: no prompts, no answers to the agent."
    ),
    output_format: str = typer.Option(
        "text", "--format", help="text (default) or json (one update a line)."
    ),
) -> None:
    """Join a session the session host (acpctl host start) holds, or a linked host's
    (HOST:ID): its history, then everything that happens in it; as a controller you prompt
    and answer the agent's permission requests beside the other clients."""
    from acpctl.terminal import attach as attaching

    if output_format not in ("text", "json"):
        raise typer.BadParameter("text or json", param_hint="--format")
    linked = None
    if session and ":" in session and not latest:  # HOST:ID, a linked host's
        from acpctl.cli.linked import session_at

        linked = session_at(session)
    if linked is not None:
        raise typer.Exit(attaching.attach(linked[0], observe, output_format, remote=linked[1]))
    meta = _named_or_latest(_store(), session, latest, agent)
    raise typer.Exit(attaching.attach(meta, observe, output_format))


@app.command("show")
def show(
    session: str = session_argument(None, SESSION_HELP + " (default with --latest)."),
    latest: bool = typer.Option(
        False, "--latest", help="The session updated last (of --agent's, with it)."
    ),
    agent: str = agent_option(None, "With --latest: this agent's newest session.", short=False),
    as_json: bool = typer.Option(False, "--json", help="Metadata and events as JSON."),
) -> None:
    """The transcript, paged when long and the output is a terminal."""
    from acpctl.store import archive
    from acpctl.terminal import transcript

    store = _store()
    meta = _named_or_latest(store, session, latest, agent)
    if as_json:
        for piece in archive.export_json(store, meta):
            sys.stdout.write(piece)
        return
    if not sys.stdout.isatty():
        transcript.write_terminal(store, meta, sys.stdout)
        return
    _page(lambda out: transcript.write_terminal(store, meta, out))


def _live(held: dict[str, Any] | None) -> dict[str, Any] | None:
    """A session the host holds as `sessions list` shows it: whether a turn runs, and its
    clients by name (None: the host does not hold it)."""
    if held is None:
        return None
    clients = [str(c.get("name")) for c in held.get("clients", []) if isinstance(c, dict)]
    return {"running": bool(held.get("running")), "clients": clients}


def _named_or_latest(
    store: SessionStore, session: str | None, latest: bool, agent: str | None
) -> SessionMeta:
    """The session named, or with --latest the one updated last (of `agent`'s)."""
    from acpctl.store.index import SessionIndex

    if bool(session) == latest:
        raise UsageError("name a session, or give --latest")
    if session:
        return store.read_meta(_resolve(store, session))
    try:
        return store.read_meta(SessionIndex(store).newest(agent))
    except LookupError as exc:
        raise UsageError(str(exc)) from exc


def _page(write: Callable[[TextIO], None]) -> None:
    """Stream into the pager as it renders, so the first screen shows at once."""
    import io
    import shlex
    import subprocess

    pager = shlex.split(os.environ.get("PAGER") or "less -R -F -X")
    try:
        process = subprocess.Popen(pager, stdin=subprocess.PIPE)
    except OSError:
        write(sys.stdout)
        return
    assert process.stdin is not None
    out = io.TextIOWrapper(process.stdin, encoding="utf-8", line_buffering=False)
    out.isatty = lambda: True  # type: ignore[method-assign]
    try:
        write(out)
        out.close()
    except BrokenPipeError:
        pass  # the reader quit the pager
    process.wait()


@app.command("export")
def export(
    session: str = session_argument(None, SESSION_HELP + " (default with --latest)."),
    latest: bool = typer.Option(
        False, "--latest", help="The session updated last (of --agent's, with it)."
    ),
    agent: str = agent_option(None, "With --latest: this agent's newest session.", short=False),
    output_format: str = typer.Option(
        "markdown",
        "--format",
        click_type=click.Choice(EXPORT_FORMATS),
        help="markdown, html (one self-contained page), json or jsonl.",
    ),
    output: Path = typer.Option(None, "-o", "--output", help="Write here, not to stdout."),
) -> None:
    """Export a session (json and jsonl can be imported again)."""
    from acpctl.store import archive
    from acpctl.terminal import html_export, transcript

    writers = {
        "markdown": transcript.markdown,
        "html": html_export.export_html,
        "json": archive.export_json,
        "jsonl": archive.export_jsonl,
    }
    store = _store()
    meta = _named_or_latest(store, session, latest, agent)
    pieces = writers[output_format](store, meta)
    if output is None:
        for piece in pieces:
            sys.stdout.write(piece)
        return
    from acpctl import paths

    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, paths.PRIVATE_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:  # a transcript: private
        handle.writelines(pieces)
    typer.echo(f"exported {meta.id} to {output}", err=True)


@app.command("import")
def import_(file: Path = typer.Argument(..., help="A json or jsonl export.")) -> None:
    """Import an exported session; editors can then load it through acpctl."""
    from acpctl.store import archive

    if not file.is_file():
        raise UsageError(f"{file}: {'not a file' if file.exists() else 'no such file'}")
    try:
        session_id, renamed = archive.import_session(_store(), file)
    except (archive.NotAnExport, OSError) as exc:
        raise UsageError(str(exc)) from exc
    note = f" ({renamed}, so it has a new one)" if renamed else ""
    typer.echo(f"imported session {session_id}{note}")


@app.command("delete")
def delete(
    sessions: list[str] = session_argument(..., "Session ids, names or unique prefixes."),
    force: bool = typer.Option(False, "--force", help="Even if a live run has it open."),
) -> None:
    """Delete sessions from the store."""
    store = _store()
    ids = [_resolve(store, s) for s in sessions]
    busy = _live_sessions() & set(ids)
    if busy and not force:
        raise UsageError(
            f"open in a live acpctl run: {', '.join(sorted(busy))}",
            hint="close it in the editor first, or pass --force",
        )
    for session_id in ids:
        store.delete(session_id)
        typer.echo(f"deleted {session_id}")


@app.command("prune")
def prune(
    older_than: str = typer.Option(
        ..., "--older-than", help="A date (2026-11-01) or an age, e.g. 30d."
    ),
    agent: str = agent_option(None, "Only this agent's sessions.", short=False),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only say what would go."),
    force: bool = typer.Option(False, "--force", help="Even sessions a live run has open."),
) -> None:
    """Delete sessions not updated for a while."""
    from acpctl.store.index import SessionIndex

    store = _store()
    cutoff = _cutoff(older_than, "--older-than")
    busy = set() if force else _live_sessions()
    old = [
        s.meta
        for s in SessionIndex(store).query(agent=agent)
        if s.problem is None and s.meta.updated < cutoff
    ]
    removed = 0
    for meta in old:
        if meta.id in busy:
            typer.echo(f"kept {meta.id}: open in a live acpctl run (--force to prune it)")
            continue
        if not dry_run:
            store.delete(meta.id)
        removed += 1
        typer.echo(
            f"{'would delete' if dry_run else 'deleted'} {meta.id} "
            f"({meta.title or 'untitled'}, {_relative(meta.updated)})"
        )
    typer.echo(f"{removed} session(s) {'would be ' if dry_run else ''}pruned")


@app.command("verify")
def verify(
    repair: bool = typer.Option(False, "--repair", help="Repair what can be."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON object."),
) -> None:
    """Check every session's files and the index; exit 1 when something is wrong."""
    from acpctl.store.verify import verify as run_verify

    report = run_verify(_store(), repair)
    unrepaired = [f for f in report.findings if not f.repaired]
    if as_json:
        import json

        findings = [
            {"session": f.session, "problem": f.problem, "repaired": f.repaired}
            for f in report.findings
        ]
        typer.echo(json.dumps({"checked": report.checked, "findings": findings}, indent=2))
        if unrepaired:
            raise typer.Exit(1)
        return
    for finding in report.findings:
        mark = "repaired" if finding.repaired else "problem"
        typer.echo(f"{mark}: {finding.session}: {finding.problem}")
    typer.echo(
        f"checked {report.checked} session(s): {len(report.findings)} finding(s)"
        f"{f', {len(unrepaired)} left' if repair else ''}"
    )
    if unrepaired:
        raise typer.Exit(1)


# `search` and `watch` read the history as `usage` does: history.py holds all three.
app.command("search")(history.search)
app.command("watch")(history.watch)
