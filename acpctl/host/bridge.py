"""`acpctl serve --bridge`: what a remote acpctl runs over ssh. Its stdio is joined, byte
for byte, to this machine's session host's unix socket (host/unix.py), a host started
first when none answers (unless --no-start); the other end speaks that socket's lines."""

from __future__ import annotations

import asyncio
import contextlib
import sys

from acpctl import paths
from acpctl.jsonrpc.streams import Output, open_input
from acpctl.remote.host_socket import NoHost, open_host_socket

CHUNK = 1 << 16


def bridge(start: bool = True) -> int:
    """With `start`, a host is started when none runs (a link serves an agent); without,
    none is (a linked host's list only asks what runs)."""
    return asyncio.run(_bridge(start))


async def _bridge(start: bool) -> int:
    try:
        reader, writer = await open_host_socket(start)
    except NoHost as exc:  # said as what to do
        sys.stderr.write(f"acpctl: {exc}\n")
        return 1
    except OSError:
        sys.stderr.write(f"acpctl: no session host runs here ({paths.host_socket()})\n")
        return 1
    output = await Output.open(1)
    stdin = await open_input(0)

    async def up() -> None:
        while data := await stdin.read(CHUNK):
            writer.write(data)
            await writer.drain()

    async def down() -> None:
        while data := await reader.read(CHUNK):
            output.write(data)
            await output.drain()

    tasks = {asyncio.ensure_future(up()), asyncio.ensure_future(down())}
    with contextlib.suppress(ConnectionError):
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()
    writer.close()
    await output.drain()
    output.close()
    return 0
