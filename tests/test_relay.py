"""Issue 4: `acpctl run --acp` driven by the SDK's client, with real agents behind it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from acp import text_block
from acp.connection import StreamDirection, StreamEvent

from tests.acp_peer import connect, initialized
from tests.conftest import TEST_AGENTS, acpctl_argv, run, run_cli, write_executable

pytestmark = pytest.mark.e2e


def test_initialize_relays_agent_info_and_adds_history_capabilities(way: str, home: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, _):
            response = await initialized(conn)
            assert response.agent_info.name == "acpctl-demo"
            caps = response.agent_capabilities
            assert caps.load_session is True
            assert caps.prompt_capabilities.embedded_context is True
            session_caps = caps.session_capabilities
            for name in ("list", "resume", "close", "delete"):
                assert getattr(session_caps, name) is not None, name

    run(scenario())


def test_prompt_streams_thought_plan_and_answer(way: str, home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            result = await conn.prompt(
                session_id=session.session_id, prompt=[text_block("think and plan hello")]
            )
            assert result.stop_reason == "end_turn"
            kinds = client.kinds(session.session_id)
            assert kinds[0] == "agent_thought_chunk" and "plan" in kinds
            assert client.text(session.session_id) == "You said: think and plan hello"

    run(scenario())


def test_many_sessions_interleave_without_crosstalk(way: str, home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            sessions = [
                (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                for _ in range(6)
            ]
            results = await asyncio.gather(
                *(
                    conn.prompt(session_id=s, prompt=[text_block(f"session number {i} " * 30)])
                    for i, s in enumerate(sessions)
                )
            )
            assert all(r.stop_reason == "end_turn" for r in results)
            for i, s in enumerate(sessions):
                assert client.text(s) == "You said: " + " ".join([f"session number {i}"] * 30)

    run(scenario())


def test_prompts_queue_per_session_and_cancel_ends_them_all(
    way: str, home: Path, tmp_path: Path
) -> None:
    """Issue 14: a prompt to a busy session waits its turn (the demo agent does not queue
    prompts itself); cancel ends the running prompt and the queued ones."""

    queued_sent = asyncio.Event()

    def sent(event: StreamEvent) -> None:
        if event.direction == StreamDirection.OUTGOING and "later" in json.dumps(event.message):
            queued_sent.set()

    async def scenario() -> None:
        async with connect(observers=[sent]) as (conn, _, client):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("hello")]))
            second = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("there")]))
            assert (await first).stop_reason == "end_turn"
            assert (await second).stop_reason == "end_turn"
            assert client.text(sid) == "You said: helloYou said: there"  # in order, whole
            slow = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slow")]))
            await client.streaming(sid, 3)
            queued = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("later")]))
            await asyncio.wait_for(queued_sent.wait(), 30)  # the cancel goes out after it
            await conn.cancel(session_id=sid)
            assert (await slow).stop_reason == "cancelled"
            assert (await queued).stop_reason == "cancelled"
            assert "later" not in client.text(sid)

    run(scenario())


def test_cancel_reaches_only_its_session(way: str, home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            a = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            b = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            pa = asyncio.create_task(conn.prompt(session_id=a, prompt=[text_block("slow a")]))
            pb = asyncio.create_task(conn.prompt(session_id=b, prompt=[text_block("slow b")]))
            await client.streaming(a, 2)
            await conn.cancel(session_id=a)
            ra, rb = await pa, await pb
            assert ra.stop_reason == "cancelled" and rb.stop_reason == "end_turn"
            assert len(client.updates[a]) < len(client.updates[b]) == 20

    run(scenario())


def test_permission_requests_are_routed_to_their_session(
    way: str, home: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            a = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            b = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            client.answers = {a: "allow", b: "reject"}
            await asyncio.gather(
                conn.prompt(session_id=a, prompt=[text_block("edit a")]),
                conn.prompt(session_id=b, prompt=[text_block("edit b")]),
            )
            assert sorted(s for s, _ in client.permission_requests) == sorted([a, b])

            def final_status(sid: str) -> str:
                updates = client.updates[sid]
                return str(
                    [u for u in updates if u.session_update == "tool_call_update"][-1].status
                )

            assert final_status(a) == "completed" and final_status(b) == "failed"
            diff = next(u for u in client.updates[a] if u.session_update == "tool_call")
            assert diff.content[0].new_text == "hello, world\n"

    run(scenario())


def test_cancel_settles_open_permission_request(way: str, home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, client):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            client.answers = {sid: "hold"}
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("edit")]))
            await asyncio.wait_for(client.permission_asked.wait(), 10)
            await conn.cancel(session_id=sid)
            assert (await turn).stop_reason == "cancelled"

    run(scenario())


def test_agent_crash_fails_prompt_then_restarts(way: str, home: Path, tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.log"

    async def scenario() -> None:
        async with connect(stderr_file=stderr) as (conn, process, client):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            if way == "direct":
                agent_before = psutil.Process(process.pid).children()[0]
            else:
                from acpctl.remote.host_socket import read_status

                status = await read_status()
                assert status is not None
                agent_before = psutil.Process(status["agents"][0]["agentPid"])
            with pytest.raises(Exception) as failure:
                await conn.prompt(session_id=sid, prompt=[text_block("crash now")])
            assert "exited with status 3" in str(failure.value.args) + str(failure.value)
            assert not agent_before.is_running() or agent_before.status() == "zombie"
            again = await conn.prompt(session_id=sid, prompt=[text_block("still here")])
            assert again.stop_reason == "end_turn"
            assert client.text(sid).endswith("You said: still here")

    run(scenario())
    log = stderr.read_text()  # through the host too: the host sends the agent's log lines
    assert "crashing on request" in log and "restarting the agent" in log


def test_stderr_goes_to_the_run_log(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, _):
            await initialized(conn)

    run(scenario())
    logs = list((home / "state" / "logs").glob("demo-*.log"))
    assert len(logs) == 1
    assert "agent stderr: acpctl demo agent" in logs[0].read_text()
    assert oct(logs[0].stat().st_mode & 0o777) == oct(0o600)


def test_sdk_agent_behind_acpctl(way: str, home: Path, tmp_path: Path) -> None:
    agent = write_executable(
        tmp_path / "sdk-agent", f"#!/bin/sh\nexec {sys.executable} {TEST_AGENTS / 'sdk_agent.py'}\n"
    )
    assert run_cli("agents", "add", "sdk", "--", str(agent)).returncode == 0

    async def scenario() -> None:
        async with connect("--agent", "sdk") as (conn, _, client):
            response = await initialized(conn)
            assert response.agent_info.name == "sdk-test-agent"
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            result = await conn.prompt(session_id=sid, prompt=[text_block("ask me")])
            assert result.stop_reason == "end_turn"
            assert client.text(sid) == "sdk: ask me [selected]"

    run(scenario())


def test_teardown_ends_the_whole_agent_tree(home: Path, tmp_path: Path) -> None:
    # The agent leaves a child that ignores SIGTERM: it must still be gone afterwards.
    agent = write_executable(
        tmp_path / "stubborn",
        (f"#!/bin/sh\n(trap '' TERM; sleep 300) &\nexec {sys.executable} -m acpctl.demo_agent\n"),
    )
    assert run_cli("agents", "add", "stubborn", "--", str(agent)).returncode == 0
    tree: list[psutil.Process] = []
    names: list[str] = []

    async def scenario() -> None:
        async with connect("--agent", "stubborn") as (conn, process, client):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            # The connection closes with a prompt in flight.
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[text_block("slow")]))
            await client.streaming(sid)  # the agent (and the child it left) are up
            tree.extend(psutil.Process(process.pid).children(recursive=True))
            names.extend(p.name() for p in tree)
            process.terminate()  # SIGTERM to acpctl, as an editor does
            result = await turn
            assert result.stop_reason == "cancelled"
            assert await process.wait() == 0

    run(scenario())
    assert len(tree) >= 2 and "sleep" in names  # the agent and its stubborn child
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in tree):
        time.sleep(0.1)
    assert not [p for p in tree if _alive(p)]


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def test_runtime_record_and_ps(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, process, _):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            listed = json.loads(run_cli("ps", "--json").stdout)
            assert [r["pid"] for r in listed] == [process.pid]
            assert listed[0]["agent"] == "demo" and listed[0]["sessions"] == [sid]
            assert listed[0]["rss"] > 0

    run(scenario())
    assert json.loads(run_cli("ps", "--json").stdout) == []


def test_terminal_on_stdin_gets_a_hint(home: Path) -> None:
    import pty

    _leader, follower = pty.openpty()
    result = subprocess.run(
        acpctl_argv("run", "--acp"), stdin=follower, capture_output=True, text=True, timeout=20
    )
    assert result.returncode == 2 and "acpctl install zed" in result.stderr
    assert result.stdout == ""


class RawPeer:
    """Line-level access to acpctl for malformed input the SDK would never send."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            acpctl_argv("run", "--acp"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def receive(self) -> object:
        assert self.process.stdout is not None
        return json.loads(self.process.stdout.readline())

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        return self.process.wait(20)


def test_bad_input_gets_jsonrpc_errors_and_service_continues(way: str, home: Path) -> None:
    peer = RawPeer()
    try:
        peer.send(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
        )
        assert peer.receive()["id"] == 1  # type: ignore[index]
        cases = [
            (b"{not json\n", -32700, None),
            (b'{"jsonrpc":"2.0","id":"\xff\xfe"}\n', -32700, None),
            (b'{"jsonrpc":"2.0","id":7}\n', -32600, 7),
            (b'{"jsonrpc":"2.0","id":8,"method":42}\n', -32600, 8),
            (b'"just a string"\n', -32600, None),
            (b'{"jsonrpc":"2.0","id":9,"method":"no/such/method","params":{}}\n', -32601, 9),
            (
                b'{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":'
                b'"nope","prompt":[]}}\n',
                -32002,
                10,
            ),
            (
                b'{"jsonrpc":"2.0","id":11,"method":"session/load","params":{"sessionId":'
                b'"../../etc","cwd":"/","mcpServers":[]}}\n',
                -32602,
                11,
            ),
            (b"[]\n", -32600, None),
        ]
        for line, code, msg_id in cases:
            peer.send(line)
            answer = peer.receive()
            assert isinstance(answer, dict), line
            assert answer["error"]["code"] == code, (line, answer)
            assert answer["id"] == msg_id
        big = (
            b'{"jsonrpc":"2.0","id":12,"method":"_demo/ping","params":{"pad":"'
            + b"x" * (10 * 1024 * 1024)
            + b'"}}\n'
        )
        peer.send(big)
        assert peer.receive() == {"jsonrpc": "2.0", "id": 12, "result": {}}
        peer.send(
            b'[{"jsonrpc":"2.0","id":13,"method":"_demo/ping"},'
            b'{"jsonrpc":"2.0","id":14,"method":"nope"}]\n'
        )
        batch = peer.receive()
        assert isinstance(batch, list)
        assert {a["id"] for a in batch} == {13, 14}
        peer.send(
            b'{"jsonrpc":"2.0","id":15,"method":"session/new","params":'
            b'{"cwd":"/tmp","mcpServers":[]}}\n'
        )
        assert "sessionId" in peer.receive()["result"]  # type: ignore[index]
    finally:
        assert peer.close() == 0


def test_extension_methods_and_meta_pass_through(way: str, home: Path, tmp_path: Path) -> None:
    peer = RawPeer()
    try:
        peer.send(
            b'{"jsonrpc":"2.0","id":"a","method":"initialize","params":'
            b'{"protocolVersion":1,"_meta":{"x":1}}}\n'
        )
        assert peer.receive()["id"] == "a"  # type: ignore[index]
        peer.send(b'{"jsonrpc":"2.0","id":"b","method":"_demo/ping","params":{"_meta":{}}}\n')
        assert peer.receive() == {"jsonrpc": "2.0", "id": "b", "result": {}}
    finally:
        peer.close()


def test_restarts_are_limited(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with connect() as (conn, _, _):
            await initialized(conn)
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            messages = []
            for _ in range(7):
                with pytest.raises(Exception) as failure:
                    await conn.prompt(session_id=sid, prompt=[text_block("crash")])
                messages.append(str(failure.value))
            assert "exited with status 3" in messages[0]
            assert "crashed 5 times in the last minute" in messages[-1]

    run(scenario())
