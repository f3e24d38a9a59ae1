"""`acpctl serve`: the session host's older command, kept working: each of its modes is an
`acpctl host` verb now (cli/host/), and says so."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from acpctl.cli.host import options, systemd
from acpctl.errors import UsageError


def serve(
    listen: str | None = options.LISTEN,
    tls_cert: Path | None = options.TLS_CERT,
    tls_key: Path | None = options.TLS_KEY,
    behind_tls_proxy: bool = options.BEHIND_TLS_PROXY,
    allow_origin: list[str] = options.ALLOW_ORIGIN,
    allow_host: list[str] = options.ALLOW_HOST,
    idle_stop: float = options.IDLE_STOP,
    spare_for: float = options.SPARE_FOR,
    exit_when_idle: bool = options.EXIT_WHEN_IDLE,
    stop_grace: float = options.STOP_GRACE,
    header_timeout: float = options.HEADER_TIMEOUT,
    replace: bool = options.REPLACE,
    show_token: bool = typer.Option(False, "--show-token", help="Print the controller token."),
    token_file: Path | None = typer.Option(
        None,
        "--token-file",
        help="With --show-token: write the token to this file, readable by you alone.",
    ),
    rotate_token: bool = typer.Option(
        False,
        "--rotate-token",
        help="A new controller token (--observer: observer); the running host takes it, and "
        "its connections with the old one end.",
    ),
    observer: bool = typer.Option(
        False,
        "--observer",
        help="With --show-token, --rotate-token or --pair: the observer's (sees, never acts).",
    ),
    pair: bool = typer.Option(
        False,
        "--pair",
        help="Pair a device (a phone's browser): print a one-time address and its QR code.",
    ),
    name: str | None = typer.Option(None, "--name", help="With --pair: the device's name."),
    public_url: str | None = typer.Option(
        None,
        "--public-url",
        metavar="URL",
        help="With --pair: the address the device reaches the host by (a proxy's).",
    ),
    qr_png: str | None = typer.Option(
        None, "--qr-png", metavar="FILE", help="With --pair: write the QR code as a PNG too."
    ),
    devices: bool = typer.Option(False, "--devices", help="List the paired devices."),
    revoke: str | None = typer.Option(
        None, "--revoke", metavar="NAME", help="Unpair a device: its connections end at once."
    ),
    print_systemd: bool = typer.Option(
        False, "--print-systemd", help="Print a systemd user unit that runs this command."
    ),
    print_launchd: bool = typer.Option(
        False, "--print-launchd", help="Print a launchd agent that runs this command."
    ),
    status: bool = typer.Option(
        False, "--status", help="Show the running host's agents, sessions and clients."
    ),
    as_json: bool = typer.Option(False, "--json", help="With --status or --devices: print JSON."),
    bridge: bool = typer.Option(
        False,
        "--bridge",
        help="Join stdio to the host's unix socket, starting a host if none runs "
        "(what a remote acpctl runs over ssh).",
    ),
    no_start: bool = typer.Option(
        False, "--no-start", help="With --bridge: none started (a linked host's list asks)."
    ),
) -> None:
    """The session host, as `acpctl host` has it now: `serve` is `host start`, and its
    flags are `host show-token`, `pair`, `status`... (serve keeps working)."""
    from acpctl.host import asked, main

    if token_file is not None and not show_token:
        raise UsageError("--token-file goes with --show-token")
    if (name is not None or public_url is not None or qr_png is not None) and not pair:
        raise UsageError("--name, --public-url and --qr-png go with --pair")
    if show_token:
        _note("acpctl host show-token")
        raise typer.Exit(asked.show_token(observer, token_file))
    if rotate_token:
        _note("acpctl host rotate-token")
        raise typer.Exit(asked.rotate(observer))
    if status:
        _note("acpctl host status")
        raise typer.Exit(asked.show_status(as_json))
    if pair or devices or revoke is not None:
        _note(
            "acpctl host pair"
            if pair
            else "acpctl host devices"
            if devices
            else "acpctl host revoke NAME"
        )
        raise typer.Exit(
            _devices(pair, name, public_url, qr_png, devices, revoke, observer, as_json)
        )
    if no_start and not bridge:
        raise UsageError("--no-start goes with --bridge")
    if bridge:
        from acpctl.host.bridge import bridge as run_bridge

        raise typer.Exit(run_bridge(start=not no_start))
    host = options.host_options(
        listen,
        tls_cert,
        tls_key,
        behind_tls_proxy,
        allow_origin,
        allow_host,
        idle_stop,
        spare_for,
        exit_when_idle,
        stop_grace,
        header_timeout,
    )
    if print_systemd:
        typer.echo(systemd.systemd_unit(host), nl=False)
        return
    if print_launchd:
        typer.echo(systemd.launchd_plist(host), nl=False)
        return
    _note("acpctl host start")
    raise typer.Exit(main.serve(main.remembered_listener(host), replace))


def _note(now: str) -> None:
    """`serve` still works; what it is called now is said on stderr, once."""
    sys.stderr.write(f"acpctl: `acpctl serve` is `{now}` now (serve keeps working)\n")


def _devices(
    pair: bool,
    name: str | None,
    public_url: str | None,
    qr_png: str | None,
    devices: bool,
    revoke: str | None,
    observer: bool,
    as_json: bool,
) -> int:
    """--pair, --devices or --revoke, asked of the running host."""
    from acpctl.host import pairing

    if pair:
        return pairing.pair(observer, name, public_url, qr_png)
    if devices:
        return pairing.devices(as_json)
    assert revoke is not None
    return pairing.revoke(revoke)
