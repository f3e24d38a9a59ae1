"""`acpctl host start`: the session host in the foreground, until `acpctl host stop`,
SIGTERM or Ctrl-C."""

from __future__ import annotations

from pathlib import Path

import typer

from acpctl.cli.host import options
from acpctl.cli.host.app import app


@app.command("start")
def start(
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
) -> None:
    """Run the session host: agents and sessions that outlive the editor, shared by several
    clients, on a unix socket and (with --listen) ACP's WebSocket transport. The listener
    and its options are kept in config.toml: every later start has them."""
    from acpctl.host import main

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
    raise typer.Exit(main.serve(main.remembered_listener(host), replace))
