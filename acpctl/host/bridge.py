"""`acpctl serve --bridge`: what a remote acpctl runs over ssh. Its stdio is joined, byte
for byte, to this machine's session host's unix socket (host/unix.py), a host started
first when none answers; the other end speaks that socket's lines."""

from __future__ import annotations

import asyncio
import contextlib
import sys

from acpctl.jsonrpc.streams import Output, open_input
from acpctl.remote.host_socket import open_host_socket

CHUNK = 1 << 16


def bridge() -> int:
    return asyncio.run(_bridge())


async def _bridge() -> int:
    try:
        reader, writer = await open_host_socket()
    except OSError as exc:  # NoHost, said as what to do
        sys.stderr.write(f"acpctl: {exc}\n")
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
