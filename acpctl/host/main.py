"""`acpctl serve`: the session host in the foreground, until SIGTERM or SIGINT. It listens
on its unix socket always, and on TCP with --listen; a non-loopback address needs TLS (or
the flag that says a TLS-terminating proxy is in front)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import re
import signal
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from acpctl import config, jsonrpc, paths, serve_config
from acpctl import protocol as acp
from acpctl.config import is_loopback
from acpctl.errors import AcpctlError, UsageError
from acpctl.host import control, unix
from acpctl.host.agents import DEFAULT_IDLE_S, DEFAULT_SPARE_S, AgentPool
from acpctl.host.devices import Devices
from acpctl.host.door import HEADER_TIMEOUT_S, Door, raise_file_limit
from acpctl.host.http import ENDPOINT, SlowHeadersGuard, make_app
from acpctl.host.notify import Notifier
from acpctl.host.push import Pusher
from acpctl.host.tcp_controls import TcpDoor, page_address
from acpctl.host.tokens import load_or_create
from acpctl.jsonrpc import JsonObject
from acpctl.remote.host_socket import read_status
from acpctl.runner.runlog import open_log
from acpctl.store.sessions import SessionStore

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
HOST_LOCK, HOST_PID = "host.lock", "host.pid"  # beside the socket
STOP_GRACE_S = 30.0
REPLACE_WAIT_S = STOP_GRACE_S + 15.0  # the running host's grace, and its clean-up


@dataclass
class HostOptions:
    listen: str | None = None  # HOST:PORT
    tls_cert: Path | None = None
    tls_key: Path | None = None
    behind_tls_proxy: bool = False
    allow_origins: list[str] = field(default_factory=list)
    allow_hosts: list[str] = field(default_factory=list)
    idle_s: float = DEFAULT_IDLE_S
    exit_when_idle: bool = False  # started by `run --acp`: gone once no agent runs
    spare_s: float = DEFAULT_SPARE_S
    header_timeout_s: float = HEADER_TIMEOUT_S
    stop_grace_s: float = STOP_GRACE_S  # on SIGTERM, how long running turns may go on
    # The listener was said on the command line: kept in config.toml's [serve] once bound,
    # so that every later start of the host has it (remembered_listener).
    remember: bool = False


def remembered_listener(options: HostOptions) -> HostOptions:
    """`options` with config.toml's [serve] listener when the command line said none: a
    host started by an editor, or after a crash, listens as the person last started it."""
    from dataclasses import replace

    if options.listen is not None:
        return replace(options, remember=True)
    listener = config.load().serve.listener
    if listener is None:
        return options
    return replace(
        options,
        listen=listener.listen,
        tls_cert=Path(listener.tls_cert).expanduser() if listener.tls_cert else None,
        tls_key=Path(listener.tls_key).expanduser() if listener.tls_key else None,
        behind_tls_proxy=options.behind_tls_proxy or listener.behind_tls_proxy,
        allow_hosts=[*listener.allow_hosts, *options.allow_hosts],
        allow_origins=[*listener.allow_origins, *options.allow_origins],
    )


def _remember(options: HostOptions, host: str, port: int, log: logging.Logger) -> None:
    """The listener as bound (the port a :0 got), kept in config.toml's [serve]."""
    shown = f"[{host}]" if ":" in host else host
    listener = serve_config.Listener(
        f"{shown}:{port}",
        str(options.tls_cert.resolve()) if options.tls_cert else None,
        str(options.tls_key.resolve()) if options.tls_key else None,
        options.behind_tls_proxy,
        tuple(options.allow_hosts),
        tuple(options.allow_origins),
    )
    try:
        cfg = config.load()
        if cfg.serve.listener != listener:
            config.remember_listener(cfg, listener)
            config.save(cfg)
            log.info("session host: its listener kept in %s ([serve])", cfg.path)
    except (AcpctlError, OSError) as exc:  # the host still serves; the next start may not
        log.warning("session host: its listener could not be kept in config.toml: %s", exc)


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port_text = listen.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise UsageError(f"--listen takes HOST:PORT, not {listen!r}")
    return host.strip("[]"), int(port_text)


def check_options(options: HostOptions) -> None:
    """Refuse, before anything listens, what would expose agents unprotected."""
    if options.stop_grace_s < 0:
        raise UsageError("--stop-grace must be a number of seconds (0: cancel at once)")
    if options.header_timeout_s <= 0:
        raise UsageError("--header-timeout must be a positive number of seconds")
    if (options.tls_cert is None) != (options.tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    if options.listen is None:
        return
    host, _ = parse_listen(options.listen)
    if not is_loopback(host) and options.tls_cert is None and not options.behind_tls_proxy:
        raise UsageError(
            f"{host} is not a loopback address: give --tls-cert and --tls-key, or "
            "--behind-tls-proxy when a TLS-terminating proxy is in front (docs/remote.md)"
        )


def serve(options: HostOptions, replace: bool = False) -> int:
    check_options(options)
    with one_host(replace), contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(options))
    return 0


@contextlib.contextmanager
def one_host(replace: bool) -> Iterator[None]:
    """Held while this process is the state directory's session host: one at a time, so
    that no second host serves the same store or takes the first one's socket. `replace`:
    stop the running one first (SIGTERM: it stops as on Ctrl-C; its sessions stay in the
    store and reopen from there)."""
    from filelock import FileLock, Timeout

    directory = paths.own_private_dir(paths.host_socket().parent)
    lock = FileLock(directory / HOST_LOCK, timeout=0, mode=0o600)
    try:
        lock.acquire()
    except Timeout:
        running = _running_host(directory)
        if not replace:
            raise AcpctlError(
                f"a session host already runs here ({running}); "
                "`acpctl host start --replace` with the options you want restarts it with "
                "them (its sessions stay, and reopen from the store)"
            ) from None
        _stop_running_host(directory)
        try:
            lock.acquire(timeout=REPLACE_WAIT_S)
        except Timeout:
            raise AcpctlError(
                f"the session host ({running}) did not stop within {REPLACE_WAIT_S:g} s"
            ) from None
    pid_file = directory / HOST_PID
    try:
        pid_file.write_text(f"{os.getpid()}\n")
        yield
    finally:
        with contextlib.suppress(OSError):
            if pid_file.read_text().strip() == str(os.getpid()):
                pid_file.unlink()
        lock.release()


def _host_pid(directory: Path) -> int | None:
    """The pid the running host wrote beside its socket, if it has (yet)."""
    try:
        return int((directory / HOST_PID).read_text())
    except (OSError, ValueError):
        return None


def _running_host(directory: Path) -> str:
    """The running host, as a person can find it: its pid and where it listens."""
    pid = _host_pid(directory)
    status = asyncio.run(read_status())
    if status is not None:
        pid = status.get("pid", pid)
        where = [str(paths.host_socket())]
        where += [str(listener["address"]) for listener in status.get("listening", [])]
        return f"pid {pid}, listening on {' and '.join(where)}"
    return f"pid {pid}, starting" if pid else "starting"


def _stop_running_host(directory: Path) -> None:
    import psutil

    pid = _host_pid(directory)
    if pid is None:
        return  # gone meanwhile: waiting for the lock says the rest
    try:
        host = psutil.Process(pid)
        command = host.cmdline()
        started = "serve" in command or ("host" in command and "start" in command)
        is_host = started and any("acpctl" in part for part in command)
    except (OSError, ValueError, psutil.Error):
        return  # gone meanwhile, or not to be told: waiting for the lock says the rest
    if is_host:  # never a process that took a dead host's pid since
        host.terminate()


def _accept_failures_in_one_line(
    log: logging.Logger,
) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """Out of file descriptors, asyncio stops accepting for a second and says so with a
    traceback: here one line (the door keeps the connections below the limit, so only
    something else of the host's can take the last ones)."""

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).startswith("socket.accept() out of system"):
            log.warning("session host: out of file descriptors: %s", context.get("exception"))
            return
        loop.default_exception_handler(context)

    return handle


async def _serve(options: HostOptions) -> None:
    log, log_path = open_log("serve", "acpctl.serve")
    settings = config.load().serve
    devices = Devices()
    pusher = Pusher(devices, settings.push_contact, settings.push_allow_addresses, log)
    notifier = Notifier(settings, log, pusher)
    pool = AgentPool(
        SessionStore(),
        log,
        options.idle_s,
        options.exit_when_idle,
        options.spare_s,
        notifier,
        devices,
    )
    runners: list[web.AppRunner] = []
    servers: list[asyncio.AbstractServer] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_accept_failures_in_one_line(log))
    socket_path = paths.host_socket()
    created_socket = False
    stop, again = asyncio.Event(), asyncio.Event()  # a stop asked; a second: no waiting
    stopped_by: list[str] = []

    def stop_asked(why: str, now: bool = False) -> None:
        if stop.is_set() or now:
            again.set()
        stopped_by.append(why)
        stop.set()

    try:
        listening: list[JsonObject] = []  # what `host status` and doctor show
        tcp = TcpDoor(pool, log, devices)
        table = control.host_methods(
            pool,
            tcp,
            pusher,
            listening,
            lambda now: stop_asked("acpctl host stop", now),
            lambda: _relinked(pool, notifier, log),
        )
        pool.client_methods = {
            method: entry.answer
            for method, entry in control.reached(table, control.CLIENTS).items()
        }
        local = {
            method: functools.partial(entry.answer, None)
            for method, entry in control.reached(table, control.LOCAL).items()
        }
        servers.append(await unix.listen(socket_path, pool, log, local))
        created_socket = True
        log.info("session host: listening on %s (log %s)", socket_path, log_path)
        if options.listen is not None:
            tokens = load_or_create()
            host, port = parse_listen(options.listen)
            context = _tls_context(options)
            raise_file_limit()  # every connection is a descriptor: as many as allowed
            door = tcp.door = Door(
                tokens,
                origins=frozenset(options.allow_origins),
                header_timeout_s=options.header_timeout_s,
                devices=tcp.devices,
                secure=context is not None or options.behind_tls_proxy,
                tls=context,  # handshakes under the door's limits (SlowHeadersGuard)
            )
            app = make_app(pool, door, tcp.connections, notifier, log)
            tcp_runner = web.AppRunner(app, handle_signals=False)
            await tcp_runner.setup()
            runners.append(tcp_runner)
            server = await loop.create_server(
                lambda: SlowHeadersGuard(tcp_runner.server(), door),  # type: ignore[misc]
                host,
                port,
                start_serving=False,
            )
            servers.append(server)
            bound = server.sockets[0].getsockname()[1]
            if options.remember:
                _remember(options, host, bound, log)
            door.hosts = _host_names(host, bound, options.allow_hosts)
            door.loopback = is_loopback(host)
            await server.start_serving()
            scheme = "wss" if context else "ws"
            shown = f"[{host}]" if ":" in host else host
            address = f"{scheme}://{shown}:{bound}{ENDPOINT}"
            listening.append(
                {
                    "address": address,
                    "tls": context is not None,
                    "loopback": is_loopback(host),
                    "behindTlsProxy": options.behind_tls_proxy,
                    "hosts": sorted(door.hosts),
                }
            )
            tcp.listening = listening[-1:]
            if notifier.page_url is None:
                notifier.page_url = page_address(address)
            log.info("session host: listening on %s", address)
            log.info(
                "session host: clients need its token: acpctl host show-token "
                "(with --observer, one that can only watch)"
            )
        pool.start_reaping()
        _linked_at_start(pool, notifier, log)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_asked, sig.name)
        signalled = asyncio.ensure_future(stop.wait())
        idle = asyncio.ensure_future(pool.idle.wait())
        await asyncio.wait({signalled, idle}, return_when=asyncio.FIRST_COMPLETED)
        signalled.cancel()
        idle.cancel()
        if stop.is_set():
            await _let_turns_finish(pool, servers, log, stopped_by[0], options.stop_grace_s, again)
    finally:
        for listener in servers:
            listener.close()
        if pool.linked is not None:
            await pool.linked.close()
        await pool.close()
        for runner in runners:
            await runner.cleanup()
        if created_socket:  # never another host's
            with contextlib.suppress(FileNotFoundError):
                socket_path.unlink()


def _linked_at_start(pool: AgentPool, notifier: Notifier, log: logging.Logger) -> None:
    try:
        _relinked(pool, notifier, log)
    except AcpctlError as exc:  # the host runs on: its lists are its own
        log.warning("session host: linked hosts not watched: %s", exc.message)


def _relinked(pool: AgentPool, notifier: Notifier, log: logging.Logger) -> JsonObject:
    """config.toml's linked hosts watched as they are now (their questions and sessions
    join this host's lists): at the start, and on HOST_RELINK (`host link add|remove`).
    Raises what is wrong with the file: nothing changes then."""
    from acpctl.host.linked_hosts import LinkedHosts
    from acpctl.host_links import links_of

    links = list(links_of(config.load()).values())
    if pool.linked is None and links:
        pool.linked = LinkedHosts(pool.changed, log, notifier.linked_asked)
        notifier.still_waiting = pool.linked.waiting_entry
    if pool.linked is None:
        return {"watching": []}
    watching = pool.linked.relink(links)
    log.info("session host: watching linked hosts %s", ", ".join(watching) or "(none)")
    return {"watching": watching}


async def _let_turns_finish(
    pool: AgentPool,
    servers: list[asyncio.AbstractServer],
    log: logging.Logger,
    why: str,
    grace_s: float,
    again: asyncio.Event,
) -> None:
    """A signal's stop, gracefully: no new connection, every client told, and the turns
    that run given `grace_s` to end by themselves before the host cancels them."""
    for listener in servers:
        listener.close()
    running = pool.running_turns()
    # With no turn running there is no grace to tell of ("0 running turns get 30 s").
    grace = {"graceSeconds": grace_s} if running else {}
    pool.tell_every_client(jsonrpc.notification(acp.HOST_STOPPING, {"signal": why, **grace}))
    if running:
        log.info(
            "session host: stopping on %s; %d running turn(s) get %g s to finish",
            why,
            running,
            grace_s,
        )
    else:
        log.info("session host: stopping on %s; no turn is running", why)
    deadline = time.monotonic() + grace_s
    while pool.running_turns() and not again.is_set() and time.monotonic() < deadline:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(again.wait(), 0.1)
    if pool.running_turns():
        log.info("session host: cancelling %d turn(s) still running", pool.running_turns())


def _tls_context(options: HostOptions) -> ssl.SSLContext | None:
    if options.tls_cert is None or options.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(options.tls_cert, options.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise AcpctlError(f"cannot load --tls-cert/--tls-key: {exc}") from exc
    return context


def _host_names(host: str, port: int, extra: list[str]) -> frozenset[str]:
    """The Host header values a request may carry: the listening address and, for a
    loopback one, loopback's names, with the listening port (or without it on 80 and 443);
    and --allow-host's, as given when they name a port, else bare (a TLS proxy in front
    forwards the name it was reached by) or with the listening port."""
    names = [f"[{host}]" if ":" in host else host]
    if is_loopback(host):
        names += LOOPBACK_NAMES
    allowed = {f"{name.lower()}:{port}" for name in names}
    if port in (80, 443):  # a default port is left out of Host
        allowed |= {name.lower() for name in names}
    for name in extra:
        name = name.lower()
        if re.fullmatch(r".+:\d+", name) and not name.endswith("]"):
            allowed.add(name)  # NAME:PORT, [V6]:PORT
        else:
            allowed |= {name, f"{name}:{port}"}
    return frozenset(allowed)
