"""`acpctl host link add | list | remove | show`: the other machines' session hosts this
one lists the sessions of (host_links.py, remote/fleet.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from acpctl.cli.host import options
from acpctl.cli.host.app import app
from acpctl.errors import UsageError

link_app = typer.Typer(
    help="Link this machine to your other machines' session hosts (ssh, or wss with a token).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(link_app, name="link")


@link_app.command("add")
def add(
    name: str = typer.Argument(..., help="A short name for the host: desk, build, gpu."),
    ssh: str = typer.Option(
        None, "--ssh", metavar="[USER@]HOST", help="Reach it over ssh (acpctl there)."
    ),
    remote_state: str = typer.Option(
        None, "--remote-state", metavar="DIR", help="With --ssh: its state directory there."
    ),
    remote_acpctl: str = typer.Option(
        None, "--remote-acpctl", help="With --ssh: how to run acpctl there (default: acpctl)."
    ),
    ssh_arg: list[str] = typer.Option(
        [], "--ssh-arg", help="With --ssh: an argument for ssh (repeat: --ssh-arg=-F --ssh-arg=F)."
    ),
    url: str = typer.Option(
        None, "--url", metavar="wss://HOST:PORT", help="Reach it over ACP's remote transport."
    ),
    token_file: Path = typer.Option(
        None, "--token-file", help="With --url: a file holding its token (`host show-token` there)."
    ),
    ca_file: Path = typer.Option(
        None, "--ca-file", help="With --url: the CA its certificate is checked against."
    ),
    deadline: float = typer.Option(
        None, "--deadline", metavar="S", help="Its answer to a list within S seconds (5)."
    ),
) -> None:
    """Link a host: its live sessions join `sessions list`. Kept in config.toml."""
    from acpctl import config
    from acpctl.host_links import link_from_table, links_of, set_link
    from acpctl.paths import PRIVATE_FILE_MODE

    files = {}
    for key, path in (("token_file", token_file), ("ca_file", ca_file)):
        if path is None:
            continue
        if not path.expanduser().is_file():
            raise UsageError(f"--{key.replace('_', '-')} {path} is not a file")
        files[key] = str(path.expanduser().resolve())
    if token_file is not None and Path(files["token_file"]).stat().st_mode & 0o077:
        raise UsageError(
            f"--token-file {token_file} can be read by others: chmod 600 it "
            f"(a token is a key to that host; acpctl keeps its own {PRIVATE_FILE_MODE:o})"
        )
    table = {
        "ssh": ssh,
        "remote_state": remote_state,
        "remote_acpctl": remote_acpctl,
        "ssh_args": list(ssh_arg) or None,
        "url": url,
        "deadline_s": deadline,
        **files,
    }
    link = link_from_table(None, name, {k: v for k, v in table.items() if v not in (None, [])})
    cfg = config.load()
    replaced = name in links_of(cfg)
    set_link(cfg, link)
    config.save(cfg)
    typer.echo(f"{'updated' if replaced else 'linked'} host {name} ({link.address}) in {cfg.path}")
    _told_the_host(name, watched=True)


@link_app.command("list")
def list_links(as_json: bool = options.JSON) -> None:
    """The linked hosts and how each is reached (`host link show NAME` asks it)."""
    import json

    from acpctl import config
    from acpctl.host_links import links_of

    links = links_of(config.load())
    if as_json:
        typer.echo(json.dumps([{"name": n, **lk.table()} for n, lk in links.items()], indent=2))
        return
    if not links:
        typer.echo("no linked hosts: `acpctl host link add NAME --ssh HOST` links one")
        return
    width = max(len(name) for name in links)
    for name, link in links.items():
        typer.echo(f"{name:<{width}}  {link.address}")


@link_app.command("remove")
def remove(name: str = typer.Argument(..., help="A linked host.")) -> None:
    """Unlink a host (its sessions and history there are untouched)."""
    from acpctl import config
    from acpctl.host_links import links_of, remove_link

    cfg = config.load()
    if name not in links_of(cfg):
        raise UsageError(f"no linked host {name!r} (`acpctl host link list`)")
    remove_link(cfg, name)
    config.save(cfg)
    typer.echo(f"unlinked host {name}")
    _told_the_host(name, watched=False)


def _told_the_host(name: str, watched: bool) -> None:
    """This machine's running host told to read the links again: it watches (or stops
    watching) `name` at once; said when it does."""
    import asyncio

    from acpctl import protocol as acp
    from acpctl.remote.host_socket import ask_host

    answer = asyncio.run(ask_host(acp.HOST_RELINK, {}, timeout=5))
    result = answer.get("result") if isinstance(answer, dict) else None
    if isinstance(result, dict) and (name in (result.get("watching") or [])) == watched:
        said = "watches it now" if watched else "no longer watches it"
        typer.echo(f"the running session host {said}")


@link_app.command("show")
def show(
    name: str = typer.Argument(..., help="A linked host."), as_json: bool = options.JSON
) -> None:
    """How a linked host is reached, and what it says now: its live sessions, or why it
    does not answer."""
    import asyncio
    import json

    from acpctl import config
    from acpctl import protocol as acp
    from acpctl.cli.linked import unreachable
    from acpctl.host_links import links_of
    from acpctl.remote.fleet import ask_all

    link = links_of(config.load()).get(name)
    if link is None:
        raise UsageError(f"no linked host {name!r} (`acpctl host link list`)")
    [answer] = asyncio.run(ask_all([link], acp.HOST_SESSIONS, {}))
    live = [s for s in (answer.result or {}).get("sessions", []) if s.get("live", True)]
    if as_json:
        shown = {"name": name, **link.table(), "reachable": answer.result is not None}
        if answer.result is None:
            shown.update(problem=answer.problem, unreachableSince=answer.unreachable_since)
        else:
            shown["liveSessions"] = len(live)
        typer.echo(json.dumps(shown, indent=2))
        return
    typer.echo(f"{name}: {link.address}")
    if answer.result is None:
        typer.echo(unreachable(answer))
        raise typer.Exit(1)
    typer.echo(f"{name}: answers; {len(live)} live session(s)")
