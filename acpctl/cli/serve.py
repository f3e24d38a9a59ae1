"""`acpctl serve`: the session host (acpctl/host, docs/remote.md)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from acpctl.errors import UsageError

if TYPE_CHECKING:
    from acpctl.host.main import HostOptions

SYSTEMD_UNIT = """\
# ~/.config/systemd/user/acpctl.service; then: systemctl --user enable --now acpctl
[Unit]
Description=acpctl session host: ACP agents and sessions that outlive the editor

[Service]
# The host's own directory is no sandbox root (remote clients' roots are config.toml's),
# but it is where it starts: the home, said rather than left to systemd.
WorkingDirectory=%h
ExecStart={command}
TimeoutStopSec={stop_timeout}
Restart=on-failure

[Install]
WantedBy=default.target
"""

LAUNCHD_PLIST = """\
<?xml version="1.0" encoding="UTF-8"?>
<!-- ~/Library/LaunchAgents/dev.acpctl.serve.plist; then:
     launchctl load ~/Library/LaunchAgents/dev.acpctl.serve.plist -->
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
  <key>Label</key><string>dev.acpctl.serve</string>
  <key>ProgramArguments</key>
  <array>
{arguments}
  </array>
  <key>RunAtLoad</key><true/>
  <key>KeepAlive</key><true/>
</dict>
</plist>
"""


def serve(
    listen: str | None = typer.Option(
        None, "--listen", metavar="HOST:PORT", help="Also listen on TCP (WebSocket on /acp)."
    ),
    tls_cert: Path | None = typer.Option(None, "--tls-cert", help="TLS certificate (PEM)."),
    tls_key: Path | None = typer.Option(None, "--tls-key", help="TLS private key (PEM)."),
    behind_tls_proxy: bool = typer.Option(
        False,
        "--behind-tls-proxy",
        help="Allow a non-loopback --listen without TLS: a TLS-terminating proxy is in front.",
    ),
    allow_origin: list[str] = typer.Option(
        [], "--allow-origin", help="An Origin that may connect (browsers); none by default."
    ),
    allow_host: list[str] = typer.Option(
        [], "--allow-host", help="Another name clients reach this host by (the Host header)."
    ),
    idle_stop: float = typer.Option(
        600.0, "--idle-stop", metavar="SECONDS", help="Stop an agent idle this long (0: never)."
    ),
    spare_for: float = typer.Option(
        3600.0,
        "--spare-for",
        metavar="SECONDS",
        help="Keep an initialized spare of an agent this long after its last client (0: none).",
    ),
    exit_when_idle: bool = typer.Option(
        False, "--exit-when-idle", help="Exit once no agent has run for the idle time."
    ),
    stop_grace: float = typer.Option(
        None,
        "--stop-grace",
        metavar="SECONDS",
        help="On SIGTERM or Ctrl-C, how long running turns may go on before they are "
        "cancelled (30; a second signal stops at once).",
    ),
    header_timeout: float = typer.Option(
        None,
        "--header-timeout",
        metavar="SECONDS",
        help="Close a TCP connection whose request headers take longer, every request's "
        "(slow headers; 10), or whose body takes three times that.",
    ),
    replace: bool = typer.Option(
        False,
        "--replace",
        help="Stop the host that runs here first (its sessions stay), and start with these "
        "options: to add --listen to a running host, for instance.",
    ),
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
) -> None:
    """Run the session host: agents and sessions that outlive the editor, shared by several
    clients, on a unix socket and (with --listen) ACP's WebSocket transport."""
    from acpctl.host import asked, main

    if token_file is not None and not show_token:
        raise UsageError("--token-file goes with --show-token")
    if (name is not None or public_url is not None or qr_png is not None) and not pair:
        raise UsageError("--name, --public-url and --qr-png go with --pair")
    if show_token:
        raise typer.Exit(asked.show_token(observer, token_file))
    if rotate_token:
        raise typer.Exit(asked.rotate(observer))
    if status:
        raise typer.Exit(asked.show_status(as_json))
    if pair or devices or revoke is not None:
        raise typer.Exit(
            _devices(pair, name, public_url, qr_png, devices, revoke, observer, as_json)
        )
    if bridge:
        from acpctl.host.bridge import bridge as run_bridge

        raise typer.Exit(run_bridge())
    options = main.HostOptions(
        listen=listen,
        tls_cert=tls_cert,
        tls_key=tls_key,
        behind_tls_proxy=behind_tls_proxy,
        allow_origins=list(allow_origin),
        allow_hosts=list(allow_host),
        idle_s=idle_stop,
        exit_when_idle=exit_when_idle,
        spare_s=spare_for,
        header_timeout_s=main.HEADER_TIMEOUT_S if header_timeout is None else header_timeout,
        stop_grace_s=main.STOP_GRACE_S if stop_grace is None else stop_grace,
    )
    if print_systemd or print_launchd:
        from acpctl.editors.install import launcher_warnings

        for warning in launcher_warnings([sys.executable], "the service"):
            typer.echo(f"warning: {warning}", err=True)
    if print_systemd:
        # systemd kills what still runs after TimeoutStopSec: the grace, and the clean-up.
        stop_timeout = f"{options.stop_grace_s + 15:g}"
        command = shlex.join(_service_argv(options))
        typer.echo(SYSTEMD_UNIT.format(command=command, stop_timeout=stop_timeout), nl=False)
        return
    if print_launchd:
        from xml.sax.saxutils import escape

        argv = _service_argv(options)
        arguments = "\n".join(f"    <string>{escape(arg)}</string>" for arg in argv)
        typer.echo(LAUNCHD_PLIST.format(arguments=arguments), nl=False)
        return
    raise typer.Exit(main.serve(main.remembered_listener(options), replace))


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


def _service_argv(options: HostOptions) -> list[str]:
    """The command a service manager runs: this one, with its options, paths absolute."""
    argv = [sys.executable, "-m", "acpctl", "serve"]
    if options.listen:
        argv += ["--listen", options.listen]
    for flag, value in (("--tls-cert", options.tls_cert), ("--tls-key", options.tls_key)):
        if value is not None:
            argv += [flag, str(value.resolve())]
    if options.behind_tls_proxy:
        argv.append("--behind-tls-proxy")
    for origin in options.allow_origins:
        argv += ["--allow-origin", origin]
    for name in options.allow_hosts:
        argv += ["--allow-host", name]
    argv += ["--idle-stop", f"{options.idle_s:g}", "--spare-for", f"{options.spare_s:g}"]
    from acpctl.host.door import HEADER_TIMEOUT_S
    from acpctl.host.main import STOP_GRACE_S

    if options.header_timeout_s != HEADER_TIMEOUT_S:
        argv += ["--header-timeout", f"{options.header_timeout_s:g}"]
    if options.stop_grace_s != STOP_GRACE_S:
        argv += ["--stop-grace", f"{options.stop_grace_s:g}"]
    return argv
