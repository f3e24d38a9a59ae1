"""Linked hosts: a person's other machines' session hosts, reached over ssh (through
`acpctl serve --bridge` there) or over ACP's remote transport (wss:// with the host's
token), in config.toml's `[links.NAME]` tables:

    [links.build]
    ssh = "me@build"                 # and remote_state, remote_acpctl, ssh_args
    [links.cloud]
    url = "wss://cloud.example:8765"
    token_file = "/home/me/.config/acpctl/cloud.token"

This machine asks each for its own live sessions (remote/fleet.py); links are not
transitive: a linked host answers with its own sessions, never with its links'."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acpctl.config import Remote, clear_text_problem, remote_from_table, shown_url
from acpctl.errors import UsageError

if TYPE_CHECKING:
    from acpctl.config import Config

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,31}$")
ENDPOINT = "/acp"  # where a host's remote transport listens (host/http.py)
DEADLINE_S = 5.0


@dataclass(frozen=True)
class HostLink:
    name: str
    ssh: str | None = None  # [USER@]HOST, or a Host of the user's ssh config
    remote_state: str | None = None  # the host's state directory there, if not the default
    remote_acpctl: str = "acpctl"
    ssh_args: tuple[str, ...] = ()
    url: str | None = None  # wss://HOST:PORT[/acp]
    token_file: str | None = None
    ca_file: str | None = None
    # Its answer to a list: past it, the list says what did arrive (a host across the world
    # may want more, one on the LAN less).
    deadline_s: float = DEADLINE_S

    @property
    def remote(self) -> Remote:
        """The link as the remote transports take it (remote/lines.py, websocket.py)."""
        acpctl = self.remote_acpctl
        if self.remote_state is not None:  # one word list: `env` sets it for acpctl alone
            acpctl = f"env ACPCTL_STATE_DIR={shlex.quote(self.remote_state)} {acpctl}"
        return Remote(
            url=self.endpoint,
            token_file=self.token_file,
            ca_file=self.ca_file,
            ssh=self.ssh,
            remote_acpctl=acpctl,
            ssh_args=self.ssh_args,
        )

    def agent_remote(self, agent: str) -> Remote:
        """The link to `agent` there, as a remote agent of this machine would be."""
        remote = self.remote
        if remote.url is not None:
            from urllib.parse import quote

            return remote._replace(url=f"{remote.url.rstrip('/')}/{quote(agent, safe='')}")
        return remote._replace(remote_agent=agent)

    @property
    def endpoint(self) -> str | None:
        """The URL with the host's endpoint path when it names none."""
        if self.url is None:
            return None
        from urllib.parse import urlsplit

        return (
            self.url
            if urlsplit(self.url).path not in ("", "/")
            else self.url.rstrip("/") + ENDPOINT
        )

    @property
    def address(self) -> str:
        if self.url is not None:
            return shown_url(self.url)
        state = f" (state {self.remote_state})" if self.remote_state else ""
        return f"ssh {self.ssh}{state}"

    def table(self) -> dict[str, Any]:
        """What config.toml keeps: the fields that are set and not their default."""
        kept: dict[str, Any] = {}
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name != "name" and value and value != field.default:
                kept[field.name] = list(value) if isinstance(value, tuple) else value
        return kept


def links_of(config: Config) -> dict[str, HostLink]:
    """config.toml's `[links]`, read and checked."""
    table = config.plain.get("links", {})
    if not isinstance(table, dict):
        raise UsageError(f"{config.path}: [links] must be a table of tables")
    return {name: link_from_table(config.path, name, t) for name, t in table.items()}


def link_from_table(path: Path | None, name: str, table: object) -> HostLink:
    where = f"{path}: [links.{name}] " if path is not None else ""
    if not NAME.match(name):
        raise UsageError(
            f"{where or 'the link name '}{name!r} must be lowercase letters, digits, '.', '_' "
            "or '-', at most 32"
        )
    if not isinstance(table, dict):
        raise UsageError(f"{where}must be a table")
    unknown = set(table) - {f.name for f in fields(HostLink)} - {"name"}
    if unknown:
        raise UsageError(f"{where}unknown key(s): {', '.join(sorted(unknown))}")
    if ("url" in table) == ("ssh" in table):
        raise UsageError(f"{where or ''}a linked host takes one of --ssh and --url")
    value = table.get("remote_state")
    if value is not None and (not isinstance(value, str) or not value):
        raise UsageError(f"{where}remote_state must be a non-empty string")
    deadline = table.get("deadline_s", DEADLINE_S)
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or deadline <= 0:
        raise UsageError(f"{where or '--'}deadline_s must be a number of seconds above 0")
    if "url" not in table and ("token_file" in table or "ca_file" in table):
        raise UsageError(f"{where}token_file and ca_file go with url")
    if "ssh" not in table and ("remote_state" in table or "remote_acpctl" in table):
        raise UsageError(f"{where}remote_state and remote_acpctl go with ssh")
    # The keys a remote agent shares are checked as a remote agent's are (config.py).
    shared = {k: v for k, v in table.items() if k not in ("remote_state", "deadline_s")}
    remote = remote_from_table(path, name, shared, "links")
    if remote.url is not None and (problem := clear_text_problem(remote.url)):
        raise UsageError(f"{where}{problem}")
    return HostLink(
        name=name,
        ssh=remote.ssh,
        remote_state=table.get("remote_state"),
        remote_acpctl=remote.remote_acpctl,
        ssh_args=remote.ssh_args,
        url=remote.url,
        token_file=remote.token_file,
        ca_file=remote.ca_file,
        deadline_s=float(deadline),
    )


def set_link(config: Config, link: HostLink) -> None:
    """[links.NAME] written anew."""
    import tomlkit

    links = config.document.get("links")
    if links is None:
        links = config.document["links"] = tomlkit.table(is_super_table=True)
    table = tomlkit.table()
    table.update(link.table())
    links[link.name] = table


def remove_link(config: Config, name: str) -> None:
    links = config.document.get("links")
    if links is not None and name in links:
        del links[name]
