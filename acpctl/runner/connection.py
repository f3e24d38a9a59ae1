"""One `acpctl run --acp` connection, wired: the run log and record, the store, the backend
for the agent's kind, the recorder, the connection's context and the server; served over
the editor's channel until it closes, or until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
from pathlib import Path

from acpctl.jsonrpc.channel import StreamChannel
from acpctl.runner.backends import Backend
from acpctl.runner.backends.acp import AcpBackend
from acpctl.runner.clients import Client
from acpctl.runner.context import Connection
from acpctl.runner.incidents import Incidents
from acpctl.runner.options import RunLimits
from acpctl.runner.recorder import Recorder
from acpctl.runner.runlog import open_log
from acpctl.runner.runs import RunRecord
from acpctl.runner.server import AcpServer
from acpctl.sandbox import Policy, home_in_tmp
from acpctl.store.sessions import SessionStore


def serve_stdio(
    name: str,
    kind: str,
    argv: list[str],
    env: dict[str, str],
    history: bool,
    limits: RunLimits,
    spawned: subprocess.Popen[bytes] | None = None,
    sandbox: Policy | None = None,
) -> None:
    """Serve the editor on stdin and stdout: the agent `name` (of `kind`), resolved by
    runner.main to `argv` and `env` (in `sandbox`, when it has one), and `spawned` from
    them already."""
    log, log_path = open_log(name)
    log.info("acpctl run --acp: agent %s (%s), log %s", name, " ".join(argv), log_path)
    if sandbox is not None:
        log.info("agent %s runs in a sandbox: %s", name, sandbox.describe())
        if (in_tmp := home_in_tmp()) is not None:
            log.warning("%s", in_tmp)
    record = RunRecord(name, argv, log_path)
    if sandbox is not None:  # `acpctl ps` says so, with its roots
        record.update(sandbox=[str(root) for root in sandbox.roots])
    store = SessionStore()

    async def serve() -> None:
        conn = wire(
            name,
            kind,
            argv,
            env,
            log,
            log_path,
            store,
            limits,
            history,
            spawned,
            record,
            sandbox=sandbox,
        )
        await run_server(conn, Client(await StreamChannel.open()))

    try:
        asyncio.run(serve())
    finally:
        record.remove()


def wire(
    name: str,
    kind: str,
    argv: list[str],
    env: dict[str, str],
    log: logging.Logger,
    log_path: Path,
    store: SessionStore,
    limits: RunLimits,
    history: bool = True,
    spawned: subprocess.Popen[bytes] | None = None,
    run_record: RunRecord | None = None,
    shared: bool = False,
    sandbox: Policy | None = None,
) -> Connection:
    """One agent connection, wired the same way for `run --acp` on stdio and for each agent
    of the session host (`shared`: several clients): its backend, recorder, incidents."""
    return Connection(
        build_backend(kind, argv, env, log, store, spawned, limits.request_timeout_s, sandbox),
        store,
        Recorder(store, name, argv, log, enabled=history),
        log,
        incidents=Incidents(log_path, log, {**os.environ, **env}),
        run_record=run_record,
        silence_s=limits.silence_s,
        shared=shared,
        sandbox=sandbox,
    )


def build_backend(
    kind: str,
    argv: list[str],
    env: dict[str, str],
    log: logging.Logger,
    store: SessionStore,
    spawned: subprocess.Popen[bytes] | None = None,
    request_timeout_s: float = 0.0,
    sandbox: Policy | None = None,
) -> Backend:
    """The agent's backend; an ACP agent's `argv` runs it in its `sandbox` already, a pi
    agent's pi processes are each put in it by the pi backend."""
    if kind == "pi-rpc":
        # Imported only for pi: most agents speak ACP.
        from acpctl.runner.backends.pi import PiRpcBackend

        return PiRpcBackend(argv, env, log, store, sandbox)
    return AcpBackend(argv, env, log, spawned, request_timeout_s)


async def run_server(conn: Connection, client: Client) -> None:
    """Serve the one client until it closes its end, or until SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    server = AcpServer(conn)
    # Start the agent now, while the editor is still sending initialize: its start-up
    # overlaps ours. A failure here is reported in the answer to initialize.
    early_start = asyncio.create_task(conn.start_agent())
    early_start.add_done_callback(lambda task: task.cancelled() or task.exception())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(server.serve(client))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    who = os.environ.get("ACPCTL_CLIENT") or "the editor"  # `acpctl run` names itself
    conn.log.info(f"{who} closed the connection" if serving.done() else "stopping on signal")
    await server.shutdown()
    serving.cancel()
    stopping.cancel()
    client.channel.close()
