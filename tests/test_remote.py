"""Issue 29: remote agents. The editor is a raw JSON-RPC client on the stdio of a real
`acpctl run --acp --agent NAME`, whose agent is remote: an `acpctl serve` (a real process on
127.0.0.1, the demo agent behind it) reached through a TCP proxy that cuts the connection
at chosen and random moments; the Python SDK's own server under uvicorn; a TLS listener;
a real sshd."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
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


@dataclass
class RemoteHost:
    url: str
    token: str
    token_file: Path
    process: subprocess.Popen[bytes]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])


@pytest.fixture
def remote_host(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RemoteHost]:
    # The fault proxy listens on 127.0.0.2 with the host's port: a Host the host accepts.
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0", "--allow-host", PROXY_ADDRESS)
    with serving(monkeypatch, *args, until=LISTENING) as (process, found, _):
        token = cli("serve", "--show-token").stdout.strip()
        token_file = home / "host.token"
        token_file.write_text(token + "\n")
        yield RemoteHost(found.group(1).decode(), token, token_file, process)


def test_cuts_during_streaming_turns_lose_and_double_nothing(
    remote_host: RemoteHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, token, token_file, port = (
        remote_host.url,
        remote_host.token,
        remote_host.token_file,
        remote_host.port,
    )
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


def add_remote(name: str, **table: Any) -> None:
    """[agents.NAME] written as a user writes it."""
    import tomlkit

    from acpctl import paths

    path = paths.config_file()
    document = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
    agents = document.setdefault("agents", tomlkit.table(is_super_table=True))
    agents[name] = table
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(document))


async def new_session(client: RawClient) -> str:
    await client.request(acp_names.INITIALIZE, {"protocolVersion": 1})
    new = await client.request(acp_names.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
    assert "result" in new, new
    return str(new["result"]["sessionId"])


def prompt_of(session: str, text: str) -> dict[str, Any]:
    return {"sessionId": session, "prompt": [{"type": "text", "text": text}]}


def test_streamable_http_through_cuts(remote_host: RemoteHost) -> None:
    """The same link over ACP's Streamable HTTP profile: POSTs, and SSE streams resumed
    with Last-Event-ID after each cut."""
    url, token, token_file, port = (
        remote_host.url,
        remote_host.token,
        remote_host.token_file,
        remote_host.port,
    )
    rng = random.Random(7)

    async def scenario() -> None:
        proxy = FaultProxy(port)
        await proxy.start(PROXY_ADDRESS, port)
        add_remote("far", url=f"http://{PROXY_ADDRESS}:{port}/acp/demo", token_file=str(token_file))
        async with editor("far") as client:
            session = await new_session(client)
            for turn in range(2):
                task = asyncio.ensure_future(
                    client.request(acp_names.SESSION_PROMPT, prompt_of(session, f"slow {turn}"))
                )
                for _ in range(8):
                    await asyncio.sleep(rng.uniform(0.05, 0.2))
                    proxy.cut(mid_frame=rng.random() < 0.3)
                answer = await asyncio.wait_for(task, 60)
                assert answer.get("result", {}).get("stopReason") == "end_turn", answer
            received = updates_of(client.messages, session)
        await proxy.stop()
        assert proxy.cuts >= 16
        assert received == await host_history(url, token, session)

    asyncio.run(scenario())


def test_a_permission_request_waiting_through_a_cut_is_answered_once(
    remote_host: RemoteHost,
) -> None:
    token_file, port = remote_host.token_file, remote_host.port

    async def scenario() -> None:
        proxy = FaultProxy(port)
        await proxy.start(PROXY_ADDRESS, port)
        add_remote("far", url=f"ws://{PROXY_ADDRESS}:{port}/acp/demo", token_file=str(token_file))
        async with editor("far") as client:
            session = await new_session(client)
            prompt = {"jsonrpc": "2.0", "id": 7, "method": acp_names.SESSION_PROMPT}
            await client.send({**prompt, "params": prompt_of(session, "edit")})
            asked = await client.until(lambda m: m.get("method") == acp_names.REQUEST_PERMISSION)
            proxy.refusing = True
            proxy.cut()  # the answer is given while the link is down
            option = asked["params"]["options"][0]["optionId"]
            await client.send(
                {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": option}},
                }
            )
            await asyncio.sleep(0.5)
            proxy.refusing = False
            answer = await client.until(lambda m: m.get("id") == 7 and "method" not in m, 30)
            assert answer["result"]["stopReason"] == "end_turn", answer
            asks = [m for m in client.messages if m.get("method") == acp_names.REQUEST_PERMISSION]
            assert len(asks) == 1
            done = [
                u
                for u in updates_of(client.messages, session)
                if u.get("sessionUpdate") == "tool_call_update" and u.get("status") == "completed"
            ]
            assert done, updates_of(client.messages, session)
        await proxy.stop()

    asyncio.run(scenario())


def test_an_outage_past_the_limit_fails_the_prompt_and_the_next_one_reconnects(
    remote_host: RemoteHost,
) -> None:
    """outage_limit_s is 2 here (300 by default): the prompt waiting through the outage
    fails, saying since when the link is down; the session is still there after."""
    token_file, port = remote_host.token_file, remote_host.port

    async def scenario() -> None:
        proxy = FaultProxy(port)
        await proxy.start(PROXY_ADDRESS, port)
        add_remote(
            "far",
            url=f"ws://{PROXY_ADDRESS}:{port}/acp/demo",
            token_file=str(token_file),
            outage_limit_s=2,
        )
        async with editor("far") as client:
            session = await new_session(client)
            proxy.refusing = True
            proxy.cut()
            failed = await client.request(acp_names.SESSION_PROMPT, prompt_of(session, "hello"))
            assert failed["error"]["code"] == -32010, failed
            assert "is down since" in failed["error"]["message"]
            proxy.refusing = False
            answer = await client.request(acp_names.SESSION_PROMPT, prompt_of(session, "again"))
            assert answer["result"]["stopReason"] == "end_turn", answer
            assert "again" in texts_of(updates_of(client.messages, session))
        await proxy.stop()

    asyncio.run(scenario())


def test_a_host_that_lost_the_connection_is_reloaded_without_doubling(
    remote_host: RemoteHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host restarts: it no longer holds the connection, so the link opens a new one,
    initializes it and loads the session again; the replay's updates the editor has are
    not shown twice, and the prompt sent before the restart fails rather than run twice."""
    url, token, token_file, port = (
        remote_host.url,
        remote_host.token,
        remote_host.token_file,
        remote_host.port,
    )

    async def scenario() -> None:
        add_remote("far", url=f"ws://127.0.0.1:{port}/acp/demo", token_file=str(token_file))
        async with editor("far") as client:
            session = await new_session(client)
            first = await client.request(acp_names.SESSION_PROMPT, prompt_of(session, "one"))
            assert first["result"]["stopReason"] == "end_turn"
            remote_host.process.kill()
            remote_host.process.wait()
            args = ("--listen", f"127.0.0.1:{port}", "--idle-stop", "0")
            with serving(monkeypatch, *args, until=LISTENING):
                second = await client.request(acp_names.SESSION_PROMPT, prompt_of(session, "two"))
                assert second["result"]["stopReason"] == "end_turn", second
                received = updates_of(client.messages, session)
                history = await host_history(url, token, session)
        assert received == history

    asyncio.run(scenario())
