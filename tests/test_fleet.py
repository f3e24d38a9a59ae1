"""Issue 55: linked hosts. `acpctl host link add|list|remove|show` keep them in config.toml;
`sessions list` asks each at once, within its own deadline, for its own live sessions (not
transitive: a loop never recurses), and says since when one does not answer.

The end-to-end tests run three hosts on this machine, each with directories of its own: A
(the test's), B over WebSocket with TLS and B's token, C over a real sshd on loopback
through `acpctl serve --bridge` there."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from acpctl.host_links import HostLink, link_from_table
from acpctl.remote.fleet import Answer, _remembered
from tests.conftest import cli, run_cli
from tests.test_host import self_signed
from tests.test_remote import Sshd, sshd  # noqa: F401 (the fixture)

DEMO = [sys.executable, "-m", "acpctl.demo_agent"]


# -- the links, in config.toml ------------------------------------------------------------


def test_a_link_is_added_listed_shown_and_removed_keeping_the_rest_of_config_toml(
    home: Path, tmp_path: Path
) -> None:
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('# my settings\ndefault_agent = "demo"  # kept\n')
    added = cli("host", "link", "add", "build", "--ssh", "me@build", "--remote-state", "/srv/s")
    assert added.returncode == 0, added
    token = tmp_path / "cloud.token"
    token.write_text("secret\n")
    token.chmod(0o600)
    url = ["--url", "wss://cloud.example:8765", "--token-file", str(token)]
    assert cli("host", "link", "add", "cloud", *url).returncode == 0
    text = config.read_text()
    assert text.startswith('# my settings\ndefault_agent = "demo"  # kept\n'), text
    assert "secret" not in text  # the token stays in its own file
    listed = json.loads(cli("host", "link", "list", "--json").stdout)
    assert listed == [
        {"name": "build", "ssh": "me@build", "remote_state": "/srv/s"},
        {"name": "cloud", "url": "wss://cloud.example:8765", "token_file": str(token)},
    ]
    assert "cloud  wss://cloud.example:8765" in cli("host", "link", "list").stdout
    assert cli("host", "link", "remove", "build").returncode == 0
    assert [e["name"] for e in json.loads(cli("host", "link", "list", "--json").stdout)] == [
        "cloud"
    ]
    gone = cli("host", "link", "remove", "build")
    assert gone.returncode == 2 and "no linked host 'build'" in gone.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["Desk", "--ssh", "x"], "must be lowercase letters"),
        (["desk"], "one of --ssh and --url"),
        (["desk", "--ssh", "x", "--url", "wss://a"], "one of --ssh and --url"),
        (["desk", "--url", "ws://build.example:8765"], "is not encrypted"),
        (["desk", "--url", "ftp://x"], "must start with ws://"),
        (["desk", "--ssh", "me@gpu -p 2222"], "is one destination"),
        (["desk", "--ssh", "-oProxyCommand=x"], "not an option"),
        (["desk", "--url", "wss://a", "--remote-state", "/s"], "go with ssh"),
        (["desk", "--token-file", "/nonexistent", "--url", "wss://a"], "is not a file"),
        (["desk", "--ssh", "x", "--deadline", "0"], "deadline_s must be a number of seconds"),
    ],
)
def test_a_bad_link_is_refused_with_what_is_wrong_and_nothing_written(
    home: Path, args: list[str], said: str
) -> None:
    refused = cli("host", "link", "add", *args)
    assert refused.returncode == 2 and said in refused.stderr, refused
    assert not (home / "config" / "config.toml").exists()


def test_a_token_file_others_can_read_is_refused(home: Path, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("secret\n")
    token.chmod(0o644)
    refused = cli("host", "link", "add", "cloud", "--url", "wss://a:1", "--token-file", str(token))
    assert refused.returncode == 2 and "chmod 600" in refused.stderr


def test_a_broken_links_table_is_said_with_its_file(home: Path) -> None:
    config = home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[links.build]\nssh = "x"\nurl = "wss://y"\n')
    said = cli("host", "link", "list")
    assert said.returncode == 2 and "[links.build]" in said.stderr and str(config) in said.stderr


def test_a_remote_state_reaches_ssh_as_one_quoted_word() -> None:
    link = link_from_table(None, "c", {"ssh": "me@box", "remote_state": "/tmp/a b;x"})
    from acpctl.remote.lines import ssh_argv

    argv = ssh_argv(link.remote)
    assert argv[-2:] == ["me@box", "env 'ACPCTL_STATE_DIR=/tmp/a b;x' acpctl serve --bridge"]
    assert link_from_table(None, "u", {"url": "wss://h:1"}).endpoint == "wss://h:1/acp"
    assert link_from_table(None, "u", {"url": "wss://h:1/acp/x"}).endpoint == "wss://h:1/acp/x"


def test_unreachable_since_is_the_first_failure_in_a_row(home: Path) -> None:
    build = HostLink("build", ssh="b")
    first = _remembered([Answer(build, None, "refused")])[0]
    assert first.unreachable_since is not None
    again = _remembered([Answer(build, None, "refused")])[0]
    assert again.unreachable_since == first.unreachable_since
    assert _remembered([Answer(build, {"sessions": []})])[0].unreachable_since is None
    later = _remembered([Answer(build, None, "refused")])[0]
    assert (
        later.unreachable_since is not None and later.unreachable_since >= first.unreachable_since
    )
    state = home / "state" / "links-state.json"
    assert state.stat().st_mode & 0o777 == 0o600


def test_a_linked_hosts_rows_are_agent_text_and_what_is_no_session_is_left_out() -> None:
    from acpctl.cli import linked

    hostile = {
        "sessionId": "s-1",
        "live": True,
        "agent": "demo",
        "title": "\x1b]0;owned\x07\x1b[2Jtitle",
        "cwd": "/w",
        "state": "running",
        "clients": 1,
    }
    answer = Answer(HostLink("b", ssh="b"), {"sessions": [hostile, "junk", {"live": True}]})
    rows = linked.rows([answer], lambda *cells: "|".join(cells), lambda stamp: stamp)
    assert len(rows) == 1 and "\x1b" not in rows[0] and "\x07" not in rows[0]
    assert "running at b (1 client(s))" in rows[0]
    assert [e["id"] for e in linked.as_json(answer)] == ["s-1"]
    # Why a host did not answer is often its own words (a refusal, ssh's last line).
    refused = Answer(HostLink("b", ssh="b"), None, "refused: \x1b]0;owned\x07\x1b[2J", 0.0)
    said = linked.unreachable(refused)
    assert said.startswith("b: unreachable since ") and "\x1b" not in said and "\x07" not in said


# -- three hosts ----------------------------------------------------------------------------


def host_env(root: Path) -> dict[str, str]:
    """A host's own directories (its state directory short: a socket lives there)."""
    state = Path(tempfile.mkdtemp(prefix="acpf", dir="/tmp"))
    return {
        **os.environ,
        "ACPCTL_CONFIG_DIR": str(root / "config"),
        "ACPCTL_DATA_DIR": str(root / "data"),
        "ACPCTL_STATE_DIR": str(state),
    }


@contextlib.contextmanager
def a_host(env: dict[str, str], *args: str, until: bytes = rb"listening on (\S+)") -> Iterator[str]:
    """`acpctl host start ARGS` with `env`'s directories, once it says `until` (what it
    matched); stopped after."""
    process = subprocess.Popen(
        [sys.executable, "-m", "acpctl", "host", "start", "--idle-stop", "0", *args],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None
    seen = b""
    try:
        while (found := re.search(until, seen)) is None:
            line = process.stderr.readline()
            assert line, f"the host ended: {seen.decode(errors='replace')}"
            seen += line
        yield found.group(1 if found.re.groups else 0).decode()
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:  # a turn held it past its stop grace
            process.kill()
            process.wait(30)
        shutil.rmtree(env["ACPCTL_STATE_DIR"], ignore_errors=True)


def a_session(env: dict[str, str], text: str, through_host: bool = True) -> str:
    """A session left live at the host of `env` (a run through it), or only in its history
    (a direct run); its id."""
    host = ["--through-host"] if through_host else []
    ran = run_cli("run", *host, "--agent", "demo", text, env=env, timeout=60)
    assert ran.returncode == 0, ran
    listed = json.loads(run_cli("sessions", "list", "--json", env=env).stdout)
    return str(listed[0]["id"])  # the newest


async def attached_sees(
    address: str,
    history: str,
    env: dict[str, str],
    session: str,
    how: str = "attach",
    then: str = "later",
) -> None:
    """`sessions attach ADDRESS --observe` (or `sessions watch ADDRESS`) shows the session's
    history, then a turn that a client of the session's own host runs in it."""
    observe = ["--observe"] if how == "attach" else []
    watching = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "acpctl", "sessions", how, address, *observe,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert watching.stdout is not None
    seen = b""

    async def until(text: str) -> None:
        nonlocal seen
        while text.encode() not in seen:
            chunk = await asyncio.wait_for(watching.stdout.read(4096), 60)  # type: ignore[union-attr]
            assert chunk, seen
            seen += chunk

    try:
        await until(f"You said: {history}")
        prompt = ["run", "--through-host", "--agent", "demo", "--session", session, then]
        ran = await asyncio.to_thread(run_cli, *prompt, env=env, timeout=60)
        assert ran.returncode == 0, ran
        await until(f"You said: {then}")
    finally:
        watching.send_signal(signal.SIGINT)
        await watching.wait()


@pytest.mark.e2e
def test_three_hosts_one_list_and_a_host_gone_is_said_while_the_others_come(
    home: Path,
    tmp_path: Path,
    sshd: Sshd,  # noqa: F811
) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    here = dict(os.environ)
    assert cli("agents", "add", "demo", "--", *DEMO).returncode == 0
    b_env = host_env(tmp_path / "b")
    c_env = host_env(tmp_path / "c")  # ssh's own directories there are not C's
    for env in (b_env, c_env):
        assert run_cli("agents", "add", "demo", "--", *DEMO, env=env).returncode == 0
    cert, key = self_signed(tmp_path)
    tls = ("--listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(key))
    with (
        a_host(b_env, *tls, until=rb"listening on (wss://127\.0\.0\.1:\d+)/acp") as b_url,
        a_host(c_env),
    ):
        token = tmp_path / "b.token"
        token.write_text(run_cli("host", "show-token", env=b_env).stdout)
        token.chmod(0o600)
        b_session, c_session = a_session(b_env, "on b"), a_session(c_env, "on c")
        mine = a_session(here, "on a", through_host=False)
        url = ["--url", b_url, "--token-file", str(token), "--ca-file", str(cert)]
        assert cli("host", "link", "add", "b", *url).returncode == 0
        ssh = ["--ssh", "remote", "--remote-state", c_env["ACPCTL_STATE_DIR"]]
        ssh += ["--ssh-arg=-F", f"--ssh-arg={sshd.config}"]
        ssh += ["--remote-acpctl", f"{sys.executable} -m acpctl"]
        assert cli("host", "link", "add", "c", *ssh).returncode == 0

        listed = json.loads(run_cli("sessions", "list", "--json").stdout)
        where = {entry["id"]: entry["host"] for entry in listed}
        assert where == {mine: None, b_session: "b", c_session: "c"}, listed
        table = run_cli("sessions", "list").stdout
        assert re.search(rf"^b +{b_session[:14]} +demo +on b .* idle at b", table, re.M), table
        assert re.search(rf"^c +{c_session[:14]} +demo +on c ", table, re.M), table
        shown = run_cli("host", "link", "show", "c")
        assert shown.returncode == 0 and "c: answers; 1 live session(s)" in shown.stdout
        # Attached from A to B's session (wss) and to C's (ssh), by HOST:ID-prefix: the
        # history, then a turn B's (C's) own client runs in it.
        for env, session, name in ((b_env, b_session, "b"), (c_env, c_session, "c")):
            asyncio.run(attached_sees(f"{name}:{session[:12]}", f"on {name}", env, session))
        watched = attached_sees(f"b:{b_session}", "later", b_env, b_session, "watch", "watched")
        asyncio.run(watched)
        # The histories are searched where they are: B's over wss, C's over ssh.
        for name, session in (("b", b_session), ("c", c_session)):
            found = run_cli("sessions", "search", f"on {name}", "--host", name, "--json")
            hits = json.loads(found.stdout)
            assert {(h["host"], h["session"]) for h in hits} == {(name, session)}, found
        everywhere = run_cli("sessions", "search", "on", "--host", "all", "--json").stdout
        assert {h["host"] for h in json.loads(everywhere)} == {None, "b", "c"}, everywhere
        printed = run_cli("sessions", "search", "on b", "--host", "b").stdout
        assert f"b:{b_session[:14]}" in printed and "on b" in printed, printed
        nowhere = run_cli("sessions", "search", "x", "--host", "nowhere")
        assert nowhere.returncode == 2 and "no linked host 'nowhere'" in nowhere.stderr
        shown_ps = run_cli("ps").stdout
        assert re.search(rf"^ +b:  demo +{b_session[:12]}$", shown_ps, re.M), shown_ps
        assert re.search(rf"^ +c:  demo +{c_session[:12]}$", shown_ps, re.M), shown_ps

    # B and C gone: each is said unreachable, and this machine's rows still come.
    gone = run_cli("sessions", "list")
    assert re.search(rf"^\S+ +{mine[:14]} +demo +on a", gone.stdout, re.M), gone.stdout
    stamp = time.strftime("%H:")
    assert re.search(rf"^b: unreachable since {stamp}\d\d \(", gone.stdout, re.M), gone.stdout
    # Over ssh, no host is started there to answer a list: C is gone.
    assert re.search(r"^c: unreachable since .*no session host runs", gone.stdout, re.M)
    failed = run_cli("host", "link", "show", "b", "--json")
    assert failed.returncode == 0 and json.loads(failed.stdout)["reachable"] is False


@pytest.mark.e2e
def test_a_slow_host_does_not_hold_the_list_and_a_loop_lists_each_session_once(
    home: Path, tmp_path: Path
) -> None:
    """A stand-in that takes the connection and never answers is said as such after its
    deadline, while B's row comes; B links back to A, and A's list still shows B's own
    session once (links are not transitive)."""
    assert cli("agents", "add", "demo", "--", *DEMO).returncode == 0
    b_env = host_env(tmp_path / "b")
    assert run_cli("agents", "add", "demo", "--", *DEMO, env=b_env).returncode == 0

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # takes what comes, says nothing

    async def scenario(a_url: str, b_url: str) -> None:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            slow = ["host", "link", "add", "slow", "--url", f"ws://127.0.0.1:{port}"]
            # (in a thread: the command asks a running host in an event loop of its own)
            added = await asyncio.to_thread(cli, *slow, "--deadline", "1")  # its own: 1 s
            assert added.returncode == 0, added
            listing = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "acpctl",
                "sessions",
                "list",
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await listing.communicate()
        finally:
            server.close()
        text = out.decode()
        said = r"^slow: unreachable since \d\d:\d\d \(no answer within 1 s\)"
        assert re.search(said, text, re.M), text
        assert re.search(rf"^b +{b_session[:14]} ", text, re.M), text
        assert text.count(b_session[:14]) == 1, text

    b_token = tmp_path / "b.token"
    a_token = tmp_path / "a.token"
    with (
        a_host(
            b_env, "--listen", "127.0.0.1:0", until=rb"listening on (ws://127\.0\.0\.1:\d+)/acp"
        ) as b_url,
        a_host(
            dict(os.environ),
            "--listen",
            "127.0.0.1:0",
            until=rb"listening on (ws://127\.0\.0\.1:\d+)/acp",
        ) as a_url,
    ):
        b_token.write_text(run_cli("host", "show-token", env=b_env).stdout)
        a_token.write_text(run_cli("host", "show-token").stdout)
        for token in (a_token, b_token):
            token.chmod(0o600)
        b_session = a_session(b_env, "on b")
        assert (
            cli("host", "link", "add", "b", "--url", b_url, "--token-file", str(b_token)).returncode
            == 0
        )
        back = run_cli(
            "host", "link", "add", "a", "--url", a_url, "--token-file", str(a_token), env=b_env
        )
        assert back.returncode == 0, back
        asyncio.run(scenario(a_url, b_url))


@pytest.mark.e2e
def test_a_question_waiting_on_b_is_listed_at_a_and_answered_through_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's host watches B (linked over WebSocket): B's editor's permission question is in
    A's waiting list, marked b, with its choices, once it is asked (a change told); an
    observer at A cannot answer it; A's controller answers it through A, B's editor's turn
    goes on, and B's history says who answered, through which host."""
    from acpctl import protocol as acp
    from tests.test_host import Host, raw_client

    assert cli("agents", "add", "demo", "--", *DEMO).returncode == 0
    told = tmp_path / "told.jsonl"
    notifier = tmp_path / "notifier.py"
    notifier.write_text(f"import sys\nopen({str(told)!r}, 'a').write(sys.stdin.read())\n")
    config = home / "config" / "config.toml"
    config.write_text(
        config.read_text()
        + f"\n[serve]\non_waiting = [{sys.executable!r}, {str(notifier)!r}]\n"
        + "on_waiting_after_s = 0\n"
    )
    b_env, a_env = host_env(tmp_path / "b"), host_env(home)
    assert run_cli("agents", "add", "demo", "--", *DEMO, env=b_env).returncode == 0
    listen = ("--listen", "127.0.0.1:0")
    ws = rb"listening on (ws://127\.0\.0\.1:\d+/acp)"
    with a_host(b_env, *listen, until=ws) as b_url:
        b_token = tmp_path / "b.token"
        b_token.write_text(run_cli("host", "show-token", env=b_env).stdout)
        b_token.chmod(0o600)
        link = ["host", "link", "add", "b", "--url", b_url, "--token-file", str(b_token)]
        assert cli(*link).returncode == 0
        watching = ws + rb"[\s\S]*watching linked hosts b"
        with a_host(a_env, *listen, until=watching) as a_url:
            tokens = [
                run_cli("host", "show-token", *o, env=a_env).stdout.strip()
                for o in ([], ["--observer"])
            ]
            a_host_ws = Host(f"{a_url}/demo", tokens[0], tokens[1], None)  # type: ignore[arg-type]

            async def scenario() -> str:
                async with asked_on_b(b_env, a_env, monkeypatch, tmp_path) as (
                    editor,
                    viewer,
                    session,
                ):
                    entry = await waiting_at(viewer, "b")
                    assert entry["sessionId"] == session and entry["agent"] == "demo"
                    allow = next(c for c in entry["choices"] if c["kind"] == "allow_once")
                    answer = {
                        "host": "b",
                        "question": entry["question"],
                        "optionId": allow["optionId"],
                    }
                    async with raw_client(a_host_ws, a_host_ws.observer) as observer:
                        refused = await observer.request(acp.HOST_ANSWER, answer)
                        assert refused["error"]["code"] == acp.NOT_AUTHORISED, refused
                    forwarded = await viewer.request(acp.HOST_ANSWER, answer)
                    assert forwarded["result"]["forwarded"] == "b", forwarded
                    done = await editor.until(lambda m: m.get("id") == 7 and "method" not in m)
                    assert done["result"]["stopReason"] == "end_turn", done
                    await viewer.until(
                        lambda m: (
                            m.get("method") == acp.WAITING_CHANGED and not m["params"]["waiting"]
                        )
                    )
                return str(session)

            session = asyncio.run(scenario())
            # Through A to b's agent (what A's page does): an observer attaches as one, and
            # its prompt is refused at A; an unknown linked host is none.
            linked = Host(f"{a_url}/@b/demo", tokens[0], tokens[1], None)  # type: ignore[arg-type]

            async def through_a() -> None:
                async with raw_client(linked, linked.observer) as observer:
                    attach = {"sessionId": session, "role": acp.CONTROLLER, "historyPolicy": "none"}
                    attached = await observer.request(acp.SESSION_ATTACH, attach)
                    assert attached["result"]["role"] == acp.OBSERVER, attached
                    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "no"}]}
                    refused = await observer.request(acp.SESSION_PROMPT, prompt)
                    assert refused["error"]["code"] == acp.NOT_AUTHORISED, refused
                nowhere = Host(f"{a_url}/@nowhere/demo", tokens[0], tokens[1], None)  # type: ignore[arg-type]
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused_link:
                    async with raw_client(nowhere):
                        pass
                assert refused_link.value.status == 404

            asyncio.run(through_a())
            # A's on_waiting was told of b's question, as of its own (pushes likewise).
            until(lambda: told.exists() and told.read_text().strip() != "")
            summary = json.loads(told.read_text().splitlines()[0])
            assert summary["host"] == "b" and summary["sessionId"] == session, summary
            assert summary["asked"] == "Edit /tmp/demo.txt", summary

            # A's host watches b: the list takes b's sessions from it (told within a
            # second of a change: B tells its sessions at most once a second).
            def listed_from_b() -> bool:
                listed = json.loads(run_cli("sessions", "list", "--json", env=a_env).stdout)
                return [e["host"] for e in listed if e["id"] == session] == ["b"]

            until(listed_from_b)
            shown = run_cli("sessions", "show", session, env=b_env).stdout
            assert re.search(r"answered: allow, by a client, through \S+", shown), shown
            # B stopped gracefully: A's host says so, not "unreachable", and its list too.
            assert run_cli("host", "stop", env=b_env).returncode == 0

            def said_stopped() -> bool:
                listed = run_cli("sessions", "list", env=a_env).stdout
                return re.search(r"^b: stopped at \d\d:\d\d", listed, re.M) is not None

            until(said_stopped)


def until(check: Any, timeout: float = 30) -> None:
    """Until `check()` holds (asked again each tenth of a second), within `timeout`."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.1)


async def waiting_at(viewer: Any, host: str) -> dict[str, Any]:
    """The first question `host` has waiting, as this host lists it (asked, or told)."""
    from acpctl import protocol as acp

    def linked(waiting: list[dict[str, Any]]) -> dict[str, Any] | None:
        return next((e for e in waiting if e.get("host") == host), None)

    listed = await viewer.request(acp.HOST_WAITING, {})
    found = linked(listed["result"]["waiting"])
    while found is None:
        told = await viewer.until(
            lambda m: m.get("method") == acp.WAITING_CHANGED and linked(m["params"]["waiting"])
        )
        found = linked(told["params"]["waiting"])
    return found


@pytest.mark.e2e
def test_a_permission_waiting_on_b_is_answered_from_as_page_in_a_browser(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 55's check: an editor's permission waiting on host B is answered from host
    A's page (Debian's chromium). B's editor's turn goes on, and B's history names the
    device and A. The session then opens on A's page, through A, and takes a prompt; and a
    new session is started on B from A's page."""
    from tests.test_host import serving
    from tests.test_pairing import EditorsTurn, Page, paired_tab, shows

    assert cli("agents", "add", "demo", "--", *DEMO).returncode == 0
    b_env = host_env(tmp_path / "b")
    assert run_cli("agents", "add", "demo", "--", *DEMO, env=b_env).returncode == 0
    listen = ("--listen", "127.0.0.1:0", "--idle-stop", "0")
    ws = rb"listening on (ws://127\.0\.0\.1:\d+/acp)"
    with a_host(b_env, *listen[:2], until=ws) as b_url:
        b_token = tmp_path / "b.token"
        b_token.write_text(run_cli("host", "show-token", env=b_env).stdout)
        b_token.chmod(0o600)
        link = ["host", "link", "add", "b", "--url", b_url, "--token-file", str(b_token)]
        assert cli(*link).returncode == 0
        watching = re.compile(ws + rb"[\s\S]*watching linked hosts b")
        with serving(monkeypatch, *listen, until=watching) as (_, found, _state):
            page = Page(found.group(1).decode().replace("ws://", "http://").removesuffix("/acp"))
            dirs = {k: v for k, v in b_env.items() if k.startswith("ACPCTL_")}
            turn = EditorsTurn(page, "edit", {}, env=dirs)
            with paired_tab(page, (390, 844)) as tab:
                turn.thread.start()
                assert turn.asked.wait(30)
                tab.wait_for_selector("#waiting button.allow", timeout=15000)
                assert "b · demo" in tab.inner_text("#waiting")
                tab.click("#waiting button.allow")
                turn.thread.join(60)
                tab.wait_for_selector("#nothing-waits:not([hidden])")
                shows(tab, "#sessions", "b · ")  # B's live session, marked, once told
                # Opened from A's page, through A: its history, then a prompt of the page's.
                tab.click("#sessions li")
                shows(tab, "#session-where", "b · demo")
                shows(tab, "#transcript", "answered: allow, by phone (a paired device), through")
                tab.fill("#prompt", "hello from a")
                tab.click("#send")
                shows(tab, "#transcript", "You said: hello from a")
                # A new session started on b from A's page, in a project b's history knows.
                tab.click("#back")
                tab.wait_for_selector("#new-host-label:not([hidden])")
                tab.select_option("#new-host", "b")
                tab.select_option("#new-agent", "demo")
                tab.select_option("#new-project", "/tmp")
                tab.click("#new-session button")
                shows(tab, "#session-where", "b · demo · /tmp")
                tab.fill("#prompt", "made on b")
                tab.click("#send")
                shows(tab, "#transcript", "You said: made on b")
    assert turn.seen["withdrawn"] and turn.seen["stop"] == "end_turn"
    (told,) = turn.seen["told"]
    assert told["resolvedBy"]["device"] == "phone" and told["resolvedBy"]["through"]
    shown = run_cli("sessions", "show", turn.seen["session"], env=b_env).stdout
    assert re.search(r"answered: allow, by phone \(a paired device\), through \S+", shown), shown
    assert "> hello from a" in shown and "You said: hello from a" in shown, shown
    made = json.loads(run_cli("sessions", "list", "--json", env=b_env).stdout)
    assert any(m["title"] == "made on b" for m in made), made  # B's history has it


def test_who_answered_through_a_linked_host_is_said() -> None:
    from acpctl.terminal.render import answered_by

    by = {"device": "phone", "via": "link", "through": "desk"}
    assert answered_by(by) == ", by phone (a paired device), through desk"
    assert answered_by({"name": "a client", "through": "d\x1b[2Jesk"}).count("\x1b") == 0


def test_a_linked_hosts_question_is_pushed_with_one_time_answers_and_answered_through_it() -> None:
    """Issue 55, 3: the push covers a linked host's question as it covers this host's: its
    one-time answers as the notification's actions, and the answer chosen there forwarded
    to that host, by the device, from a notification; a standing option, an observer, and
    a question no longer waiting are refused."""
    import logging
    from types import SimpleNamespace

    from acpctl import protocol as acp
    from acpctl.host.notify import LinkedPushed, Notifier, linked_push_payload
    from acpctl.host.push_routes import _answer
    from acpctl.host.registry import Caller
    from acpctl.serve_config import ServeSettings

    entry = {
        "question": "demo/3",
        "sessionId": "s-1",
        "agent": "demo",
        "cwd": "/work/proj",
        "asked": "Edit x",
        "waitingSince": 1.0,
        "choices": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "always", "name": "Always", "kind": "allow_always"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    }
    said = linked_push_payload("q1", "build", entry)
    assert said["title"] == "demo asks on build in proj" and said["body"] == "Edit x"
    assert said["actions"] == [
        {"action": "allow", "title": "Allow"},
        {"action": "reject", "title": "Reject"},
    ]

    async def scenario() -> None:  # the channel a client has needs a running loop
        notifier = Notifier(ServeSettings(), logging.getLogger("test"))
        waiting = {("build", "demo/3"): entry}
        notifier.still_waiting = lambda host, question: waiting.get((host, question))
        notifier.linked_pushed["q1"] = LinkedPushed("build", "demo/3")
        forwarded: list[Any] = []

        class Linked:
            def forward(self, params: dict[str, Any], client: Any) -> dict[str, Any]:
                forwarded.append((params, client.device, client.via))
                return {"forwarded": params["host"]}

        pool: Any = SimpleNamespace(linked=Linked(), agents={})
        phone = Caller(acp.CONTROLLER, device="phone")
        standing = _answer(pool, notifier, phone, {"question": "q1", "optionId": "always"})
        assert standing is not None and standing.status == 400
        watcher = Caller(acp.OBSERVER, device="tablet")
        refused = _answer(pool, notifier, watcher, {"question": "q1", "optionId": "allow"})
        assert refused is not None and refused.status == 403
        assert _answer(pool, notifier, phone, {"question": "q1", "optionId": "allow"}) is None
        chosen = {"host": "build", "question": "demo/3", "optionId": "allow"}
        assert forwarded == [(chosen, "phone", "notification")]
        waiting.clear()  # answered meanwhile
        gone = _answer(pool, notifier, phone, {"question": "q1", "optionId": "allow"})
        assert gone is not None and gone.status == 409

    asyncio.run(scenario())


@pytest.mark.e2e
def test_a_question_waiting_on_b_goes_with_the_link_and_comes_back_with_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 55, 4: the link to B cut (a proxy between A and B refusing): A's lists say B
    is unreachable since when, and B's question leaves A's waiting list; the link back, the
    question is in it again, and answering it through A still reaches B's editor."""
    from acpctl import protocol as acp
    from tests.fault_proxy import FaultProxy

    assert cli("agents", "add", "demo", "--", *DEMO).returncode == 0
    b_env, a_env = host_env(tmp_path / "b"), host_env(home)
    assert run_cli("agents", "add", "demo", "--", *DEMO, env=b_env).returncode == 0
    ws = rb"listening on (ws://127\.0\.0\.1:(\d+)/acp)"

    def b_gone(message: dict[str, Any]) -> bool:
        if message.get("method") != acp.WAITING_CHANGED:
            return False
        return not any(e.get("host") == "b" for e in message["params"]["waiting"])

    async def scenario(b_port: int, b_token: Path) -> None:
        proxy = FaultProxy(b_port)
        port = await proxy.start()
        url = f"ws://127.0.0.1:{port}/acp"
        link = ["host", "link", "add", "b", "--url", url, "--token-file", str(b_token)]
        assert (await asyncio.to_thread(cli, *link)).returncode == 0  # its own event loop
        with a_host(a_env, until=rb"watching linked hosts b"):
            async with asked_on_b(b_env, a_env, monkeypatch, tmp_path) as (editor, viewer, session):
                await waiting_at(viewer, "b")
                proxy.refusing = True
                proxy.cut()
                await viewer.until(b_gone)
                listed = await viewer.request(acp.HOST_SESSIONS, {})
                down = [e for e in listed["result"]["sessions"] if e.get("host") == "b"]
                assert len(down) == 1 and down[0]["unreachableSince"] is not None, down
                proxy.refusing = False
                entry = await waiting_at(viewer, "b")  # back with the link
                assert entry["sessionId"] == session
                answer = {"host": "b", "question": entry["question"], "optionId": "allow"}
                forwarded = await viewer.request(acp.HOST_ANSWER, answer)
                assert forwarded["result"]["forwarded"] == "b", forwarded
                done = await editor.until(lambda m: m.get("id") == 7 and "method" not in m, 30)
                assert done["result"]["stopReason"] == "end_turn", done
        await proxy.stop()

    with a_host(b_env, "--listen", "127.0.0.1:0", until=ws) as b_url:
        b_token = tmp_path / "b.token"
        b_token.write_text(run_cli("host", "show-token", env=b_env).stdout)
        b_token.chmod(0o600)
        b_port = int(b_url.rsplit(":", 1)[1].split("/")[0])
        asyncio.run(scenario(b_port, b_token))


@pytest.mark.e2e
def test_two_hosts_watching_each_other_list_each_session_once(home: Path, tmp_path: Path) -> None:
    """Issue 55, 4: A links to B and B to A, both watching: each lists the other's own
    sessions once, marked, and its own once, unmarked; nothing comes back round (links
    are not transitive), and each host's token stays its own (never in what A lists)."""
    assert cli("agents", "add", "demo", "--", *DEMO).returncode == 0
    a_env, b_env = host_env(home), host_env(tmp_path / "b")
    assert run_cli("agents", "add", "demo", "--", *DEMO, env=b_env).returncode == 0
    from tests.test_remote import free_port

    ws = rb"listening on (ws://127\.0\.0\.1:\d+/acp)"
    ports = {name: f"127.0.0.1:{free_port()}" for name in ("a", "b")}
    tokens = {}
    with (
        a_host(a_env, "--listen", ports["a"], until=ws) as a_url,
        a_host(b_env, "--listen", ports["b"], until=ws) as b_url,
    ):
        for name, env in (("a", a_env), ("b", b_env)):
            tokens[name] = tmp_path / f"{name}.token"
            tokens[name].write_text(run_cli("host", "show-token", env=env).stdout)
            tokens[name].chmod(0o600)
        for env, name, url in ((a_env, "b", b_url), (b_env, "a", a_url)):
            link = ["host", "link", "add", name, "--url", url, "--token-file", str(tokens[name])]
            assert run_cli(*link, env=env).returncode == 0
    # Started again, both watch: each session made at its own host.
    with (
        a_host(a_env, "--listen", ports["a"], until=rb"watching linked hosts (b)"),
        a_host(b_env, "--listen", ports["b"], until=rb"watching linked hosts (a)"),
    ):
        mine = a_session(a_env, "on a")
        theirs = a_session(b_env, "on b")

        def listed(env: dict[str, str]) -> list[tuple[Any, str]]:
            shown = json.loads(run_cli("sessions", "list", "--json", env=env).stdout)
            return sorted((e.get("host") or "", e["id"]) for e in shown)

        until(lambda: listed(a_env) == [("", mine), ("b", theirs)])
        until(lambda: listed(b_env) == [("", theirs), ("a", mine)])
        # Asked directly (no host of its own watching, as `sessions list` asks then), B
        # answers with its own sessions too, not A's that it watches.
        from acpctl import protocol as acp
        from acpctl.host_links import links_of
        from acpctl.remote.fleet import ask_all

        b_link = links_of(config_of(a_env))["b"]
        [answer] = asyncio.run(ask_all([b_link], acp.HOST_SESSIONS, {}))
        listed_there = [s["sessionId"] for s in (answer.result or {})["sessions"] if s.get("live")]
        assert listed_there == [theirs], answer.result
        shown = run_cli("sessions", "list", "--json", env=a_env).stdout
        for token in tokens.values():
            assert token.read_text().strip() not in shown


@contextlib.asynccontextmanager
async def asked_on_b(
    b_env: dict[str, str], a_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, cwd: Path
) -> AsyncIterator[tuple[Any, Any, str]]:
    """An editor of B's whose turn waits on a permission (its prompt's id: 7), a client of
    A's told of changes, as the page is, and the editor's session."""
    from acpctl import protocol as acp
    from tests.test_host import unix_client

    monkeypatch.setenv("ACPCTL_STATE_DIR", b_env["ACPCTL_STATE_DIR"])
    async with unix_client("demo") as editor:
        await editor.request(acp.INITIALIZE, {"protocolVersion": 1})
        new = await editor.request(acp.SESSION_NEW, {"cwd": str(cwd), "mcpServers": []})
        session = new["result"]["sessionId"]
        await editor.send_prompt(session, "edit", msg_id=7)
        await editor.until(lambda m: m.get("method") == acp.REQUEST_PERMISSION)
        monkeypatch.setenv("ACPCTL_STATE_DIR", a_env["ACPCTL_STATE_DIR"])
        async with unix_client("demo") as viewer:
            changes = {"_meta": {acp.CHANGES_META: True}}
            await viewer.request(
                acp.INITIALIZE, {"protocolVersion": 1, "clientCapabilities": changes}
            )
            yield editor, viewer, session


@pytest.mark.e2e
def test_a_link_added_or_removed_while_the_host_runs_is_watched_at_once(
    home: Path, tmp_path: Path
) -> None:
    """`host link add` and `remove` tell this machine's running host, which watches the
    link (or stops) at once, and say so."""
    assert cli("agents", "add", "demo", "--", *DEMO).returncode == 0
    a_env, b_env = host_env(home), host_env(tmp_path / "b")
    assert run_cli("agents", "add", "demo", "--", *DEMO, env=b_env).returncode == 0
    ws = rb"listening on (ws://127\.0\.0\.1:\d+/acp)"
    with a_host(b_env, "--listen", "127.0.0.1:0", until=ws) as b_url, a_host(a_env):
        token = tmp_path / "b.token"
        token.write_text(run_cli("host", "show-token", env=b_env).stdout)
        token.chmod(0o600)
        theirs = a_session(b_env, "on b")
        link = ["host", "link", "add", "b", "--url", b_url, "--token-file", str(token)]
        added = run_cli(*link, env=a_env)
        assert "the running session host watches it now" in added.stdout, added

        def hosts_listed() -> list[Any]:
            listed = json.loads(run_cli("sessions", "list", "--json", env=a_env).stdout)
            return [(e.get("host"), e["id"]) for e in listed]

        until(lambda: hosts_listed() == [("b", theirs)])
        removed = run_cli("host", "link", "remove", "b", env=a_env)
        assert "the running session host no longer watches it" in removed.stdout, removed
        assert hosts_listed() == []


def config_of(env: dict[str, str]) -> Any:
    """config.toml of the host whose directories `env` names."""
    from acpctl import config

    return config.load(Path(env["ACPCTL_CONFIG_DIR"]) / "config.toml")
