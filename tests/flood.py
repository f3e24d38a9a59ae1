"""A flood of sockets without a token against a session host on this machine's loopback, run
as a process of its own (as an attacker's program is), so that the right client's own
event loop is not the flood's: tests/test_door.py and bench/door.py start it.

    python tests/flood.py reopen PORT COUNT SECONDS      COUNT sockets, each reopened as
                                                         soon as the host closes it; half
                                                         begin a request and never end it
    python tests/flood.py half-tls PORT COUNT SECONDS    COUNT sockets that each send half
                                                         a TLS ClientHello and hold

It prints "flooding" once its sockets are open, and stops by itself after SECONDS. Only
127.0.0.1 is ever a target.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import ssl
import sys

TARGET = "127.0.0.1"


def half_a_client_hello() -> bytes:
    """The first half of a real TLS ClientHello (made by the ssl module in memory)."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    session = context.wrap_bio(incoming, outgoing, server_hostname=TARGET)
    with contextlib.suppress(ssl.SSLWantReadError):
        session.do_handshake()
    hello = outgoing.read()
    return hello[: len(hello) // 2]


async def reopen(port: int, count: int) -> None:
    opened = asyncio.Event()
    remaining = [count]

    async def one(n: int) -> None:
        while True:
            try:
                reader, writer = await asyncio.open_connection(TARGET, port)
            except OSError:
                await asyncio.sleep(0.01)
                continue
            remaining[0] -= 1
            if remaining[0] == 0:
                opened.set()
            if n % 2:
                writer.write(b"GET /acp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            with contextlib.suppress(OSError):
                await reader.read()  # until the host closes it, then again
            writer.close()

    tasks = [asyncio.ensure_future(one(n)) for n in range(count)]
    await opened.wait()
    print("flooding", flush=True)
    await asyncio.gather(*tasks)


async def half_tls(port: int, count: int) -> None:
    half = half_a_client_hello()
    held = []
    for _ in range(count):
        try:
            _, writer = await asyncio.open_connection(TARGET, port)
        except OSError:
            continue
        writer.write(half)
        held.append(writer)
    print("flooding", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    mode, port, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = count + 256
    if soft < wanted:
        allowed = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (allowed, hard))
    flood = reopen if mode == "reopen" else half_tls
    with contextlib.suppress(asyncio.TimeoutError):
        asyncio.run(asyncio.wait_for(flood(port, count), seconds))


if __name__ == "__main__":
    main()
