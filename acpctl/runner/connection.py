"""One `acpctl run --acp` connection, wired: the run log and record, the store, the backend
for the agent's kind, the recorder and the server; served until EOF, SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess

from acpctl import jsonrpc
from acpctl.runner.backends import Backend
from acpctl.runner.backends.acp import AcpBackend
from acpctl.runner.incidents import Incidents
from acpctl.runner.initialize import Exchange
from acpctl.runner.recorder import Recorder
from acpctl.runner.runlog import open_log
from acpctl.runner.runs import RunRecord
from acpctl.runner.server import AcpServer
from acpctl.runner.supervisor import AgentProcess
from acpctl.runner.turns import SILENCE_WARNING_S
from acpctl.store.sessions import SessionStore


def run_connection(
    name: str,
    kind: str,
    argv: list[str],
    env: dict[str, str],
    popen: subprocess.Popen[bytes] | None,
    history: bool,
    silence_s: float = SILENCE_WARNING_S,
    exchanged: Exchange | None = None,
    hinted: bool = False,
) -> None:
    """`popen`: the agent, when it was spawned before this module was imported;
    `exchanged`: what was read from it and the editor meanwhile (runner/initialize.py);
    `hinted`: the agent came from its spawn hint, unresolved (runner/spawn_hint.py)."""
    log, log_path = open_log(name)
    log.info("acpctl run --acp: agent %s (%s), log %s", name, " ".join(argv), log_path)
    if hinted:
        log.info("agent started from its spawn hint: nothing it was resolved from has changed")
    if exchanged is not None and exchanged.agent_capabilities is not None:
        log.info("initialize relayed before the server started")
    record = RunRecord(name, argv, log_path)
    store = SessionStore()
    try:
        asyncio.run(
            run_server(
                build_backend(kind, argv, env, log, store, popen, exchanged),
                Recorder(store, name, argv, log, enabled=history),
                store,
                log,
                record,
                Incidents(log_path, log, {**os.environ, **env}),
                silence_s,
                exchanged.editor_bytes if exchanged else b"",
            )
        )
    finally:
        record.remove()


def build_backend(
    kind: str,
    argv: list[str],
    env: dict[str, str],
    log: logging.Logger,
    store: SessionStore,
    popen: subprocess.Popen[bytes] | None,
    exchanged: Exchange | None = None,
) -> Backend:
    if kind == "pi-rpc":
        # Imported only for pi: editors time `initialize`, and most agents speak ACP.
        from acpctl.runner.backends.pi import PiRpcBackend

        return PiRpcBackend(argv, env, log, store)
    read = exchanged.agent_bytes if exchanged else b""
    return AcpBackend(argv, env, log, AgentProcess(argv, env, popen=popen, read=read), exchanged)


async def run_server(
    backend: Backend,
    recorder: Recorder,
    store: SessionStore,
    log: logging.Logger,
    record: RunRecord,
    incidents: Incidents,
    silence_s: float,
    editor_read: bytes = b"",
) -> None:
    """Serve the editor on stdin/stdout until EOF, SIGTERM or SIGINT. `editor_read`: what
    was read from stdin before (runner/initialize.py), served first."""
    loop = asyncio.get_running_loop()
    output = await jsonrpc.Output.open(1)
    reader = await jsonrpc.open_input(0)
    reader.feed_data(editor_read)  # before anything the pipe delivers from now on
    server = AcpServer(backend, store, recorder, log, output, record, incidents, silence_s)
    # Start the agent now, while the editor is still sending initialize: its start-up
    # overlaps ours. A failure here is reported in the answer to initialize.
    early_start = asyncio.create_task(server.start_agent())
    early_start.add_done_callback(lambda task: task.cancelled() or task.exception())
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    serving = asyncio.create_task(server.endpoint.serve(reader))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    client = os.environ.get("ACPCTL_CLIENT") or "the editor"  # `acpctl run` names itself
    log.info(f"{client} closed the connection" if serving.done() else "stopping on signal")
    await server.shutdown()
    serving.cancel()
    stopping.cancel()
    output.close()
