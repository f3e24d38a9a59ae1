"""Issue 29: remote agents. The editor is a raw JSON-RPC client on the stdio of a real
`acpctl run --acp --agent NAME`, whose agent is remote: an `acpctl serve` (a real process on
127.0.0.1, the demo agent behind it) reached through a TCP proxy that cuts the connection
at chosen and random moments; the Python SDK's own server under uvicorn; a TLS listener;
a real sshd."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from acpctl import protocol as acp_names
from tests.conftest import cli
from tests.fault_proxy import FaultProxy
from tests.test_host import LISTENING, RawClient, serving

pytestmark = pytest.mark.e2e
PROXY_ADDRESS = "127.0.0.2"
TURNS, CUTS_PER_TURN = 5, 21


@asynccontextmanager
async def editor(agent: str) -> AsyncIterator[RawClient]:
    """`acpctl run --acp --agent AGENT`, with a raw client on its stdio, initialized."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "acpctl",
        "run",
        "--acp",
        "--agent",
        agent,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=dict(os.environ),
        limit=1 << 24,
    )
    assert process.stdin is not None and process.stdout is not None
    client = RawClient(None, (process.stdout, process.stdin))
    client.process = process  # type: ignore[attr-defined]
    try:
        yield client
    finally:
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 10)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()


def updates_of(messages: list[dict[str, Any]], session: str) -> list[Any]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == acp_names.SESSION_UPDATE
        and m["params"].get("sessionId") == session
        and m["params"]["update"].get("sessionUpdate") != acp_names.USER_MESSAGE_CHUNK
    ]


def texts_of(updates: list[Any]) -> str:
    return "".join(
        u["content"]["text"]
        for u in updates
        if u.get("sessionUpdate") == acp_names.AGENT_MESSAGE_CHUNK
    )


async def host_history(url: str, token: str, session: str) -> list[Any]:
    """The session as the host's store replays it, to a client of its own."""
    import aiohttp

    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Authorization": f"Bearer {token}"}) as socket,
    ):
        client = RawClient(socket)
        await client.request(acp_names.INITIALIZE, {"protocolVersion": 1})
        answer = await client.request(
            acp_names.SESSION_LOAD, {"sessionId": session, "cwd": "/tmp", "mcpServers": []}
        )
        assert "result" in answer, answer
        return updates_of(client.messages, session)


@pytest.fixture
def remote_host(home: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    # The fault proxy listens on 127.0.0.2 with the host's port: a Host the host accepts.
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0", "--allow-host", PROXY_ADDRESS)
    with serving(monkeypatch, *args, until=LISTENING) as (process, found, state):
        token = cli("serve", "--show-token").stdout.strip()
        token_file = home / "host.token"
        token_file.write_text(token + "\n")
        yield found.group(1).decode(), token, token_file, process


def test_cuts_during_streaming_turns_lose_and_double_nothing(
    remote_host: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, token, token_file, _ = remote_host
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    rng = random.Random(29)

    async def scenario() -> None:
        proxy = FaultProxy(port)
        await proxy.start(PROXY_ADDRESS, port)
        cli(
            "agents",
            "add",
            "far",
            "--url",
            f"ws://{PROXY_ADDRESS}:{port}/acp/demo",
            "--token-file",
            str(token_file),
        )
        async with editor("far") as client:
            await client.request(acp_names.INITIALIZE, {"protocolVersion": 1})
            proxy.cut()  # idle, before any session
            new = await client.request(acp_names.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
            session = new["result"]["sessionId"]
            answers = 0
            for turn in range(TURNS):
                # slow: 20 chunks 100 ms apart; cut twenty times while they stream
                prompt = client.request(
                    acp_names.SESSION_PROMPT,
                    {"sessionId": session, "prompt": [{"type": "text", "text": f"slow {turn}"}]},
                )
                task = asyncio.ensure_future(prompt)
                for _ in range(CUTS_PER_TURN):
                    await asyncio.sleep(rng.uniform(0.02, 0.16))
                    proxy.cut(mid_frame=rng.random() < 0.3)
                answer = await asyncio.wait_for(task, 60)
                assert "result" in answer, answer
                assert answer["result"]["stopReason"] == "end_turn", answer
                answers += 1
            received = updates_of(client.messages, session)
            prompt_answers = [
                m for m in client.messages if "result" in m and "stopReason" in m["result"]
            ]
        await proxy.stop()
        history = await host_history(url, token, session)
        assert proxy.cuts >= 100, proxy.cuts
        assert answers == len(prompt_answers) == TURNS  # every prompt answered exactly once
        assert received == history  # 0 lost, 0 doubled, in order
        assert all(f"slow {turn}" in texts_of(received) for turn in range(TURNS))

    asyncio.run(scenario())
