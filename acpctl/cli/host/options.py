"""The session host's start options, declared once: `acpctl host start`, `host systemd` and
the older `acpctl serve` take them from here, as httpie's cli/definition.py declares its
options in one place."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from acpctl.host.main import HostOptions

LISTEN = typer.Option(
    None, "--listen", metavar="HOST:PORT", help="Also listen on TCP (WebSocket on /acp)."
)
TLS_CERT = typer.Option(None, "--tls-cert", help="TLS certificate (PEM).")
TLS_KEY = typer.Option(None, "--tls-key", help="TLS private key (PEM).")
BEHIND_TLS_PROXY = typer.Option(
    False,
    "--behind-tls-proxy",
    help="Allow a non-loopback --listen without TLS: a TLS-terminating proxy is in front.",
)
ALLOW_ORIGIN = typer.Option(
    [], "--allow-origin", help="An Origin that may connect (browsers); none by default."
)
ALLOW_HOST = typer.Option(
    [], "--allow-host", help="Another name clients reach this host by (the Host header)."
)
IDLE_STOP = typer.Option(
    600.0, "--idle-stop", metavar="SECONDS", help="Stop an agent idle this long (0: never)."
)
SPARE_FOR = typer.Option(
    3600.0,
    "--spare-for",
    metavar="SECONDS",
    help="Keep an initialized spare of an agent this long after its last client (0: none).",
)
EXIT_WHEN_IDLE = typer.Option(
    False, "--exit-when-idle", help="Exit once no agent has run for the idle time."
)
STOP_GRACE = typer.Option(
    None,
    "--stop-grace",
    metavar="SECONDS",
    help="On SIGTERM, Ctrl-C or `acpctl host stop`, how long running turns may go on "
    "before they are cancelled (30; a second signal, or `stop --now`, stops at once).",
)
HEADER_TIMEOUT = typer.Option(
    None,
    "--header-timeout",
    metavar="SECONDS",
    help="Close a TCP connection whose request headers take longer, every request's "
    "(slow headers; 10), or whose body takes three times that.",
)
REPLACE = typer.Option(
    False,
    "--replace",
    help="Stop the host that runs here first (its sessions stay), and start with these "
    "options: to add --listen to a running host, for instance.",
)
OBSERVER = typer.Option(False, "--observer", help="The observer's (sees, never acts).")
JSON = typer.Option(False, "--json", help="Print JSON.")


def host_options(
    listen: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    behind_tls_proxy: bool,
    allow_origin: list[str],
    allow_host: list[str],
    idle_stop: float,
    spare_for: float,
    exit_when_idle: bool,
    stop_grace: float | None,
    header_timeout: float | None,
) -> HostOptions:
    """The start options as the host takes them."""
    from acpctl.host import main
    from acpctl.host.door import HEADER_TIMEOUT_S

    return main.HostOptions(
        listen=listen,
        tls_cert=tls_cert,
        tls_key=tls_key,
        behind_tls_proxy=behind_tls_proxy,
        allow_origins=list(allow_origin),
        allow_hosts=list(allow_host),
        idle_s=idle_stop,
        exit_when_idle=exit_when_idle,
        spare_s=spare_for,
        header_timeout_s=HEADER_TIMEOUT_S if header_timeout is None else header_timeout,
        stop_grace_s=main.STOP_GRACE_S if stop_grace is None else stop_grace,
    )
