"""Issue 29, the fast tier: remote agents in config.toml and on the command line, the ssh
command line, what a failed ssh is said as, and the link's bookkeeping (cursors taken out,
a reload's replay deduplicated, a permission asked again matched), in process."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acpctl import config, cursors_wire
from acpctl import protocol as acp
from acpctl.config import Remote
from acpctl.errors import UsageError
from acpctl.remote.lines import _ssh_failure, ssh_argv
from acpctl.remote.link_state import LinkState
from acpctl.remote.relay import check_clear_text
from acpctl.remote.transport import LinkDown, LinkRefused, NoSuchHost, ResumePoint
from tests.conftest import cli


def write_config(home: Path, text: str) -> None:
    path = home / "config" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_remote_agent_reads_from_config_toml(home: Path) -> None:
    write_config(
        home,
        '[agents.box]\nssh = "me@box"\nremote_agent = "claude"\nssh_args = ["-p", "2222"]\n'
        '[agents.far]\nurl = "wss://far:8765/acp"\noutage_limit_s = 60\n',
    )
    loaded = config.load()
    box, far = loaded.agents["box"].remote, loaded.agents["far"].remote
    assert box == Remote(ssh="me@box", remote_agent="claude", ssh_args=("-p", "2222"))
    assert far is not None and far.url == "wss://far:8765/acp" and far.outage_limit_s == 60


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('url = "ftp://x"', "url must start with"),
        ('url = "wss://x"\nssh = "me@box"', "one of command, url and ssh"),
        ('url = "wss://x"\ncommand = "x"', "one of command, url and ssh"),
        ('ssh = "-oProxyCommand=evil"', "a destination"),
        ('ssh = "box"\nssh_args = "-v"', "ssh_args must be a list"),
        ('url = "wss://x"\noutage_limit_s = -1', "outage_limit_s must be"),
    ],
)
def test_a_bad_remote_agent_is_refused_with_what_to_fix(home: Path, table: str, said: str) -> None:
    write_config(home, f"[agents.box]\n{table}\n")
    with pytest.raises(UsageError, match=said):
        config.load()


def test_agents_add_writes_a_remote_agent_that_lists_and_installs(
    home: Path, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("secret\n")
    added = cli("agents", "add", "far", "--url", "wss://far:8765/acp", "--token-file", str(token))
    assert added.returncode == 0, added.stderr
    assert config.load().agents["far"].remote == Remote(
        url="wss://far:8765/acp", token_file=str(token.resolve())
    )
    listed = json.loads(cli("agents", "list", "--json").stdout)
    far = next(agent for agent in listed if agent["name"] == "far")
    assert far["remote"] == "wss://far:8765/acp" and far["found"]
    assert "secret" not in (home / "config" / "config.toml").read_text()
    settings = tmp_path / "settings.json"
    settings.write_text("{ // mine\n}\n")
    installed = cli("install", "zed", "--agent", "far", "--settings", str(settings), "--yes")
    assert installed.returncode == 0, installed.stderr
    assert '"args": ["run", "--acp", "--agent", "far"]' in settings.read_text()
    assert "// mine" in settings.read_text()


@pytest.mark.parametrize(
    "argv",
    [
        ["--url", "wss://x/acp", "--ssh", "box"],
        ["--url", "wss://x/acp", "--", "cmd"],
        ["--ssh", "box", "--token-file", "t"],
        ["--url", "gopher://x"],
    ],
)
def test_agents_add_refuses_a_mixed_remote(home: Path, argv: list[str]) -> None:
    refused = cli("agents", "add", "far", *argv)
    assert refused.returncode != 0
    assert not (home / "config" / "config.toml").exists()


def test_the_ssh_command_never_prompts_and_quotes_the_remote_command() -> None:
    argv = ssh_argv(
        Remote(ssh="me@box", remote_acpctl="~/.local/bin/acpctl --x", ssh_args=("-p", "2"))
    )
    assert argv[:2] == ["ssh", "-T"] and "BatchMode=yes" in argv
    assert argv[argv.index("--") + 1] == "me@box"  # after --: never read as an option
    assert argv[-1] == "'~/.local/bin/acpctl' --x serve --bridge"
    assert argv.index("-p") < argv.index("--")


class Ended:
    def __init__(self, returncode: int) -> None:
        self.returncode = returncode


@pytest.mark.parametrize(
    ("errors", "code", "kind", "said"),
    [
        (["bash: line 1: acpctl: command not found"], 127, LinkRefused, "not installed on box"),
        (["Usage: acpctl serve", "Error: No such option: --bridge"], 2, LinkRefused, "too old"),
        (["me@box: Permission denied (publickey)."], 255, LinkRefused, "was refused"),
        (["ssh: connect to host box port 22: Network is unreachable"], 255, LinkDown, "unreach"),
        (
            ["ssh: Could not resolve hostname box: Name or service not known"],
            255,
            NoSuchHost,
            "Could not resolve hostname box",
        ),
    ],
)
def test_what_ended_ssh_is_said_as_what_to_do(
    errors: list[str], code: int, kind: type[Exception], said: str
) -> None:
    failure = _ssh_failure(Remote(ssh="box"), Ended(code), errors, None)  # type: ignore[arg-type]
    assert isinstance(failure, kind) and said in str(failure)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("wss://far.example/acp", True),
        ("https://far.example/acp", True),
        ("ws://127.0.0.1:1/acp", True),
        ("ws://localhost:1/acp", True),
        ("ws://[::1]:1/acp", True),
        ("ws://far.example/acp", False),
        ("http://10.0.0.2/acp", False),
    ],
)
def test_clear_text_only_on_loopback(url: str, allowed: bool) -> None:
    if allowed:
        check_clear_text(url)
    else:
        with pytest.raises(LinkRefused, match="clear text"):
            check_clear_text(url)


def test_the_cursor_is_taken_out_and_the_rest_of_meta_kept() -> None:
    message = {
        "jsonrpc": "2.0",
        "method": acp.SESSION_UPDATE,
        "params": {"sessionId": "s", "_meta": {acp.CURSOR_META: "7", "mine": 1}},
    }
    stripped, cursor = cursors_wire.without(message), cursors_wire.cursor_of(message)
    assert stripped["params"]["_meta"] == {"mine": 1} and cursor == "7"
    alone = {"jsonrpc": "2.0", "id": 1, "result": {"_meta": {acp.CURSOR_META: "8"}}}
    assert (cursors_wire.without(alone), cursors_wire.cursor_of(alone)) == (
        {"jsonrpc": "2.0", "id": 1, "result": {}},
        "8",
    )


class FakeTransport:
    """A transport the test writes the remote's side of."""

    def __init__(self, resumed: bool = False) -> None:
        self.connection_id = "c"
        self.resumed = resumed
        self.remote_version: str | None = None
        self.close_reason = "cut"
        self.sent: list[dict[str, Any]] = []
        self.inbox: asyncio.Queue[str | None] = asyncio.Queue()

    async def send(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def receive(self) -> str | None:
        return await self.inbox.get()

    def took(self, cursor: str) -> None:
        self.cursor = cursor

    def peer_certificate(self) -> dict[str, Any] | None:
        return None

    def resume_point(self) -> ResumePoint | None:
        return None

    async def close(self, leaving: bool) -> None:
        self.inbox.put_nowait(None)


class Editor:
    """What the link writes to the editor."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def send(self, message: Any) -> None:
        self.messages.append(message)

    def write(self, data: bytes) -> None:
        self.messages.append(json.loads(data))

    async def drain(self) -> None:
        return None

    async def room(self) -> None:
        return None


def update(text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": acp.SESSION_UPDATE,
        "params": {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
        },
    }


async def settle() -> None:
    """Until the link has done what it can without the test."""
    for _ in range(20):
        await asyncio.sleep(0)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=50)
@given(
    params=st.dictionaries(st.text(), json_values, min_size=1, max_size=4),
    spaced=st.booleans(),
)
def test_a_cursor_put_into_a_relayed_line_and_taken_out_leaves_its_bytes(
    params: dict[str, Any], spaced: bool
) -> None:
    """The host's fast path (the cursor put into the line's text) says what the slow path
    says, and the link's takes out exactly what it put in; a line it cannot be sure of
    (spaces around a colon, a _meta of its own) takes the slow path."""
    message = {"jsonrpc": "2.0", "method": acp.SESSION_UPDATE, "params": params}
    separators = (", ", ": ") if spaced else (",", ":")
    line = json.dumps(message, separators=separators, ensure_ascii=False).encode()
    slow = cursors_wire.encoded_with(message, "42")
    inserted = cursors_wire.line_with(message, line, "42")
    with_cursor = inserted if inserted is not None else slow
    decoded = json.loads(with_cursor)
    assert decoded == json.loads(slow)
    assert decoded["params"]["_meta"][acp.CURSOR_META] == "42"
    assert (cursors_wire.without(decoded), cursors_wire.cursor_of(decoded)) == (message, "42")
    taken_out = cursors_wire.line_without(with_cursor, "42")
    if taken_out is not None:
        assert taken_out.encode() == line
    else:
        assert spaced or "_meta" in params


def test_server_sent_events_come_whole_however_the_bytes_are_cut() -> None:
    """Streamable HTTP's SSE reader: events split anywhere across reads, CRLF or LF line
    ends, comments (keepalives), an id kept as the stream's cursor, multi-line data."""
    from acpctl.remote.streamable import StreamableTransport

    stream = (
        b': keepalive\r\n\r\nid: 1\r\ndata: {"a":1}\r\n\r\n'
        b'id: 2\ndata: {"b":\ndata: 2}\n\n: ping\n\n'
        + 'id: 3\ndata: {"\u00e9":3}\n\n'.encode()  # a cut may fall inside its two bytes
    )

    class Content:
        def __init__(self, cut: int) -> None:
            self.parts = [stream[:cut], stream[cut:]]

        async def iter_any(self) -> Any:
            for part in self.parts:
                yield part

    class Response:
        def __init__(self, cut: int) -> None:
            self.content = Content(cut)

    async def read(cut: int) -> tuple[list[str], dict[str, str]]:
        transport = StreamableTransport(None, "http://x/acp", None, None)
        await transport._events("", Response(cut))
        got = []
        while not transport._inbox.empty():
            item = transport._inbox.get_nowait()
            assert item is not None
            got.append(item)
        return got, transport._cursors

    for cut in range(len(stream) + 1):
        got, cursors = asyncio.run(read(cut))
        assert got == ['{"a":1}', '{"b":\n2}', '{"\u00e9":3}'], (cut, got)
        assert cursors == {"": "3"}


def test_an_endless_server_sent_event_is_cut_off_at_the_message_limit() -> None:
    """Issue 41, 3: a fake host's SSE line that never ended grew the link to 258 MiB and on;
    the WebSocket path stops at 16 MiB, and so does this one now."""
    from acpctl.remote.streamable import MAX_EVENT_BYTES, StreamableTransport

    read = 0

    class Content:
        async def iter_any(self) -> Any:
            nonlocal read
            yield b"data: "
            for _ in range(40 << 4):  # 40 MiB of one line, 64 KiB at a time
                read += 64 << 10
                yield b"x" * (64 << 10)

    class Response:
        content = Content()

    async def scenario() -> StreamableTransport:
        transport = StreamableTransport(None, "http://x/acp", None, None)
        await transport._events("", Response())
        return transport

    transport = asyncio.run(scenario())
    assert transport.close_reason == "an event of more than 16 MiB"
    assert read <= MAX_EVENT_BYTES + (64 << 10)  # it stopped reading there


def test_a_remote_s_address_in_logs_carries_no_credentials() -> None:
    """What the run log, errors and `agents list` say of a URL: no user, password or query
    (where a token could be), the rest as given."""
    remote = Remote(url="wss://me:secret@far.example:8765/acp/claude?token=abc#x")
    assert remote.address == "wss://far.example:8765/acp/claude"
    assert Remote(url="ws://[::1]:9/acp").address == "ws://[::1]:9/acp"
    assert Remote(ssh="me@box", remote_agent="pi").address == "ssh me@box (agent pi)"


def test_doctor_flags_a_remote_token_file_others_can_read(tmp_path: Path) -> None:
    """Issue 41, 8: doctor checked the host's own tokens file, not a remote agent's."""
    from acpctl.doctor.checks.remote import _token_file

    token = tmp_path / "devbox.token"
    token.write_text("t" * 43)
    token.chmod(0o644)
    remote = Remote(url="wss://devbox:8765/acp", token_file=str(token))
    [finding] = _token_file("devbox", remote)
    assert (
        finding.status == "problem" and "can be read by other users (mode 644)" in finding.message
    )
    assert finding.fix == f"chmod 600 {token}"
    token.chmod(0o600)
    assert _token_file("devbox", remote) == []


def test_the_status_line_shows_the_link_down_while_it_is() -> None:
    from acpctl.terminal.relay_connection import RelayConnection
    from acpctl.terminal.render import Renderer
    from acpctl.terminal.status_line import StatusLine

    renderer = Renderer(io.StringIO())
    renderer.status = StatusLine(io.StringIO(), renderer.column)
    conn = RelayConnection(None, renderer)  # type: ignore[arg-type]
    down = {"method": acp.LINK_STATE, "params": {"state": "down", "since": 0, "reason": "x"}}
    conn._route({"jsonrpc": "2.0", **down}, b"")
    assert renderer.status.facts["link"].startswith("link down since ")
    assert renderer.status.facts["link"].endswith(", reconnecting")
    up = {"method": acp.LINK_STATE, "params": {"state": "up", "after": 1.5, "how": "resumed"}}
    conn._route({"jsonrpc": "2.0", **up}, b"")
    assert "link" not in renderer.status.facts
    # Issue 53, 5: a link that never connected did not drop.
    never = {"state": "down", "since": 0, "reason": "x", "connected": False}
    conn._route({"jsonrpc": "2.0", "method": acp.LINK_STATE, "params": never}, b"")
    assert renderer.status.facts["link"].startswith("link not up yet (since ")


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}).encode()


def _live(describe: str) -> LinkState:
    """A link's state with its first transport up."""
    state = LinkState(describe, logging.getLogger("t"))
    state.came_up(resumed=False)
    state.set_up()
    return state


def _initialized(state: LinkState) -> LinkState:
    """`state` after the editor's initialize, answered by an agent that can load."""
    state.editor_sent(_line({"id": 0, "method": "initialize", "params": {}}))
    state.host_sent(json.dumps({"id": 0, "result": {"agentCapabilities": {"loadSession": True}}}))
    return state


def _shown(state: LinkState) -> list[dict[str, Any]]:
    shown = [json.loads(line) for line in state.to_editor]
    state.to_editor.clear()
    return shown


def _texts(shown: list[dict[str, Any]]) -> list[str]:
    return [m["params"]["update"]["content"]["text"] for m in shown if "method" in m]


def test_a_reload_shows_only_what_the_editor_has_not_seen() -> None:
    """A new connection after the host lost the old one: initialize and session/load are
    the link's own; the replay's updates the editor has are left out, a new one is not, and
    a permission request asked again on the new connection is the one the editor holds.
    The link's state is a plain object: no event loop, no transport."""
    state = _initialized(_live("far"))
    state.editor_sent(_line({"id": 2, "method": "session/new", "params": {"cwd": "/w"}}))
    state.host_sent(json.dumps({"id": 2, "result": {"sessionId": "s"}}))
    for text in ("a", "b", "a"):
        state.host_sent(json.dumps(update(text)))
    ask = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": acp.REQUEST_PERMISSION,
        "params": {"sessionId": "s", "toolCall": {"toolCallId": "t1"}, "options": []},
    }
    state.host_sent(json.dumps(ask))
    editor_ask = _shown(state)[-1]
    assert editor_ask["method"] == acp.REQUEST_PERMISSION
    state.went_down("dropped")

    reloads = state.came_up(resumed=False)
    assert [step.method for step in reloads] == ["initialize", "session/load"]
    assert reloads[1].params["cwd"] == "/w"
    for step in reloads:
        state.reloading(step)
        if step.method == "session/load":
            for text in ("a", "b", "a", "c"):
                state.host_sent(json.dumps(update(text)))
            state.host_sent(json.dumps({**ask, "id": 5}))  # asked again: the editor has it
        state.reloaded(step, {"result": {}})
    state.set_up()
    assert _texts(_shown(state)) == ["c"]
    answer = {"id": editor_ask["id"], "result": {"outcome": {"outcome": "cancelled"}}}
    state.editor_sent(_line(answer))
    assert json.loads(state.to_host[-1]) == {
        "jsonrpc": "2.0",
        "id": 5,
        "result": {"outcome": {"outcome": "cancelled"}},
    }


def test_a_reload_leaves_out_what_a_joined_replay_gave_the_editor() -> None:
    """The editor loaded the session: acpctl serve's replay joined three stored fragments
    into one line, and said it covered three. A reload's replay, as recorded, has them as
    three lines: those three are left out, what follows them is shown."""
    state = _initialized(_live("the session host"))
    state.editor_sent(_line({"id": 1, "method": "session/load", "params": {"sessionId": "s"}}))
    state.host_sent(json.dumps(update("abc")))  # the joined replay
    meta = {acp.REPLAYED_META: 3}
    state.host_sent(json.dumps({"id": 1, "result": {"_meta": meta}}))
    assert _texts(_shown(state)) == ["abc"]
    state.went_down("killed")
    [initialize, load] = state.came_up(resumed=False)
    assert initialize.method == acp.INITIALIZE
    state.reloading(load)
    for text in ("a", "b", "c", "d"):
        state.host_sent(json.dumps(update(text)))
    state.reloaded(load, {"result": {"_meta": {acp.REPLAYED_META: 4}}})
    state.set_up()
    assert _texts(_shown(state)) == ["d"]
    assert state.sessions["s"].replayed == 4  # a second reload leaves out all four


def test_the_link_tells_an_editor_that_asked_when_it_drops_and_comes_back() -> None:
    """Issue 40, 7: the terminal's status line says "link down since …, reconnecting"; the
    link tells acpctl's terminal client, which asks in its initialize, and nobody else."""

    def told(asked: bool) -> list[dict[str, Any]]:
        state = _live("far")
        meta = {"_meta": {acp.LINK_STATE_META: True}} if asked else {}
        initialize = {"protocolVersion": 1, "clientCapabilities": meta}
        state.editor_sent(_line({"id": 1, "method": "initialize", "params": initialize}))
        state.went_down("connection reset")
        state.went_down("refused")  # still down: said once
        state.came_up(resumed=True)
        state.set_up()
        return [m for m in _shown(state) if m.get("method") == acp.LINK_STATE]

    said = told(asked=True)
    assert [m["params"]["state"] for m in said] == ["down", "up"]
    assert said[0]["params"]["reason"] == "connection reset"
    assert said[1]["params"]["how"] == "resumed"
    assert told(asked=False) == []


def test_a_peer_that_fails_at_once_each_time_is_dialled_with_a_back_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51, 8: a remote that drops each connection as soon as it is up (an endless SSE
    line, say) was dialled again at once, in a loop ("back after 0.0 s", repeated). The
    back-off now carries over drops that come right after coming up."""
    import logging

    from acpctl.jsonrpc.streams import Output
    from acpctl.remote import link as link_module
    from acpctl.remote.link import Link

    monkeypatch.setattr(link_module, "BACKOFF_FIRST_S", 0.005)  # the doubling, sooner
    dials: list[float] = []
    ninth = asyncio.Event()

    class DropsAtOnce:
        connection_id = "c"
        resumed = False
        remote_version = None
        close_reason = "an endless line"

        async def send(self, text: str) -> None:
            pass

        async def receive(self) -> str | None:
            return None

        def took(self, cursor: str) -> None:
            pass

        def resume_point(self) -> None:
            return None

        def peer_certificate(self) -> None:
            return None

        async def close(self, leaving: bool) -> None:
            pass

    async def dial(_: Any) -> Any:
        dials.append(time.monotonic())
        if len(dials) == 9:
            ninth.set()
        return DropsAtOnce()

    async def scenario() -> None:
        with (tmp_path / "editor-out").open("wb") as out:
            link = Link("far", dial, Output(None, out.fileno()), logging.getLogger("t"), 0)
            editor = asyncio.StreamReader()
            running = asyncio.ensure_future(link.run(editor))
            await asyncio.wait_for(ninth.wait(), 30)
            editor.feed_eof()
            await asyncio.wait_for(running, 10)

    asyncio.run(scenario())
    # Three quick drops are dialled again at once (a flaky network's cuts); then the waits
    # double from 5 ms here, jittered by half either way, so the fifth is 40 ms at least
    # (without the back-off, every dial came at once, within a millisecond).
    assert dials[8] - dials[7] >= 0.04, [b - a for a, b in itertools.pairwise(dials)]


def test_an_ssh_destination_with_options_in_it_is_refused_before_anything_is_written(
    home: Path,
) -> None:
    """`--ssh "me@gpu -p 2222"` was stored, and every run then failed in ssh ("hostname
    contains invalid characters"): the destination is one word, ssh's options go in
    ssh_args."""

    added = cli("agents", "add", "far", "--ssh", "me@gpu -p 2222")
    assert added.returncode == 2
    assert "ssh's options go in ssh_args" in added.stderr
    assert not (home / "config" / "config.toml").exists()
