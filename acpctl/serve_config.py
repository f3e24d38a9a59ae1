"""config.toml's [serve]: what the session host does when a question waits (on_waiting, Web
Push), where its page is reached (page_url), and the TCP listener it was last started
with, which every later start of the host has."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from acpctl.config_values import fail, seconds


class ServeSettings(NamedTuple):
    """[serve]: what the session host runs when an agent's question waits for a person
    (host/notify.py)."""

    on_waiting: tuple[str, ...] = ()  # an argv, run without a shell; empty: nothing
    on_waiting_after_s: float = 30.0
    on_waiting_timeout_s: float = 10.0
    # The page's address as devices reach it (a proxy's), for on_waiting's summary; None:
    # the TCP listener's own.
    page_url: str | None = None
    # The TCP listener the host was last started with (`serve --listen`, kept here): every
    # later start of the host has it, by `serve`, by an editor's `run --acp`, by systemd.
    listener: Listener | None = None
    # Web Push (host/push.py): whether a push carries what the agent asks, the contact
    # push services are given, and the private networks an endpoint may be in.
    push_agent_text: bool = True
    push_contact: str = "mailto:acpctl@localhost"
    push_allow_addresses: tuple[str, ...] = ()


class Listener(NamedTuple):
    """[serve]'s listener keys: what `serve --listen` and its options said."""

    listen: str  # HOST:PORT, the port the host bound
    tls_cert: str | None = None
    tls_key: str | None = None
    behind_tls_proxy: bool = False
    allow_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()


def serve_settings(path: Path, table: Any) -> ServeSettings:
    if not isinstance(table, dict):
        raise fail(path, "[serve] must be a table")
    argv = table.get("on_waiting", [])
    if not isinstance(argv, list) or not all(isinstance(a, str) and a for a in argv):
        raise fail(
            path,
            '[serve] on_waiting must be a command as a list of strings (["ntfy", "publish", '
            '"my-topic"]): it runs without a shell',
        )
    defaults = ServeSettings()
    timeout = seconds(
        path, table, "on_waiting_timeout_s", defaults.on_waiting_timeout_s, "not allowed"
    )
    if timeout == 0:  # a notifier that hangs would pile up: it always has a limit
        raise fail(path, "[serve] on_waiting_timeout_s must be more than 0 seconds")
    page_url = table.get("page_url")
    if page_url is not None and (
        not isinstance(page_url, str) or not page_url.startswith(("https://", "http://"))
    ):
        raise fail(path, "[serve] page_url must be an http:// or https:// address")
    return ServeSettings(
        tuple(argv),
        seconds(path, table, "on_waiting_after_s", defaults.on_waiting_after_s, "at once"),
        timeout,
        page_url.rstrip("/") if page_url else None,
        _listener(path, table),
        *_push_settings(path, table, defaults),
    )


def _push_settings(
    path: Path, table: dict[str, Any], defaults: ServeSettings
) -> tuple[bool, str, tuple[str, ...]]:
    import ipaddress

    text = table.get("push_agent_text", defaults.push_agent_text)
    if not isinstance(text, bool):
        raise fail(path, "[serve] push_agent_text must be true or false")
    contact = table.get("push_contact", defaults.push_contact)
    if not isinstance(contact, str) or not contact.startswith(("mailto:", "https://")):
        raise fail(path, "[serve] push_contact must be a mailto: or https:// address")
    allowed = table.get("push_allow_addresses", [])
    try:
        if not isinstance(allowed, list):
            raise TypeError
        networks = tuple(str(ipaddress.ip_network(a, strict=False)) for a in allowed)
    except (TypeError, ValueError) as exc:
        raise fail(
            path, '[serve] push_allow_addresses must be a list of networks ("127.0.0.1/32")'
        ) from exc
    return text, contact, networks


def _listener(path: Path, table: dict[str, Any]) -> Listener | None:
    listen = table.get("listen")
    if listen is None:
        return None
    if not isinstance(listen, str) or ":" not in listen:
        raise fail(path, '[serve] listen must be "HOST:PORT"')
    files = {}
    for key in ("tls_cert", "tls_key"):
        value = table.get(key)
        if value is not None and not (isinstance(value, str) and value):
            raise fail(path, f"[serve] {key} must be a file's path")
        files[key] = value
    lists = {}
    for key in ("allow_hosts", "allow_origins"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise fail(path, f"[serve] {key} must be a list of names")
        lists[key] = tuple(value)
    proxy = table.get("behind_tls_proxy", False)
    if not isinstance(proxy, bool):
        raise fail(path, "[serve] behind_tls_proxy must be true or false")
    return Listener(listen, files["tls_cert"], files["tls_key"], proxy, **lists)
