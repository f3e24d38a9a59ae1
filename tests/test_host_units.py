"""Issue 28, in-process: the host's logical connection (cursors, stream routing, resume,
retried requests), its tokens, and what `acpctl serve` prints for the service managers."""

from __future__ import annotations

import json
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from acpctl import jsonrpc
from acpctl import protocol as acp
from acpctl.errors import AcpctlError
from acpctl.host.connection import CONNECTION_STREAM, LogicalConnection
from acpctl.host.cursors import ALL_STREAMS, ResumeRefused
from acpctl.host.main import HostOptions, check_options
from acpctl.host.outbox import Reader
from acpctl.host.tokens import load_or_create
from tests.conftest import cli, run


class Collected:
    def __init__(self, stream: str | None) -> None:
        self.messages: list[tuple[int, dict[str, Any]]] = []
        self.texts: list[tuple[int, str]] = []
        self.reader = Reader(stream, self.push, self.drain)

    def push(self, cursor: int, text: str) -> None:
        self.messages.append((cursor, json.loads(text)))
        self.texts.append((cursor, text))

    async def drain(self) -> None:
        return None


def cursor_of(message: dict[str, Any]) -> str:
    for part in ("params", "result"):
        if isinstance(message.get(part), dict) and "_meta" in message[part]:
            return str(message[part]["_meta"]["acp/cursor"])
    return str(message["_meta"]["acp/cursor"])


def test_messages_get_cursors_and_go_to_their_session_stream() -> None:
    async def scenario() -> None:
        connection = LogicalConnection()
        everything, main, session = (
            Collected(ALL_STREAMS),
            Collected(CONNECTION_STREAM),
            Collected("s1"),
        )
        for reader in (everything, main):
            connection.attach(reader.reader, connection.backlog(reader.reader.stream, None))
        assert connection.deliver(
            jsonrpc.encode(jsonrpc.request(1, acp.SESSION_NEW, {"cwd": "/", "mcpServers": []}))
        )
        connection.send(jsonrpc.result(1, {"sessionId": "s1"}))  # establishes s1
        connection.opened("s1")  # the client opens its stream, as the answer names it
        connection.attach(session.reader, connection.backlog(session.reader.stream, None))
        connection.deliver(
            jsonrpc.encode(
                jsonrpc.request(2, acp.SESSION_PROMPT, {"sessionId": "s1", "prompt": []})
            )
        )
        update = jsonrpc.notification(acp.SESSION_UPDATE, {"sessionId": "s1", "update": {}})
        connection.write(jsonrpc.encode(update))
        connection.send(jsonrpc.result(2, {"stopReason": "end_turn"}))
        connection.send(jsonrpc.notification("_other", {}))
        cursors = [int(cursor_of(m)) for _, m in everything.messages]
        assert cursors == [1, 2, 3, 4]
        assert [m.get("id") for _, m in main.messages] == [1, None]  # the answer naming s1
        assert [m.get("id") for _, m in session.messages] == [None, 2]  # its update, its turn
        assert connection.turn_state() == {"state": "idle"}

    run(scenario())


async def nothing() -> None:
    return None


@pytest.mark.parametrize("opened", ["never", "before the load", "during the load"])
def test_a_sessions_messages_go_to_its_stream_once_the_client_opens_it(opened: str) -> None:
    """Issue 43, 9: a session's messages go on its stream only once the client has opened
    it: a client that never does (the Python SDK's, after a resume, which names no session
    in its answer) gets them on the connection's stream. A load's replay and its answer
    keep to one stream: the session's, opened before (the TypeScript SDK's client), or
    the connection's, when the client opens the session's during the load (the Python
    SDK's, on the replay's first message)."""

    async def scenario() -> None:
        connection = LogicalConnection()
        main, session = Collected(CONNECTION_STREAM), Collected("s1")
        connection.attach(main.reader, connection.backlog(CONNECTION_STREAM, None))
        if opened == "before the load":
            connection.opened("s1")
        load = {"sessionId": "s1", "cwd": "/", "mcpServers": []}
        connection.deliver(jsonrpc.encode(jsonrpc.request(1, acp.SESSION_LOAD, load)))
        replayed = jsonrpc.notification(acp.SESSION_UPDATE, {"sessionId": "s1", "update": {}})
        connection.write(jsonrpc.encode(replayed))
        if opened == "during the load":
            connection.opened("s1")
        connection.write(jsonrpc.encode(replayed))
        connection.send(jsonrpc.result(1, {}))
        if opened != "never":
            connection.attach(session.reader, connection.backlog("s1", None))
        connection.write(jsonrpc.encode(replayed))  # a live update, after the answer
        on_main = [m.get("id", "update") for _, m in main.messages]
        on_session = [m.get("id", "update") for _, m in session.messages]
        if opened == "before the load":
            assert (on_main, on_session) == ([], ["update", "update", 1, "update"])
        elif opened == "during the load":
            assert (on_main, on_session) == (["update", "update", 1], ["update"])
        else:
            assert (on_main, on_session) == (["update", "update", 1, "update"], [])
        assert connection.sessions == {"s1"}

    run(scenario())


def test_a_relayed_line_goes_out_as_a_written_one_without_a_second_decode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server hands a host connection an agent's notification with what it decoded to
    (relay): the same text goes out as for the line written, cursor and all, and the
    line is not decoded again (the host's relay decoded every update twice)."""
    from acpctl.host import connection as host_connection

    async def scenario() -> None:
        connection = LogicalConnection()
        texts: list[str] = []
        reader = Reader(ALL_STREAMS, lambda _, text: texts.append(text), nothing)
        connection.attach(reader, connection.backlog(ALL_STREAMS, None))
        update = jsonrpc.notification(acp.SESSION_UPDATE, {"sessionId": "s1", "update": {"a": 1}})
        line = jsonrpc.encode(update)
        connection.write(line)

        def decoded_again(line: bytes) -> Any:
            raise AssertionError(f"decoded again: {line!r}")

        monkeypatch.setattr(host_connection, "_decoded", decoded_again)
        connection.relay(line, json.loads(line))
        first, second = (json.loads(text) for text in texts)
        assert cursor_of(first) == "1" and cursor_of(second) == "2"
        assert texts[1] == texts[0].replace('"acp/cursor":"1"', '"acp/cursor":"2"')

    run(scenario())


def test_a_resume_replays_after_the_cursor_and_refuses_one_not_held() -> None:
    async def scenario() -> None:
        connection = LogicalConnection()
        first = Collected(ALL_STREAMS)
        connection.attach(first.reader, connection.backlog(first.reader.stream, None))
        for n in range(5):
            connection.send(jsonrpc.notification("_tick", {"n": n}))
        connection.detach(first.reader)
        for n in range(5, 8):  # while nobody reads
            connection.send(jsonrpc.notification("_tick", {"n": n}))
        again = Collected(ALL_STREAMS)
        connection.attach(again.reader, connection.backlog(ALL_STREAMS, "3"))
        assert [m["params"]["n"] for _, m in again.messages] == [3, 4, 5, 6, 7]
        with pytest.raises(ResumeRefused):
            connection.backlog(ALL_STREAMS, "99")
        with pytest.raises(ResumeRefused):
            connection.backlog(ALL_STREAMS, "not a cursor")
        with pytest.raises(ResumeRefused):  # issued, but on another stream
            connection.backlog("s1", "3")
        connection.end()

    run(scenario())


def test_a_resume_past_what_the_connection_keeps_is_served_from_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retention as long as the history: the agent's updates the connection no longer keeps
    as text are read back from the session's events file, to the character; when the file
    no longer gives them back as sent, the resume is refused, not served wrong."""
    from acpctl.host import connection as host_connection
    from acpctl.host import cursors
    from acpctl.runner.session import SessionRecord
    from acpctl.store.sessions import EVENTS_FILE, SessionMeta, SessionStore

    monkeypatch.setattr(cursors, "RECENT_TEXTS", 10)
    monkeypatch.setattr(cursors, "DROP_AT_ONCE", 3)
    store = SessionStore(tmp_path / "sessions")
    meta = SessionMeta("s1", agent="demo", command=["demo"], cwd="/tmp")
    record = SessionRecord(meta, store.create(meta))
    events = store.session_dir("s1") / EVENTS_FILE

    async def scenario() -> None:
        connection = LogicalConnection(store=store)
        first = Collected(ALL_STREAMS)
        connection.attach(first.reader, connection.backlog(ALL_STREAMS, None))
        for n in range(60):
            if n % 25 == 0:  # what the history does not hold, among what it does
                connection.send(jsonrpc.notification("_tick", {"n": n}))
            update = {"sessionUpdate": "agent_message_chunk", "content": {"text": f"é{n}"}}
            # Compact lines get the cursor put into their text, spaced ones are encoded
            # again with it: both are read back as they were sent.
            line = json.dumps(
                jsonrpc.notification(acp.SESSION_UPDATE, {"sessionId": "s1", "update": update}),
                ensure_ascii=False,
                separators=(",", ":") if n % 3 else (", ", ": "),
            ).encode()
            record.writer.agent_message(line)
            connection.relay(line + b"\n", json.loads(line), record)
            if n % 7 == 0:
                record.writer.flush()  # the recorder's batch end
        record.writer.flush()
        connection.detach(first.reader)
        sent = first.texts
        assert len(sent) == 63

        again = Collected(ALL_STREAMS)
        connection.attach(again.reader, connection.backlog(ALL_STREAMS, "3"))
        assert again.texts == [m for m in sent if m[0] > 3]
        connection.detach(again.reader)

        kept = events.read_bytes()
        events.write_bytes(kept.replace("é5".encode(), "é6".encode()))  # one line changed
        with pytest.raises(ResumeRefused):
            connection.backlog(ALL_STREAMS, "3")
        events.unlink()
        with pytest.raises(ResumeRefused):
            connection.backlog(ALL_STREAMS, "3")
        recent = connection.backlog(ALL_STREAMS, str(sent[-5][0]))  # still kept as text
        assert recent.messages == sent[-4:]
        events.write_bytes(kept)
        back = Collected(ALL_STREAMS)
        connection.attach(back.reader, connection.backlog(ALL_STREAMS, "0"))
        assert back.texts == sent
        # More than one transport may be behind: refused, so as not to be cut off again.
        monkeypatch.setattr(host_connection, "RESUME_MOST", sum(len(t) for _, t in sent) - 1)
        with pytest.raises(ResumeRefused, match="load the session"):
            connection.backlog(ALL_STREAMS, "0")
        assert connection.backlog(ALL_STREAMS, "1").messages == sent[1:]
        connection.end()

    run(scenario())
    record.writer.close()


def test_a_repeated_request_is_not_taken_twice_and_a_running_turn_is_stated() -> None:
    async def scenario() -> None:
        connection = LogicalConnection()
        prompt = jsonrpc.encode(
            jsonrpc.request(7, acp.SESSION_PROMPT, {"sessionId": "s1", "prompt": []})
        )
        assert connection.deliver(prompt)
        assert not connection.deliver(prompt)
        cancel = jsonrpc.encode(jsonrpc.notification(acp.SESSION_CANCEL, {"sessionId": "s1"}))
        assert connection.deliver(cancel) and connection.deliver(cancel)  # notifications: all
        assert connection.turn_state() == {
            "state": "running",
            "promptRequestId": 7,
            "sessionId": "s1",
        }
        connection.end()
        taken = [item async for batch in connection.incoming() for item in batch]
        assert len(taken) == 3

    run(scenario())


def test_the_initialize_answer_advertises_resumable_delivery() -> None:
    """And says the connection's id and its caller's role, which a browser's page cannot
    read from the upgrade's headers or its cookie."""

    async def scenario() -> None:
        connection = LogicalConnection("c1", role=acp.OBSERVER)
        answer = connection.capture(1)
        connection.deliver(jsonrpc.encode(jsonrpc.request(1, acp.INITIALIZE, {})))
        connection.send(jsonrpc.result(1, {"protocolVersion": 1}))
        result = json.loads(await answer)["result"]
        # A v1 answer holds v1's fields only: the advertisement is in _meta (issue 54, 3).
        assert set(result) == {"protocolVersion", "_meta"}
        assert result["_meta"][acp.TRANSPORT_META]["resumable"]["retentionMessages"] > 0
        assert result["_meta"][acp.CONNECTION_ID_META] == "c1"
        assert result["_meta"][acp.ROLE_META] == acp.OBSERVER
        # A v2 answer has the draft's own place for it.
        answer = connection.capture(2)
        connection.deliver(jsonrpc.encode(jsonrpc.request(2, acp.INITIALIZE, {})))
        connection.send(jsonrpc.result(2, {"protocolVersion": 2, "capabilities": {"x": {}}}))
        result = json.loads(await answer)["result"]
        assert result["capabilities"]["x"] == {}
        assert result["capabilities"]["transport"]["resumable"]["retentionMessages"] > 0

    run(scenario())


def test_the_link_reads_resumable_delivery_where_hosts_old_and_new_put_it() -> None:
    """For one release the link reads both places: a host before 0.5 said it in
    `capabilities.transport` of its v1 answer."""
    from acpctl.capabilities import advertises_resumable

    advertised = {"resumable": {"retentionMessages": 1}}
    assert advertises_resumable({"_meta": {acp.TRANSPORT_META: advertised}})
    assert advertises_resumable({"capabilities": {"transport": advertised}})
    assert not advertises_resumable({"protocolVersion": 1, "_meta": {}})


def test_tokens_are_made_private_and_a_readable_file_is_refused(home: Path) -> None:
    tokens = load_or_create()
    path = home / "config" / "host-tokens.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert tokens.role_of(tokens.by_role["observer"]) == "observer"
    assert tokens.role_of(tokens.by_role["controller"]) == "controller"
    assert tokens.role_of("guess") is None
    assert load_or_create().by_role == tokens.by_role  # made once
    path.chmod(0o644)
    with pytest.raises(AcpctlError, match="can be read by other users"):
        load_or_create()
    shown = cli("serve", "--show-token")
    assert shown.returncode != 0 and "chmod 600" in shown.stderr


def test_what_the_host_refuses_before_it_listens() -> None:
    with pytest.raises(AcpctlError, match="not a loopback address"):
        check_options(HostOptions(listen="192.0.2.1:8700"))
    with pytest.raises(AcpctlError, match="go together"):
        check_options(HostOptions(tls_cert=Path("c.pem")))
    with pytest.raises(AcpctlError, match="HOST:PORT"):
        check_options(HostOptions(listen="8700"))
    check_options(HostOptions(listen="192.0.2.1:8700", behind_tls_proxy=True))
    check_options(HostOptions(listen="[::1]:8700"))
    with pytest.raises(AcpctlError, match="header-timeout"):
        check_options(HostOptions(header_timeout_s=0))


def test_the_service_manager_files_run_this_acpctl(home: Path) -> None:
    unit = cli("serve", "--print-systemd", "--listen", "127.0.0.1:8765", "--header-timeout", "3")
    assert unit.returncode == 0
    assert "ExecStart=" in unit.stdout
    assert "-m acpctl host start --listen 127.0.0.1:8765" in unit.stdout
    assert (
        unit.stdout
        == cli("host", "systemd", "--listen", "127.0.0.1:8765", "--header-timeout", "3").stdout
    )
    assert "--header-timeout 3" in unit.stdout
    default = cli("serve", "--print-systemd").stdout
    assert "--header-timeout" not in default and "--stop-grace" not in default
    # systemd waits out the stop's grace (30 s by default) and the clean-up after it.
    assert "TimeoutStopSec=45\n" in default
    graced = cli("serve", "--print-systemd", "--stop-grace", "120").stdout
    assert "--stop-grace 120" in graced and "TimeoutStopSec=135\n" in graced
    assert cli("serve", "--stop-grace", "-1").returncode == 2
    plist = cli("serve", "--print-launchd")
    assert "<string>host</string>" in plist.stdout and "<key>KeepAlive</key>" in plist.stdout


def test_serve_status_says_when_no_host_runs(home: Path) -> None:
    shown = cli("serve", "--status")
    assert shown.returncode == 1 and "no session host answers" in shown.stderr
    assert "`acpctl serve` is `acpctl host status` now" in shown.stderr
    assert cli("host", "status").returncode == 1
    stopped = cli("host", "stop")
    assert (
        stopped.returncode == 0 and "no session host runs here: nothing to stop" in stopped.stderr
    )


def test_an_agent_changed_in_config_is_not_started_beside_one_with_clients(home: Path) -> None:
    """The host never runs what config.toml no longer says: a changed agent restarts once
    its clients have gone, and is refused (run --acp then serves directly) meanwhile.
    Nothing is spawned here: an agent starts at its first client's initialize."""
    import logging

    from acpctl.host.agents import AgentChanged, AgentPool
    from acpctl.runner.clients import Client
    from acpctl.store.sessions import SessionStore

    assert cli("agents", "add", "x", "--", "/bin/cat").returncode == 0

    async def scenario() -> None:
        pool = AgentPool(SessionStore(), logging.getLogger("tests.host"), 0, False)
        first = await pool.get("x")
        assert await pool.get("x") is first  # unchanged: the same one
        someone = Client(object())  # type: ignore[arg-type]
        first.conn.clients.append(someone)
        assert cli("agents", "add", "x", "--env", "A=1", "--", "/bin/cat").returncode == 0
        with pytest.raises(AgentChanged):
            await pool.get("x")
        first.conn.clients.remove(someone)
        second = await pool.get("x")
        assert second is not first and ("A", "1") in second.command[2]
        await pool.close()

    run(scenario())


def test_an_outbox_bounds_how_far_a_transport_may_fall_behind() -> None:
    """The one backlog both transports write from: taken whole, a keepalive's [] on a
    timeout, None once closed and empty; a transport past MAX_BEHIND is cut off."""
    import logging

    from acpctl.host.outbox import Outbox

    async def scenario() -> None:
        outbox = Outbox(logging.getLogger("tests.host"))
        assert await outbox.take(0.01) == []
        outbox.push(1, "a")
        outbox.push(2, "b")
        assert await outbox.take() == [(1, "a"), (2, "b")]
        outbox.push(3, "x" * (Outbox.MAX_BEHIND + 1))
        assert outbox.cut and await outbox.take() is None
        outbox.push(4, "late")  # after the cut: dropped
        assert await outbox.take() is None

    run(scenario())


def test_the_unix_socket_is_written_as_sent_and_cut_off_past_max_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host's unix socket has no outbox task: a line goes out as the connection sends
    it, and a client that stops reading is cut off past MAX_BEHIND (its connection can
    resume), not buffered without bound."""
    import asyncio
    import logging

    from acpctl.host.outbox import Outbox
    from acpctl.host.unix import UnixSender

    monkeypatch.setattr(Outbox, "MAX_BEHIND", 1 << 20)

    async def scenario() -> None:
        host_end, client_end = socket.socketpair()
        _, writer = await asyncio.open_unix_connection(sock=host_end)
        reader, client_writer = await asyncio.open_unix_connection(sock=client_end)
        sender = UnixSender(writer, logging.getLogger("tests.host"))
        sender.push(1, "first")
        assert await reader.readline() == b"first\n"  # no task between: at once
        for cursor in range(2, 6):  # the client reads no more
            sender.push(cursor, "x" * (1 << 19))
        assert writer.transport.is_closing()
        sender.push(6, "late")  # after the cut: dropped, no error
        await sender.drain()
        client_writer.close()

    run(scenario())


@pytest.mark.skipif(not hasattr(socket, "TCP_CORK"), reason="TCP_CORK is Linux's")
def test_a_batch_of_frames_is_written_corked_and_the_socket_uncorked_after() -> None:
    """Issue 29: a batch's frames leave in full segments (TCP_CORK while they are written);
    a socket left corked would hold its last frame back for 200 ms."""
    import logging

    from acpctl.host.websocket import SocketSender

    async def scenario() -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
        corked: list[tuple[str, int]] = []

        class Frames:  # what SocketSender uses of aiohttp's WebSocketResponse
            def __init__(self, protocol: str | None) -> None:
                self.ws_protocol = protocol

            async def send_str(self, text: str) -> None:
                corked.append((text, server.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK)))

        for protocol, frames in ((None, ["a", "b"]), (acp.WEBSOCKET_LINES, ["a\nb"])):
            corked.clear()
            log = logging.getLogger("tests.host")
            sender = SocketSender(Frames(protocol), log, server)  # type: ignore[arg-type]
            sender.outbox.push(1, "a")
            sender.outbox.push(2, "b")
            await sender.close()
            assert corked == [(frame, 1) for frame in frames]
            assert server.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == 0
        for end in (client, server, listener):
            end.close()

    run(scenario())


def test_allowed_hosts_take_a_proxy_s_name_bare_or_with_a_port() -> None:
    from acpctl.host.main import _host_names

    names = _host_names("127.0.0.1", 8765, ["acp.example.com", "127.0.0.2:9000", "[::2]"])
    assert {"127.0.0.1:8765", "localhost:8765", "acp.example.com", "acp.example.com:8765"} <= names
    assert {"127.0.0.2:9000", "[::2]", "[::2]:8765"} <= names
    assert "127.0.0.2:9000:8765" not in names and "127.0.0.1" not in names


@pytest.mark.parametrize(
    ("host", "loopback", "passes"),
    [
        ("127.0.0.1:8765", True, True),  # the listening address
        ("127.0.0.1:9000", True, True),  # an ssh -L forward on another port (issue 40, 10)
        ("localhost:9000", True, True),
        ("localhost", True, True),
        ("[::1]:9000", True, True),
        ("127.0.0.2:9000", True, True),  # all of 127.0.0.0/8 is this machine
        ("evil.example:8765", True, False),  # a DNS-rebinding page's name
        ("localhost.evil.example:8765", True, False),
        ("localhost:x", True, False),
        ("127.0.0.1:9000", False, False),  # a listener off loopback keeps the exact check
        ("acp.example.com", False, True),
    ],
)
def test_a_loopback_listener_takes_loopback_names_on_any_port(
    host: str, loopback: bool, passes: bool
) -> None:
    from aiohttp.test_utils import make_mocked_request

    from acpctl.host.door import Door
    from acpctl.host.registry import Caller
    from acpctl.host.tokens import Tokens

    hosts = frozenset({"127.0.0.1:8765", "localhost:8765", "acp.example.com"})
    door = Door(Tokens({"controller": "t" * 43}), hosts=hosts, loopback=loopback)
    request = make_mocked_request(
        "GET", "/acp", headers={"Host": host, "Authorization": f"Bearer {'t' * 43}"}
    )
    answer = door.refusal(request)
    assert (answer == Caller("controller")) is passes, answer


def test_environments_are_compared_by_name_and_digest_only() -> None:
    from acpctl import environ

    ours = environ.digest({"PATH": "/bin", "KEY": "secret", "TERM": "xterm", "ACPCTL_X": "1"})
    assert set(ours) == {"PATH", "KEY"} and "secret" not in str(ours)
    theirs = environ.digest({"PATH": "/bin", "KEY": "other", "NEW": "1", "SHLVL": "3"})
    assert environ.differing(theirs, ours) == ["KEY", "NEW"]
    assert environ.differing(None, ours) == []  # an older client sends none: nothing said
    assert environ.said([f"V{n}" for n in range(8)]) == "V0, V1, V2, V3, V4, V5 and 2 more"


def test_capabilities_are_read_one_way_fork_and_attach_included() -> None:
    """Issue 40, 4: doctor read them apart from the handshake, and missed fork."""
    from acpctl.capabilities import AgentCapabilities

    result = {
        "agentCapabilities": {
            "loadSession": True,
            "sessionCapabilities": {"resume": {}, "fork": {}, "list": {}, "close": None},
            "_meta": {"claudeCode": {"promptQueueing": True}},
        }
    }
    capabilities = AgentCapabilities(result)
    assert capabilities.offered() == ["load", "fork", "list", "resume"]  # null is not offered
    assert capabilities.can("fork") and not capabilities.can("close")
    assert capabilities.queues_prompts()
    assert AgentCapabilities(None).offered() == [] and not AgentCapabilities("x").can("load")


def test_a_resume_says_running_while_another_clients_turn_runs() -> None:
    """Issue 43, 12: stream/resume said idle while another client's turn ran."""

    async def scenario() -> None:
        running = {"s1"}
        connection = LogicalConnection(turn_running=lambda session: session in running)
        connection.sessions.add("s1")
        assert connection.turn_state() == {"state": "running", "sessionId": "s1"}
        running.clear()
        assert connection.turn_state() == {"state": "idle"}

    run(scenario())


def test_the_listener_is_kept_in_serve_and_read_back(home: Path) -> None:
    """Issue 52, 3: `serve --listen` and its options, as bound, in config.toml's [serve]
    (the other keys and the comments kept); a bad value is said, with the key."""
    from acpctl import config, serve_config

    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('# mine\n[serve]\non_waiting = ["ntfy"]  # my notifier\n')
    cfg = config.load()
    kept = serve_config.Listener("127.0.0.1:8765", "/k/cert.pem", "/k/key.pem", True, ("desk",))
    config.remember_listener(cfg, kept)
    config.save(cfg)
    text = path.read_text()
    assert "# mine" in text and "# my notifier" in text
    assert config.load().serve.listener == kept
    assert config.load().serve.on_waiting == ("ntfy",)
    config.remember_listener(cfg, serve_config.Listener("127.0.0.1:9000"))  # the options go too
    config.save(cfg)
    assert config.load().serve.listener == serve_config.Listener("127.0.0.1:9000")
    for bad, said in (
        ("listen = 8765", "listen must be"),
        ('listen = "h:1"\nallow_hosts = "x"', "allow_hosts must be"),
        ('listen = "h:1"\nbehind_tls_proxy = "yes"', "behind_tls_proxy must be"),
    ):
        path.write_text(f"[serve]\n{bad}\n")
        with pytest.raises(AcpctlError, match=said):
            config.load()


def test_a_connection_has_a_holder_only_for_the_pid_the_kernel_names_as_its_peer() -> None:
    """Attack on issue 53's killed-client rule: a client that says another process's pid
    (one about to exit, to have the host end a connection early, or one it wants watched)
    gets no holder; nor does a word that is no pid. Only the socket's own peer, by
    SO_PEERCRED, is held, and by a pidfd taken then (a pid reused later is not it)."""
    import os

    from acpctl.host.unix import Holder

    class Writer:
        def __init__(self, end: socket.socket) -> None:
            self.end = end

        def get_extra_info(self, name: str) -> Any:
            return self.end if name == "socket" else None

    ours, theirs = socket.socketpair()
    try:
        writer: Any = Writer(ours)
        for said in (os.getpid() + 1, 1, "1", None, True):
            assert Holder.of({"pid": said}, writer) is None, said
        assert Holder.of({}, writer) is None and Holder.of("x", writer) is None
        held = Holder.of({"pid": os.getpid()}, writer)  # the peer of a socketpair is us
        assert held is not None
        held.close()
    finally:
        ours.close()
        theirs.close()
