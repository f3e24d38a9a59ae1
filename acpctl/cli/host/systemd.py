"""`acpctl host systemd`: a systemd user unit that starts the host with these options (and,
for `acpctl serve --print-launchd`, a launchd agent)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from acpctl.cli.host import options
from acpctl.cli.host.app import app

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


@app.command("systemd")
def systemd(
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
) -> None:
    """Print a systemd user unit that starts the host with these options."""
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
    typer.echo(systemd_unit(host), nl=False)


def launcher_warned() -> None:
    from acpctl.editors.install import launcher_warnings

    for warning in launcher_warnings([sys.executable], "the service"):
        typer.echo(f"warning: {warning}", err=True)


def systemd_unit(host: HostOptions) -> str:
    launcher_warned()
    # systemd kills what still runs after TimeoutStopSec: the grace, and the clean-up.
    stop_timeout = f"{host.stop_grace_s + 15:g}"
    return SYSTEMD_UNIT.format(command=shlex.join(service_argv(host)), stop_timeout=stop_timeout)


def launchd_plist(host: HostOptions) -> str:
    from xml.sax.saxutils import escape

    launcher_warned()
    arguments = "\n".join(f"    <string>{escape(arg)}</string>" for arg in service_argv(host))
    return LAUNCHD_PLIST.format(arguments=arguments)


def service_argv(options: HostOptions) -> list[str]:
    """The command a service manager runs: this one, with its options, paths absolute."""
    argv = [sys.executable, "-m", "acpctl", "host", "start"]
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
