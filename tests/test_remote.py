"""Issue 29: remote agents. The editor is a raw JSON-RPC client on the stdio of a real
`acpctl run --acp --agent NAME`, whose agent is remote: an `acpctl serve` (a real process on
127.0.0.1, the demo agent behind it) reached through a TCP proxy that cuts the connection
at chosen and random moments; the Python SDK's own server under uvicorn; a TLS listener;
a real sshd."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from acpctl import __version__
from acpctl import protocol as acp_names
from acpctl.store.sessions import SessionStore
from tests.conftest import cli, run_cli
from tests.fault_proxy import FaultProxy
from tests.raw_peer import RawEditor, raw_editor
from tests.test_host import LISTENING, RawClient, self_signed, serving, unix_client

pytestmark = pytest.mark.e2e
PROXY_ADDRESS = "127.0.0.2"
TURNS, CUTS_PER_TURN = 4, 28


@asynccontextmanager
async def editor(agent: str, log: Path | None = None) -> AsyncIterator[RawEditor]:
    """`acpctl run --acp --agent AGENT`, as an editor starts it, with a raw client on its
    stdio (its stderr to `log` when given)."""
    async with raw_editor("--agent", agent, log=log) as client:
        yield client


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
        loader = RawClient(socket)
        await loader.request(acp_names.INITIALIZE, {"protocolVersion": 1})
        as_recorded = {acp_names.REPLAY_META: acp_names.REPLAY_AS_RECORDED}
        load = {"sessionId": session, "cwd": "/tmp", "mcpServers": [], "_meta": as_recorded}
        answer = await loader.request(acp_names.SESSION_LOAD, load)
        assert "result" in answer, answer
        return updates_of(loader.messages, session)


@dataclass
class RemoteHost:
    url: str
    token: str
    token_file: Path
    process: subprocess.Popen[bytes]

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    async def cutting_proxy(self, scheme: str = "ws", **table: Any) -> FaultProxy:
        """A FaultProxy in front of the host, and the agent `far` (the host's demo agent)
        reached through it."""
        proxy = FaultProxy(self.port)
        await proxy.start(PROXY_ADDRESS, self.port)
        url = f"{scheme}://{PROXY_ADDRESS}:{self.port}/acp/demo"
        add_remote("far", url=url, token_file=str(self.token_file), **table)
        return proxy


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
    url, token = remote_host.url, remote_host.token
    rng = random.Random(29)

    async def scenario() -> None:
        proxy = await remote_host.cutting_proxy()
        proxy.cut_next(after_bytes=1)  # during initialize: after the upgrade, before it
        async with editor("far") as client:
            await client.call(acp_names.INITIALIZE, {"protocolVersion": 1})
            proxy.cut()  # idle, before any session
            new = await client.call(acp_names.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
            session = new["result"]["sessionId"]
            answers = 0
            for turn in range(TURNS):
                # slow: 20 chunks 100 ms apart; cut 28 times while they stream
                prompt = client.call(
                    acp_names.SESSION_PROMPT,
                    {"sessionId": session, "prompt": [{"type": "text", "text": f"slow {turn}"}]},
                )
                task = asyncio.ensure_future(prompt)
                for _ in range(CUTS_PER_TURN):
                    await asyncio.sleep(rng.uniform(0.02, 0.12))
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


async def new_session(client: RawEditor) -> str:
    await client.call(acp_names.INITIALIZE, {"protocolVersion": 1})
    new = await client.call(acp_names.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
    assert "result" in new, new
    return str(new["result"]["sessionId"])


def prompt_of(session: str, text: str) -> dict[str, Any]:
    return {"sessionId": session, "prompt": [{"type": "text", "text": text}]}


def test_streamable_http_through_cuts(remote_host: RemoteHost) -> None:
    """The same link over ACP's Streamable HTTP profile: POSTs, and SSE streams resumed
    with Last-Event-ID after each cut."""
    url, token = remote_host.url, remote_host.token
    rng = random.Random(7)

    async def scenario() -> None:
        proxy = await remote_host.cutting_proxy("http")
        async with editor("far") as client:
            session = await new_session(client)
            for turn in range(2):
                task = asyncio.ensure_future(
                    client.call(acp_names.SESSION_PROMPT, prompt_of(session, f"slow {turn}"))
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
    async def scenario() -> None:
        proxy = await remote_host.cutting_proxy()
        async with editor("far") as client:
            session = await new_session(client)
            prompt = {"jsonrpc": "2.0", "id": 7, "method": acp_names.SESSION_PROMPT}
            client.send({**prompt, "params": prompt_of(session, "edit")})
            asked = await client.wait_for(lambda m: m.get("method") == acp_names.REQUEST_PERMISSION)
            proxy.refusing = True
            proxy.cut()  # the answer is given while the link is down
            option = asked["params"]["options"][0]["optionId"]
            client.send(
                {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": option}},
                }
            )
            await proxy.until(lambda: proxy.refused >= 1)  # the link tried: the answer waits
            proxy.refusing = False
            answer = await client.wait_for(lambda m: m.get("id") == 7 and "method" not in m, 30)
            assert answer["result"]["stopReason"] == "end_turn", answer
            listed = await asyncio.to_thread(cli, "ps", "--json")  # the link is a run, as any
            runs = json.loads(listed.stdout)
            link = [r for r in runs if r.get("agent") == "far"]
            assert link and link[0]["sessions"] == [session], runs
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

    async def scenario() -> None:
        proxy = await remote_host.cutting_proxy(outage_limit_s=2)
        async with editor("far") as client:
            session = await new_session(client)
            proxy.refusing = True
            proxy.cut()
            failed = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "hello"))
            assert failed["error"]["code"] == -32010, failed
            assert "is down since" in failed["error"]["message"]
            proxy.refusing = False
            answer = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "again"))
            assert answer["result"]["stopReason"] == "end_turn", answer
            assert "again" in texts_of(updates_of(client.messages, session))
        await proxy.stop()

    asyncio.run(scenario())
    # doctor reads the run's log: the drop, why, and that it outlasted the limit
    found = json.loads(cli("doctor", "--agent", "far", "--json").stdout)
    link = [f for f in found if f["check"] == "agent far" and "dropped" in f["message"]]
    assert link and link[0]["status"] == "warning", found
    assert "past the outage limit" in link[0]["message"]


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
            first = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "one"))
            assert first["result"]["stopReason"] == "end_turn"
            remote_host.process.kill()
            remote_host.process.wait()
            args = ("--listen", f"127.0.0.1:{port}", "--idle-stop", "0")
            with serving(monkeypatch, *args, until=LISTENING):
                second = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "two"))
                assert "result" in second, second
                assert second["result"]["stopReason"] == "end_turn", second
                received = updates_of(client.messages, session)
                history = await host_history(url, token, session)
        assert received == history

    asyncio.run(scenario())


def test_tls_verified_against_the_named_ca_and_a_wrong_certificate_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = self_signed(tmp_path, days=30)
    other, _ = self_signed(tmp_path, "-other", days=30)
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    wss = re.compile(rb"listening on (wss://127\.0\.0\.1:\d+/acp)")
    with serving(monkeypatch, "--listen", "127.0.0.1:0", *tls, until=wss) as (_, found, _):
        url = found.group(1).decode() + "/demo"
        token_file = tmp_path / "token"
        token_file.write_text(cli("serve", "--show-token").stdout)
        add_remote("trusted", url=url, token_file=str(token_file), ca_file=str(cert))
        add_remote("wrong", url=url, token_file=str(token_file), ca_file=str(other))
        add_remote("system", url=url, token_file=str(token_file))

        async def scenario() -> None:
            async with editor("trusted") as client:
                session = await new_session(client)
                answer = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "hi"))
                assert answer["result"]["stopReason"] == "end_turn"
            for refused in ("wrong", "system"):
                async with editor(refused) as client:
                    answer = await client.call(acp_names.INITIALIZE, {"protocolVersion": 1})
                    assert "certificate" in answer["error"]["message"], answer

        asyncio.run(scenario())
        for agent, status, said in (
            ("trusted", "ok", "certificate verified, valid until"),
            ("trusted", "ok", f"acpctl {__version__} there, token accepted"),
            ("wrong", "problem", "certificate"),
        ):
            found = json.loads(cli("doctor", "--agent", agent, "--json").stdout)
            mine = [f for f in found if f["check"] == f"agent {agent}"]
            assert any(f["status"] == status and said in f["message"] for f in mine), mine
        # Issue 53, 5: a certificate the system's CAs do not trust (a self-signed one) is
        # fixed with --ca-file, and the fix says so.
        found = json.loads(cli("doctor", "--agent", "system", "--json").stdout)
        refused, *_ = [
            f for f in found if f["check"] == "agent system" and "certificate" in f["message"]
        ]
        assert "--ca-file" in refused["fix"] and "acpctl agents add system" in refused["fix"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_an_independent_remote_the_sdk_server_under_uvicorn(
    home: Path, tmp_path: Path, scheme: str
) -> None:
    """The ACP Python SDK's own server app (WebSocket and Streamable HTTP), an SDK agent
    behind it. It resumes no connection, so a cut makes the link open a new one and load
    the session again (the agent remembers its prompts in a directory)."""
    port = free_port()
    env = {**os.environ, "SDK_AGENT_LOAD": "1", "SDK_AGENT_STATE": str(tmp_path)}
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.agents.sdk_http_server", str(port)],
        cwd=Path(__file__).parent.parent,
        env=env,
    )
    try:
        wait_for_port(port)

        async def scenario() -> None:
            proxy = FaultProxy(port)
            await proxy.start()
            add_remote("sdk", url=f"{scheme}://127.0.0.1:{proxy.port}/acp")
            async with editor("sdk") as client:
                session = await new_session(client)
                first = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "one"))
                assert first["result"]["stopReason"] == "end_turn", first
                if scheme == "ws":
                    # Not over HTTP: the SDK's HTTP server knows a session on a connection
                    # only from an answer that names it, which session/load's does not, so
                    # it refuses a prompt after a reload there (404, unknown session).
                    connected = proxy.accepted
                    proxy.cut()
                    # A prompt sent before the link saw the drop may have reached the
                    # server, and is never sent twice: this one goes once the link is
                    # back.
                    await proxy.until(lambda: proxy.accepted > connected)
                second = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "two"))
                assert "result" in second, second
                assert second["result"]["stopReason"] == "end_turn", second
                said = texts_of(updates_of(client.messages, session))
                assert said.count("sdk: one") == 1 and said.count("sdk: two") == 1, said
            # Issue 43, 8: load, resume and fork through the link, each answered in time.
            # (The SDK's server app does not turn on the unstable protocol, so its agent
            # refuses resume and fork itself: that refusal is the answer relayed.)
            opening = {"cwd": "/tmp", "mcpServers": [], "sessionId": session}
            async with editor("sdk") as client:
                await client.call(acp_names.INITIALIZE, {"protocolVersion": 1})
                loaded = await client.call(acp_names.SESSION_LOAD, opening, timeout=15)
                assert "result" in loaded, loaded
                said = texts_of(updates_of(client.messages, session))
                assert said.count("sdk: one") == 1 and said.count("sdk: two") == 1, said
                for method in (acp_names.SESSION_RESUME, acp_names.SESSION_FORK):
                    answer = await client.call(method, opening, timeout=15)
                    assert answer.get("error", {}).get("code") == -32601, (method, answer)
            await proxy.stop()

        asyncio.run(scenario())
    finally:
        server.terminate()
        try:
            server.wait(3)
        except subprocess.TimeoutExpired:  # uvicorn waits for its open streams
            server.kill()
            server.wait()


def wait_for_port(port: int) -> None:
    for _ in range(200):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


@dataclass
class Sshd:
    """A real sshd on 127.0.0.1 (Debian's openssh-server), with a host key and an
    authorized key made for the test, and a client config that reaches it as `remote`.
    Its sessions get a state directory of their own: the remote acpctl's."""

    config: Path
    remote_state: Path


@pytest.fixture
def sshd(home: Path, tmp_path: Path) -> Iterator[Sshd]:
    binary = Path("/usr/sbin/sshd")
    if not binary.exists() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("openssh-server and its client are not installed (.ci/run installs them)")
    if not Path("/run/sshd").is_dir():
        pytest.skip("sshd needs its privilege separation directory /run/sshd (.ci/run makes it)")
    for key in ("host", "user"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / key)],
            check=True,
        )
    port = free_port()
    remote = Path(tempfile.mkdtemp(prefix="acpr", dir="/tmp"))  # short: a socket lives there
    environment = " ".join(
        f"ACPCTL_{name}_DIR={remote / name.lower()}" for name in ("CONFIG", "DATA", "STATE")
    )
    server_config = tmp_path / "sshd_config"
    server_config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp_path / 'host'}\n"
        f"AuthorizedKeysFile {tmp_path / 'user.pub'}\nStrictModes no\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        f"KbdInteractiveAuthentication no\nUsePAM no\nPidFile {tmp_path / 'sshd.pid'}\n"
        f"SetEnv {environment}\n"
    )
    host_key = (tmp_path / "host.pub").read_text().split()
    (tmp_path / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    client_config = tmp_path / "ssh_config"
    client_config.write_text(
        f"Host remote\n  HostName 127.0.0.1\n  Port {port}\n"
        f"  User {os.environ.get('USER', 'root')}\n"
        f"  IdentityFile {tmp_path / 'user'}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {tmp_path / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
    )
    server = subprocess.Popen([str(binary), "-D", "-e", "-f", str(server_config)])
    try:
        wait_for_port(port)
        yield Sshd(client_config, remote / "state")
    finally:
        server.terminate()
        server.wait(10)
        for process in psutil.process_iter(["cmdline"]):  # the host the bridge started there
            cmdline = process.info["cmdline"] or []
            # `acpctl host start --exit-when-idle` (`serve` before the host group): it would
            # outlive the suite for ten idle minutes, its agent with it.
            started = "serve" in cmdline or ("host" in cmdline and "start" in cmdline)
            if started and "--exit-when-idle" in cmdline:
                with contextlib.suppress(psutil.Error):
                    if process.environ().get("ACPCTL_STATE_DIR") == str(remote / "state"):
                        agents = process.children(recursive=True)
                        for gone in (process, *agents):
                            gone.kill()
        shutil.rmtree(remote, ignore_errors=True)


def ssh_children(client: RawEditor) -> list[psutil.Process]:
    run_acp = psutil.Process(client.process.pid)
    return [p for p in run_acp.children(recursive=True) if p.name() == "ssh"]


def test_over_ssh_a_killed_ssh_mid_turn_is_reconnected_and_the_turn_completes(
    sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ssh carries the link to `acpctl serve --bridge` on the remote, which starts a host
    there; ssh killed in the middle of a streaming turn is started again, the connection
    resumed, and the turn ends as if nothing happened."""
    remote_acpctl = f"{sys.executable} -m acpctl"
    add_remote(
        "box",
        ssh="remote",
        remote_agent="demo",
        remote_acpctl=remote_acpctl,
        ssh_args=["-F", str(sshd.config)],
    )

    async def scenario() -> None:
        async with editor("box") as client:
            session = await new_session(client)
            client.send(
                {
                    "jsonrpc": "2.0",
                    "id": 9,
                    "method": acp_names.SESSION_PROMPT,
                    "params": prompt_of(session, "slow over ssh"),
                }
            )
            await client.wait_for(lambda m: m.get("method") == acp_names.SESSION_UPDATE)
            killed = ssh_children(client)
            assert len(killed) == 1
            killed[0].kill()
            answer = await client.wait_for(lambda m: m.get("id") == 9 and "method" not in m, 30)
            assert answer["result"]["stopReason"] == "end_turn", answer
            assert ssh_children(client) and ssh_children(client)[0].pid != killed[0].pid
            received = updates_of(client.messages, session)
        # The remote host's history, read on its own unix socket.
        here = os.environ["ACPCTL_STATE_DIR"]
        monkeypatch.setenv("ACPCTL_STATE_DIR", str(sshd.remote_state))
        async with unix_client("demo") as remote:
            await remote.request(acp_names.INITIALIZE, {"protocolVersion": 1})
            as_recorded = {acp_names.REPLAY_META: acp_names.REPLAY_AS_RECORDED}
            load = {"sessionId": session, "cwd": "/tmp", "mcpServers": [], "_meta": as_recorded}
            assert "result" in await remote.request(acp_names.SESSION_LOAD, load)
            assert received and received == updates_of(remote.messages, session)
        monkeypatch.setenv("ACPCTL_STATE_DIR", here)

    asyncio.run(scenario())
    # doctor: the remote answers over ssh, and the run's log tells of the drop
    found = json.loads(cli("doctor", "--agent", "box", "--json").stdout)
    mine = [f for f in found if f["check"] == "agent box" and f["status"] == "ok"]
    assert any(f"acpctl {__version__} there" in f["message"] for f in mine), mine
    assert any("dropped 1 time(s)" in f["message"] for f in mine), mine
    assert not any("token" in f["message"] for f in mine), mine  # ssh has no token (issue 45)


def test_over_ssh_a_missing_remote_acpctl_is_said_in_one_line(sshd: Sshd) -> None:
    add_remote(
        "box",
        ssh="remote",
        remote_acpctl="/nonexistent/acpctl",
        ssh_args=["-F", str(sshd.config)],
    )

    async def scenario() -> None:
        async with editor("box") as client:
            answer = await client.call(acp_names.INITIALIZE, {"protocolVersion": 1})
            message = answer["error"]["message"]
            assert "acpctl is not installed on remote" in message, message
            assert "pipx install acp-ctl" in message

    asyncio.run(scenario())
    found = json.loads(cli("doctor", "--agent", "box", "--json").stdout)
    mine = [f for f in found if f["check"] == "agent box"]
    assert mine and mine[0]["status"] == "problem", mine
    assert "acpctl is not installed on remote" in mine[0]["message"]


def nginx_conf(directory: Path, http: str) -> Path:
    """An nginx.conf in `directory` that keeps every file of nginx's there (run as root, in
    the foreground), with `http` as its http block's own lines."""
    conf = directory / "nginx.conf"
    conf.write_text(
        f"""
user root;
daemon off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log;
events {{ worker_connections 64; }}
http {{
    client_body_temp_path {directory}/body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
{http}
}}
"""
    )
    return conf


NGINX_AFFINITY = """
    log_format affinity '$request_method $uri cookie=$cookie_acp_affinity upstream=$upstream_addr';
    access_log {dir}/access.log affinity;
    map $cookie_acp_affinity $acp_affinity {{ "" $request_id; default $cookie_acp_affinity; }}
    map $http_upgrade $connection_upgrade {{ default upgrade; "" close; }}
    upstream acpctl {{
        hash $acp_affinity consistent;
        server 127.0.0.1:{first};
        server 127.0.0.1:{second};
    }}
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location /acp {{
            proxy_pass http://acpctl;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_read_timeout 1h;
            add_header Set-Cookie "acp_affinity=$acp_affinity; Path=/acp; Secure; HttpOnly" always;
        }}
    }}
"""


def test_behind_nginx_a_restarted_proxy_resumes_on_the_host_its_cookie_names(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """docs/remote.md's setup, with Debian's nginx: TLS ended by nginx, two hosts behind it
    picked by an affinity cookie. nginx restarted under a live link: the link comes back
    with the cookie it was given, so the resume reaches the host that holds the connection
    (resumed, not reloaded)."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists() or shutil.which("openssl") is None:
        pytest.skip("nginx (Debian's package; .ci/run installs it) or openssl is missing")
    cert, key = self_signed(tmp_path, days=30)
    port = free_port()
    hosts = []
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0", "--allow-host", "127.0.0.1")
    with contextlib.ExitStack() as stack:
        for _ in range(2):
            _, found, _ = stack.enter_context(serving(monkeypatch, *args, until=LISTENING))
            hosts.append(int(found.group(1).decode().rsplit(":", 1)[1].split("/")[0]))
        http = NGINX_AFFINITY.format(
            dir=tmp_path, first=hosts[0], second=hosts[1], port=port, cert=cert, key=key
        )
        conf = nginx_conf(tmp_path, http)

        def start_nginx() -> subprocess.Popen[bytes]:
            proxy = subprocess.Popen([nginx, "-p", str(tmp_path), "-c", str(conf)])
            wait_for_port(port)
            return proxy

        proxy = start_nginx()

        def stop_nginx() -> None:
            proxy.terminate()
            proxy.wait(10)

        stack.callback(stop_nginx)
        token_file = tmp_path / "token"
        token_file.write_text(cli("serve", "--show-token").stdout)
        add_remote(
            "lb",
            url=f"wss://127.0.0.1:{port}/acp/demo",
            token_file=str(token_file),
            ca_file=str(cert),
        )
        link_log = tmp_path / "link.log"

        async def scenario() -> None:
            nonlocal proxy
            async with editor("lb", link_log) as client:
                session = await new_session(client)
                first = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "one"))
                assert first["result"]["stopReason"] == "end_turn", first
                proxy.terminate()  # a restarted proxy: every connection through it ends
                proxy.wait(10)
                proxy = start_nginx()
                second = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "two"))
                assert second["result"]["stopReason"] == "end_turn", second

        asyncio.run(scenario())
        said = link_log.read_text()
        assert "(resumed)" in said and "could not resume" not in said, said
        # The link's first request had no cookie to send; what nginx logged after its
        # restart (it drops the log lines of connections it cuts) carries the one it set.
        requests = (tmp_path / "access.log").read_text().splitlines()
        cookies = {line.split("cookie=")[1].split()[0] for line in requests}
        assert requests and len(cookies) == 1 and "" not in cookies, requests


@pytest.mark.npm
@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_an_independent_remote_the_typescript_sdk_server(home: Path, scheme: str) -> None:
    """The TypeScript ACP SDK's own server (its experimental server and node adapters, on
    node's http server) with an SDK echo agent behind it, over WebSocket and Streamable
    HTTP: a turn through the link, then a load, a resume and a fork; and through the link
    (issue 43, 12), a resume's and a delete's own fields kept and the `archived` filter
    passed on (behind `run --acp`: tests/test_fidelity_e2e.py)."""
    from tests.npm_agents import NPM_DIR, install

    install()
    port = free_port()
    server = subprocess.Popen(["node", str(NPM_DIR / "ts_server.mjs"), str(port)], cwd=NPM_DIR)
    try:
        wait_for_port(port)
        add_remote("ts", url=f"{scheme}://127.0.0.1:{port}/acp")

        async def scenario() -> None:
            async with editor("ts") as client:
                session = await new_session(client)
                answer = await client.call(acp_names.SESSION_PROMPT, prompt_of(session, "hi"))
                assert answer["result"]["stopReason"] == "end_turn", answer
                assert texts_of(updates_of(client.messages, session)) == "ts: hi"
            # Issue 43, 8: the answers to load, resume and fork come (the server sends a
            # session's on its stream, which the link opens before it asks), in time.
            opening = {"cwd": "/tmp", "mcpServers": [], "sessionId": session}
            async with editor("ts") as client:
                await client.call(acp_names.INITIALIZE, {"protocolVersion": 1})
                loaded = await client.call(acp_names.SESSION_LOAD, opening, timeout=15)
                assert "result" in loaded, loaded
                await client.wait_for(
                    lambda m: texts_of(updates_of([m], session)) == "ts: hi", timeout=15
                )
                resumed = await client.call(acp_names.SESSION_RESUME, opening, timeout=15)
                assert "result" in resumed, resumed
                forked = await client.call(acp_names.SESSION_FORK, opening, timeout=15)
                fork = forked["result"]["sessionId"]
                again = await client.call(acp_names.SESSION_PROMPT, prompt_of(fork, "there"))
                assert again["result"]["stopReason"] == "end_turn", again
                assert texts_of(updates_of(client.messages, fork)) == "ts: there"
            async with editor("ts") as client:
                await client.call(acp_names.INITIALIZE, {"protocolVersion": 1})
                resumed = await client.call(acp_names.SESSION_RESUME, opening, timeout=15)
                assert resumed["result"]["_meta"]["ts/warm"] is True, resumed  # the agent's
                archived = await client.call(acp_names.SESSION_LIST, {"archived": "only"})
                listed = archived["result"]["sessions"]
                assert [s["sessionId"] for s in listed] == ["ts-archived"], listed
                deleted = await client.call(acp_names.SESSION_DELETE, {"sessionId": fork})
                assert deleted["result"] == {"_meta": {"ts/freed": 1}}, deleted

        asyncio.run(scenario())
        shell = run_cli("run", "--agent", "ts", "from the shell")  # acpctl run, too
        assert shell.returncode == 0 and "ts: from the shell" in shell.stdout, shell.stderr
        found = json.loads(cli("doctor", "--agent", "ts", "--json").stdout)
        probed = [f for f in found if f["check"] == "agent ts"]
        assert probed and probed[0]["status"] == "ok", probed
        assert "answers: ts-sdk-echo 1.0.0" in probed[0]["message"]
    finally:
        server.terminate()
        server.wait(10)


def test_a_link_to_a_host_on_this_store_records_nothing_twice(
    remote_host: RemoteHost, tmp_path: Path
) -> None:
    """Issue 40, 8: the link records what it relays on this machine (tests/
    test_remote_history.py), except from a host that records in this very store."""
    add_remote("far", url=remote_host.url + "/demo", token_file=str(remote_host.token_file))
    done = run_cli("run", "--agent", "far", "only once", timeout=60)
    assert done.returncode == 0, done.stderr
    [listed] = json.loads(cli("sessions", "list", "--json").stdout)
    events = SessionStore().session_dir(listed["id"]) / "events.jsonl"
    ends = [line for line in events.read_text().splitlines() if '"turn_end"' in line]
    assert len(ends) == 1, ends
