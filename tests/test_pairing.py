"""Issue 42, 2: pairing a device with the session host, against a real host on 127.0.0.1.
`acpctl host pair` hands out a one-time code in the page's address. The page's POST
exchanges it for an HttpOnly, SameSite=Strict cookie and a key, from the page's own origin
only. With both, the page's own origin reaches the agents in the device's role; the cookie
alone (which a browser sends to any port of the host) is refused (issue 51).
`--devices` lists the device, and `--revoke` ends it and its connections at once. The
browser half runs in Debian's chromium, driven by Playwright."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from acpctl import protocol as acp
from tests.conftest import cli, run
from tests.test_host import LISTENING, RawClient, serving

pytestmark = pytest.mark.e2e

COOKIE = "acpctl-device"  # over plain HTTP on loopback (under TLS: __Host-acpctl-device)


@dataclass
class Page:
    base: str  # http://127.0.0.1:PORT: the page's origin

    def url(self, path: str) -> str:
        return self.base + path


@pytest.fixture
def page(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Page]:
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0")
    with serving(monkeypatch, *args, until=LISTENING) as (_, found, _state):
        yield Page(found.group(1).decode().replace("ws://", "http://").removesuffix("/acp"))


def paired_address(*args: str) -> tuple[str, str]:
    """`acpctl host pair ARGS`: the address it printed, and the code in its fragment."""
    shown = cli("serve", "--pair", *args)
    assert shown.returncode == 0, shown.stderr
    (address,) = [line for line in shown.stdout.splitlines() if line.startswith("http")]
    assert "▀" in shown.stdout or "█" in shown.stdout  # the QR code, drawn in blocks
    return address, address.split("#", 1)[1]


async def exchange(
    http: aiohttp.ClientSession, page: Page, code: str, origin: str | None = None
) -> aiohttp.ClientResponse:
    headers = {"Origin": origin if origin is not None else page.base}
    async with http.post(page.url("/pair"), json={"code": code}, headers=headers) as answer:
        await answer.read()
        return answer


async def paired(http: aiohttp.ClientSession, page: Page, code: str) -> tuple[str, str]:
    """The device's two secrets, as the page gets them: the cookie, and the key in the
    answer (which the page keeps in IndexedDB)."""
    answer = await exchange(http, page, code)
    assert answer.status == 200
    return answer.cookies[COOKIE].value, (await answer.json())["key"]


def page_protocols(key: str) -> tuple[str, ...]:
    """What the page offers as WebSocket subprotocols: its own, and its device's key."""
    return (acp.WEBSOCKET_PAGE, acp.WEBSOCKET_DEVICE_KEY + key)


@asynccontextmanager
async def device_socket(
    page: Page, cookie: str, key: str, origin: str | None = None
) -> AsyncIterator[RawClient]:
    headers = {"Cookie": f"{COOKIE}={cookie}", "Origin": origin or page.base}
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(page.url("/acp"), headers=headers, protocols=page_protocols(key)) as socket,
    ):
        client = RawClient(socket)
        client.initialized = await client.request(acp.INITIALIZE, {"protocolVersion": 1})
        yield client


def test_pairing_without_a_host_or_a_listener_says_what_to_start(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alone = cli("serve", "--pair")
    assert alone.returncode == 1 and "acpctl host start --listen 127.0.0.1:8765" in alone.stderr
    with serving(monkeypatch, "--idle-stop", "0"):
        unix_only = cli("serve", "--pair")
        assert unix_only.returncode == 1 and "no TCP listener" in unix_only.stderr
        assert "--replace --listen" in unix_only.stderr
        assert cli("serve", "--devices").stdout.startswith("no device is paired")
    assert cli("serve", "--name", "x").returncode == 2  # --name goes with --pair


def test_a_code_becomes_a_device_cookie_once_and_from_the_pages_origin_only(page: Page) -> None:
    address, code = paired_address("--name", "phone")
    assert address.startswith(page.base + "/pair#")

    async def scenario() -> None:
        async with aiohttp.ClientSession() as http:
            foreign = await exchange(http, page, code, origin="http://127.0.0.1:1")
            assert foreign.status == 403
            async with http.post(
                page.url("/pair"), data=json.dumps({"code": code}), headers={"Origin": page.base}
            ) as plain:  # not sent as JSON: a form of another site's could send it
                assert plain.status == 415
            assert (await exchange(http, page, "not-the-code")).status == 403
            answer = await exchange(http, page, code)
            assert answer.status == 200
            cookie = answer.cookies[COOKIE]
            assert cookie["httponly"] and cookie["samesite"] == "Strict"
            assert cookie["path"] == "/" and not cookie["secure"]  # no TLS on loopback here
            key = (await answer.json())["key"]
            assert key and key != cookie.value
            assert (await exchange(http, page, code)).status == 403  # once only
        credential = cookie.value
        async with device_socket(page, credential, key) as phone:
            assert phone.initialized["result"]["protocolVersion"] == 1
            said = phone.initialized["result"]["_meta"]  # who it is, for the page
            assert said[acp.DEVICE_META] == "phone" and said[acp.ROLE_META] == acp.CONTROLLER
            new = await phone.request(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
            assert "result" in new, new  # a controller
            paired = (await phone.request(acp.HOST_DEVICES, {}))["result"]["devices"]
            assert [(d["name"], d["role"]) for d in paired] == [("phone", acp.CONTROLLER)]
            assert set(paired[0]) == {"name", "role", "paired", "lastSeen", "push"}  # no digest
        async with aiohttp.ClientSession() as http:
            headers = {"Cookie": f"{COOKIE}={credential}", "Origin": "http://evil.example"}
            async with http.get(page.url("/acp"), headers=headers) as other_site:
                assert other_site.status == 403
            async with http.get(
                page.url("/acp"), headers={"Cookie": f"{COOKIE}={credential}"}
            ) as no_origin:  # the cookie counts from the host's own page only
                assert no_origin.status == 401

    run(scenario())
    listed = json.loads(cli("serve", "--devices", "--json").stdout)
    assert [(d["name"], d["role"]) for d in listed] == [("phone", acp.CONTROLLER)]
    assert listed[0]["lastSeen"] is not None
    assert "phone" in cli("serve", "--devices").stdout


def test_wrong_codes_are_limited_and_the_right_credential_still_gets_in(page: Page) -> None:
    _, code = paired_address()

    async def scenario() -> None:
        async with aiohttp.ClientSession() as http:
            statuses = [(await exchange(http, page, f"guess-{n}")).status for n in range(11)]
            assert statuses == [403] * 10 + [429]
            # The right code still pairs: whoever fails on purpose locks no one out (a
            # proxy's or a NAT's address is many people's), and 128 bits are not guessed.
            assert (await exchange(http, page, code)).status == 200

    run(scenario())


def test_a_revoked_device_is_out_within_a_second(page: Page) -> None:
    _, code = paired_address("--name", "tablet", "--observer")

    async def scenario() -> None:
        async with aiohttp.ClientSession() as http:
            credential, key = await paired(http, page, code)
        async with device_socket(page, credential, key) as tablet:
            refused = await tablet.request(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
            assert refused["error"]["code"] == acp.NOT_AUTHORISED  # an observer device
            revoked = await asyncio.to_thread(cli, "serve", "--revoke", "tablet")
            assert "1 connection(s) ended" in revoked.stderr
            started = time.monotonic()
            frame = await asyncio.wait_for(tablet.socket.receive(), 1.0)
            assert frame.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            assert time.monotonic() - started < 1.0
        async with aiohttp.ClientSession() as http:
            headers = {
                "Cookie": f"{COOKIE}={credential}",
                "Origin": page.base,
                acp.DEVICE_KEY_HEADER: key,
            }
            async with http.get(page.url("/acp"), headers=headers) as again:
                assert again.status == 401

    run(scenario())
    assert cli("serve", "--revoke", "tablet").returncode == 1  # no such device any more


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    return found


# A test's self-signed certificate taken as a phone takes one it trusts: for the page's
# service worker too, which a browser fetches only over a certificate it trusts.
BROWSER_ARGS = ["--no-sandbox", "--ignore-certificate-errors"]

ARTIFACTS = Path(
    os.environ.get("ACPCTL_TEST_ARTIFACTS", Path(__file__).parent.parent / "artifacts")
)


@pytest.mark.parametrize("viewport", [(390, 844), (1280, 800)], ids=["phone", "desktop"])
def test_the_page_pairs_in_a_browser_and_never_holds_the_credential(
    page: Page, viewport: tuple[int, int]
) -> None:
    from playwright.sync_api import sync_playwright

    address, _ = paired_address("--name", "browser")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=BROWSER_ARGS)
        try:
            context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
            tab = context.new_page()
            blocked: list[str] = []
            tab.on("console", lambda m: blocked.append(m.text) if m.type == "error" else None)
            response = tab.goto(address)
            assert response is not None
            policy = response.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "default-src 'none'" in policy
            # Paired, the page opens by itself and says so.
            tab.wait_for_selector("#link:has-text('paired as')")
            assert tab.inner_text("#link") == "paired as “browser”"
            assert tab.evaluate("window.location.pathname") == "/"
            assert tab.evaluate("window.location.hash") == ""  # the code is off the address
            assert tab.evaluate("document.cookie") == ""  # HttpOnly: no script sees it
            (cookie,) = context.cookies()
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            ARTIFACTS.mkdir(exist_ok=True)
            tab.screenshot(path=str(ARTIFACTS / f"pairing-{viewport[0]}x{viewport[1]}.png"))
            again = context.new_page()  # the same address again: the code is spent
            again.goto(address)
            again.wait_for_selector("#status.problem")
            assert "wrong, used or expired" in again.inner_text("#status")
            assert blocked == [], blocked  # the policy blocked nothing of the page's own
        finally:
            browser.close()


def test_under_tls_the_cookie_is_secure_and_host_prefixed(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The page over TLS (the host's own certificate here; a proxy's works alike, docs/
    web.md): the address printed is https, and the cookie is Secure, named __Host-."""
    import ssl

    from tests.test_host import serving_tls

    with serving_tls(monkeypatch, tmp_path) as (url, cert):
        base = url.replace("wss://", "https://").removesuffix("/acp")
        address, code = paired_address("--name", "secure")
        assert address.startswith(base + "/pair#")
        trusted = ssl.create_default_context(cafile=str(cert))

        async def scenario() -> None:
            async with (
                aiohttp.ClientSession() as http,
                http.post(
                    base + "/pair", json={"code": code}, headers={"Origin": base}, ssl=trusted
                ) as answer,
            ):
                assert answer.status == 200
                cookie = answer.cookies["__Host-acpctl-device"]
                assert cookie["secure"] and cookie["httponly"] and cookie["path"] == "/"

        run(scenario())


NGINX_PAGE = """
    access_log off;
    map $http_upgrade $connection_upgrade {{ default upgrade; "" close; }}
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            proxy_pass http://127.0.0.1:{host};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_buffering off;
            proxy_read_timeout 1h;
        }}
    }}
"""


def test_behind_nginx_the_page_pairs_with_a_secure_cookie_and_answers(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """docs/web.md's TLS-terminating proxy, with Debian's nginx in front of the page: the
    host `--behind-tls-proxy`, paired with `--public-url` (the proxy's address); in the
    browser, the cookie is Secure and __Host-, and a waiting permission is answered over
    the proxied WebSocket."""
    from tests.test_host import self_signed
    from tests.test_remote import free_port, nginx_conf, wait_for_port

    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists() or shutil.which("openssl") is None:
        pytest.skip("nginx (Debian's package; .ci/run installs it) or openssl is missing")
    cert, key = self_signed(tmp_path)
    args = ("--listen", "127.0.0.1:0", "--idle-stop", "0", "--behind-tls-proxy")
    with serving(monkeypatch, *args, until=LISTENING) as (_, found, _):
        host_port = found.group(1).decode().rsplit(":", 1)[1].split("/")[0]
        port = free_port()
        http = NGINX_PAGE.format(port=port, host=host_port, cert=cert, key=key)
        conf = nginx_conf(tmp_path, http)
        proxy = subprocess.Popen([nginx, "-p", str(tmp_path), "-c", str(conf)])
        try:
            wait_for_port(port)
            page = Page(f"https://127.0.0.1:{port}")
            turn = EditorsTurn(page, "edit", {})
            with paired_tab(page, (390, 844), pair=("--public-url", page.base)) as tab:
                (cookie,) = tab.context.cookies()
                assert cookie["name"] == "__Host-acpctl-device" and cookie["secure"]
                assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
                turn.thread.start()
                assert turn.asked.wait(30)
                tab.wait_for_selector("#waiting button.allow", timeout=15000)
                tab.click("#waiting button.allow")
                turn.thread.join(60)
                tab.wait_for_selector("#nothing-waits:not([hidden])")
            assert turn.seen["withdrawn"] and turn.seen["stop"] == "end_turn"
        finally:
            proxy.terminate()
            proxy.wait(10)


class EditorsTurn:
    """An editor's turn through the host (a stdio editor: a raw client of `acpctl run --acp
    --through-host`), in a thread of its own while the test drives the browser. It prompts
    `text`, waits to be asked (`asked`; unless `asks` is False) and for its dialog to be
    withdrawn, then for the turn's end; `seen` keeps what came."""

    def __init__(
        self,
        page: Page,
        text: str,
        capabilities: dict[str, Any],
        asks: bool = True,
        answers: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        import threading

        self.page, self.text, self.capabilities = page, text, capabilities
        self.asks = asks  # the turn asks a question, which someone answers
        self.answers = answers  # the editor answers it itself, once `go` is set
        self.env = env or {}  # the editor's directories: another host's (tests/test_fleet.py)
        self.go = threading.Event()
        self.asked = threading.Event()
        self.seen: dict[str, Any] = {}
        self.thread = threading.Thread(target=lambda: asyncio.run(self._turn()))

    async def _turn(self) -> None:
        from tests.raw_peer import raw_editor

        env: Any = self.env  # only ACPCTL_ variables: none is cwd or log
        async with raw_editor("--agent", "demo", "--through-host", **env) as editor:
            hello = {
                "protocolVersion": 1,
                "clientInfo": {"name": "zed"},
                "clientCapabilities": self.capabilities,
            }
            await editor.call(acp.INITIALIZE, hello)
            new = await editor.call(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
            self.seen["session"] = session = new["result"]["sessionId"]
            prompt = {"sessionId": session, "prompt": [{"type": "text", "text": self.text}]}
            editor.send({"jsonrpc": "2.0", "id": 7, "method": acp.SESSION_PROMPT, "params": prompt})
            if self.asks:
                request = await editor.wait_for(lambda m: "method" in m and "id" in m)
                self.asked.set()
            if self.asks and self.answers:
                await asyncio.to_thread(self.go.wait, 30)
                allow = {"outcome": {"outcome": "selected", "optionId": "allow"}}
                editor.send({"jsonrpc": "2.0", "id": request["id"], "result": allow})
            elif self.asks:
                withdrawn = await editor.wait_for(lambda m: m.get("method") == acp.CANCEL_REQUEST)
                self.seen["withdrawn"] = withdrawn["params"]["requestId"] == request["id"]
            ended = await editor.wait_for(lambda m: m.get("id") == 7 and "result" in m)
            self.seen["stop"] = ended["result"]["stopReason"]
            self.seen["updates"] = [
                m["params"]["update"]
                for m in editor.messages
                if m.get("method") == acp.SESSION_UPDATE
            ]
            self.seen["told"] = [
                m["params"] for m in editor.messages if m.get("method") == acp.PERMISSION_ANSWERED
            ]

    def said(self) -> str:
        return "".join(
            u["content"]["text"]
            for u in self.seen["updates"]
            if u.get("sessionUpdate") == acp.AGENT_MESSAGE_CHUNK
        )


def an_editors_turn(
    page: Page, text: str, agent: str = "", cwd: str = "/tmp", allow: bool = False
) -> None:
    """An editor's whole turn in a new session over the host's WebSocket (the controller's
    token), `text` prompted of `agent` (the default: acpctl's); the permission it asks
    allowed, with `allow`."""
    token = cli("serve", "--show-token").stdout.strip()

    async def turn() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(page.url(f"/acp/{agent}".rstrip("/")), headers=headers) as socket,
        ):
            editor = RawClient(socket)
            await editor.request(acp.INITIALIZE, {"protocolVersion": 1})
            new = await editor.request(acp.SESSION_NEW, {"cwd": cwd, "mcpServers": []})
            await editor.send_prompt(new["result"]["sessionId"], text)
            if allow:
                asked = await editor.until(lambda m: m.get("method") == acp.REQUEST_PERMISSION)
                chosen = {"outcome": {"outcome": "selected", "optionId": "allow"}}
                await editor.send({"jsonrpc": "2.0", "id": asked["id"], "result": chosen})
            ended = await editor.until(lambda m: m.get("id") == 7 and "result" in m, 120)
            assert ended["result"]["stopReason"] == "end_turn", ended

    run(turn())


@contextmanager
def paired_tab(
    page: Page, viewport: tuple[int, int], refused: bool = False, pair: tuple[str, ...] = ()
) -> Iterator[Any]:
    """A browser tab at `viewport`, paired as "phone" (`acpctl host pair` with `pair`
    too), on the page: notifications allowed (its service worker's: `notified`); no error
    on the page by the end (`refused`: but the host's refusals of a revoked device, and its
    absence while it restarts). A test's self-signed certificate is taken as a phone takes
    one it trusts."""
    from playwright.sync_api import sync_playwright

    address, _ = paired_address("--name", "phone", *pair)
    assert address.startswith(page.base + "/pair#"), address
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=BROWSER_ARGS)
        try:
            context = browser.new_context(
                viewport={"width": viewport[0], "height": viewport[1]}, ignore_https_errors=True
            )
            # The page's notifications, allowed (the OS would show them).
            context.grant_permissions(["notifications"], origin=page.base)
            tab = context.new_page()
            errors: list[str] = []
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            tab.goto(address)
            tab.wait_for_selector("#nothing-waits:not([hidden])")  # opened by itself
            yield tab
            if refused:  # the host's refusals, and its absence while it is away
                away = ("401", "WebSocket", "ERR_CONNECTION_REFUSED")
                errors[:] = [e for e in errors if not any(word in e for word in away)]
            assert errors == [], errors
        finally:
            browser.close()


@pytest.mark.parametrize("viewport", [(390, 844), (1280, 800)], ids=["phone", "desktop"])
def test_a_permission_an_editors_turn_waits_on_is_answered_from_the_page(
    page: Page, viewport: tuple[int, int]
) -> None:
    """Issue 42: the page lists what waits, across sessions, and answers it. An editor's
    turn waits on a permission; the paired browser answers it; the editor's turn goes on,
    its own dialog withdrawn, and the history names the device."""
    turn = EditorsTurn(page, "edit", {})
    with paired_tab(page, viewport) as tab:
        turn.thread.start()
        assert turn.asked.wait(30)
        tab.wait_for_selector("#waiting button.allow", timeout=15000)
        waiting = tab.inner_text("#waiting")
        assert "Edit /tmp/demo.txt" in waiting and "+hello, world" in waiting  # and its diff
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / f"waiting-{viewport[0]}x{viewport[1]}.png"))
        told = notified(tab, 1)
        assert told == [["demo asks", "Edit /tmp/demo.txt"]], told  # once, while open
        tab.click("#waiting button.allow")
        turn.thread.join(60)
        tab.wait_for_selector("#nothing-waits:not([hidden])")
        shows(tab, "#sessions", "now")  # its age, once the host has told the sessions
        tab.click("#sessions li")  # its page: who answered, from the history
        shows(tab, "#transcript", "answered: allow, by phone (a paired device)")
    assert turn.seen["withdrawn"] and turn.seen["stop"] == "end_turn"
    tools = [
        u.get("status") for u in turn.seen["updates"] if u["sessionUpdate"] == "tool_call_update"
    ]
    assert tools == ["completed"]
    (told,) = turn.seen["told"]  # the editor is told who answered, and how
    assert told["chosenOptionId"] == "allow" and told["resolvedBy"]["device"] == "phone"
    shown = cli("sessions", "show", turn.seen["session"]).stdout
    assert "answered: allow, by phone (a paired device)" in shown


def test_a_notices_link_opens_the_session_where_the_permission_is_answered(page: Page) -> None:
    """Issue 42, 5: on_waiting's `url` (host/notify.py session_address) opens the page at
    the session, its question below the transcript; answered there. The session's address
    stays while it is open, so a reload comes back to it."""
    from acpctl.host.notify import session_address

    turn = EditorsTurn(page, "edit", {})
    with paired_tab(page, (390, 844)) as tab:
        turn.thread.start()
        assert turn.asked.wait(30)
        tab.goto("about:blank")
        tab.goto(session_address(page.base, "demo", turn.seen["session"]))
        tab.wait_for_selector("#session-view:not([hidden]) #view-asked button.allow")
        assert "Edit /tmp/demo.txt" in tab.inner_text("#view-asked")
        tab.reload()
        tab.wait_for_selector("#session-view:not([hidden]) #view-asked button.allow")
        tab.click("#view-asked button.allow")
        turn.thread.join(60)
        shows(tab, "#transcript", "answered: allow, by you")
        tab.click("#back")
        assert tab.evaluate("window.location.hash") == ""
    assert turn.seen["withdrawn"] and turn.seen["stop"] == "end_turn"
    shown = cli("sessions", "show", turn.seen["session"]).stdout
    assert "answered: allow, by phone (a paired device)" in shown


def test_an_observer_device_sees_what_waits_and_is_offered_nothing_to_do(
    page: Page, tmp_path: Path
) -> None:
    """Issue 42, 3: an observer device (`--pair --observer`) sees what waits and the
    session's transcript, and the page shows it no answer, no prompt and no "New session"
    (the initialize answer says its role); the editor answers."""
    assert cli("run", "--agent", "demo", "--cwd", str(tmp_path), "hello").returncode == 0
    turn = EditorsTurn(page, "edit", {}, answers=True)
    with paired_tab(page, (390, 844), pair=("--observer",)) as tab:
        turn.thread.start()
        assert turn.asked.wait(30)
        shows(tab, "#waiting", "This device watches only: it cannot answer.", timeout=15)
        shows(tab, "#devices", "phone")
        assert "this device" in tab.inner_text("#devices")
        assert "observer · seen now" in tab.inner_text("#devices")
        assert tab.locator("#waiting button").count() == 0
        assert not tab.is_visible("#new-session")  # a controller would be offered it
        tab.click("#sessions li")
        tab.wait_for_selector("#watch-only", state="visible")
        shows(tab, "#transcript", "edit")
        assert not tab.is_visible("#prompt-form")
        turn.go.set()
        turn.thread.join(60)
    assert turn.seen["stop"] == "end_turn"


async def _a_session_elsewhere() -> None:
    from tests.test_host import unix_client

    async with unix_client("demo") as client:
        await client.request(acp.INITIALIZE, {"protocolVersion": 1})
        await client.request(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})


def test_a_question_an_editors_turn_waits_on_is_answered_in_a_form_on_the_page(
    page: Page,
) -> None:
    """Issue 42, 3: an elicitation's form, made from the agent's schema, filled in and sent
    from the page (the demo agent's `ask`: a name, and whether to be excited)."""
    turn = EditorsTurn(page, "ask", {"elicitation": {"form": {}}})
    with paired_tab(page, (390, 844)) as tab:
        turn.thread.start()
        assert turn.asked.wait(30)
        tab.wait_for_selector("#waiting form.question", timeout=15000)
        assert "What should the demo call you?" in tab.inner_text("#waiting")
        tab.click("#waiting form.question button.allow")  # empty: the browser says required
        assert (
            tab.evaluate("document.querySelector('#waiting input[name=name]').validity.valid")
            is False
        )
        tab.fill("#waiting input[name=name]", "Ada")
        tab.check("#waiting input[name=excited]")
        # Something changes elsewhere while the form is being filled in (a new session):
        # the page redraws its lists, and what was typed stays (it was emptied, and the
        # answer then went nowhere: the browser refused the empty required field).
        elsewhere = threading.Thread(target=lambda: run(_a_session_elsewhere()))
        elsewhere.start()  # Playwright's loop runs in this thread
        elsewhere.join(60)
        tab.wait_for_selector("#sessions li:nth-child(2)")
        assert tab.input_value("#waiting input[name=name]") == "Ada"
        assert tab.is_checked("#waiting input[name=excited]")
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / "question-390x844.png"))
        tab.click("#waiting form.question button.allow")
        turn.thread.join(60)
    assert turn.seen["withdrawn"] and turn.seen["stop"] == "end_turn"
    assert "Hello, Ada!" in turn.said()
    shown = cli("sessions", "show", turn.seen["session"]).stdout
    assert "answered: accept (name='Ada', excited=True), by phone (a paired device)" in shown


def test_the_agents_text_on_the_page_is_text(page: Page) -> None:
    """Issue 42, 6: what an agent wrote (a session's title here) is shown as text: no
    markup of it is parsed, nothing of it runs."""
    from playwright.sync_api import sync_playwright

    address, _ = paired_address("--name", "reader")
    hostile = "title <img src=x onerror=window.pwned=1><script>window.pwned=2</script>"
    an_editors_turn(page, hostile)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), args=BROWSER_ARGS)
        try:
            tab = browser.new_page()
            tab.goto(address)  # paired, the page opens by itself
            tab.wait_for_selector("#sessions li")
            assert "<img src=x onerror=window.pwned=1>" in tab.inner_text("#sessions")
            assert (
                tab.evaluate("document.querySelectorAll('#sessions img, #sessions script').length")
                == 0
            )
            assert tab.evaluate("window.pwned === undefined")
        finally:
            browser.close()


def test_a_sessions_transcript_is_shown_prompted_cancelled_and_caught_up(page: Page) -> None:
    """Issue 42, 3: a session opened on the page shows its history and what follows:
    messages with their Markdown rendered safely, thoughts folded, the plan, a tool call
    with its diff. The page prompts, sets the agent's mode and options, and cancels. A
    dropped connection resumes by its cursor, or, refused, is made anew from the history:
    nothing lost, nothing twice."""
    hostile = (
        "think, plan and edit: **bold** <script>window.pwned=1</script> [x](javascript:alert(1))"
    )
    an_editors_turn(page, hostile, allow=True)
    with paired_tab(page, (390, 844)) as tab:
        tab.wait_for_selector("#sessions li")
        tab.click("#sessions li")
        tab.wait_for_selector("#transcript details.tool")
        transcript = tab.inner_text("#transcript")
        assert "Edit /tmp/demo.txt · completed" in transcript
        assert "+hello, world" in transcript and "-hello" in transcript
        assert tab.evaluate("document.querySelectorAll('#transcript strong').length") >= 1
        assert tab.evaluate("document.querySelectorAll('#transcript details.thought').length") == 1
        assert "Read the prompt" in transcript  # the plan
        dangerous = "#transcript script, #transcript [href^=javascript]"
        assert tab.evaluate(f"document.querySelectorAll('{dangerous}').length") == 0
        assert tab.evaluate("window.pwned === undefined")
        tab.fill("#prompt", "hello page")
        tab.click("#send")
        # The turn's own end (the replay's recorded answer is an .ended line already).
        shows(tab, "#transcript", "turn ended: end_turn")
        assert "You said: hello page" in tab.inner_text("#transcript")
        tab.select_option("#settings select[name=mode]", "shout")  # the agent's own modes
        tab.select_option("#settings select[name=tone]", "excited")  # and options
        deadline = time.monotonic() + 10  # set_mode and set_config_option answered
        while in_page(tab, "[view.modes.currentModeId, view.options[0].currentValue]") != [
            "shout",
            "excited",
        ]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        tab.fill("#prompt", "modes")
        tab.click("#send")
        shows(tab, "#transcript", "YOU SAID: MODES!")
        tab.fill("#prompt", "slow")
        tab.click("#send")
        shows(tab, "#transcript", "YOU SAID: SLOW")  # shouted; the slow turn: 20 pieces in 2 s
        tab.click("#cancel")
        shows(tab, "#transcript", "turn ended: cancelled")
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / "transcript-390x844.png"), full_page=True)
        before = tab.inner_text("#transcript")
        in_page(tab, "view.connection.socket.close()")  # the phone slept, its socket gone
        deadline = time.monotonic() + 10
        while in_page(tab, "view.resumes") != 1:  # resumed by its cursor: nothing changes
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert tab.inner_text("#transcript") == before
        # A cursor the host does not hold (past its grace time, say): made anew from the
        # history instead.
        in_page(tab, "view.connection.cursor = '999999999', view.connection.socket.close()")
        shows(tab, "#transcript", "turn ended: cancelled", gone=True)  # made anew: no ends
        shows(tab, "#transcript", "You said: hello page")
        assert in_page(tab, "view.replays") == 2
        after = tab.inner_text("#transcript")
        assert after.count("You said: hello page") == 1
        assert tab.evaluate("document.querySelectorAll('#transcript details.tool').length") == 1
        assert "answered: allow" in after  # the history's answer, with the rest
        assert "Read the prompt" in after and "bold" in after and "+hello, world" in after
        assert before.count("You said") == after.count("You said")


SETTLED = """async () => {
    await fetch("/manifest.webmanifest", { cache: "no-store" });
    await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
}"""


def settled(tab: Any) -> None:
    """Until the page has drawn twice and a request of its own has come back: a load or a
    script the page's content started would have had its turn."""
    tab.evaluate(SETTLED)


def in_page(tab: Any, expression: str) -> Any:
    """`expression` evaluated with the page's state (state.js: `page`, `view`) in scope:
    the same module the page runs, imported through its import map."""
    return tab.evaluate(
        "async () => { const { page, view } = await import('/assets/state.js'); "
        f"return {expression}; }}"
    )


SHOWN_NOTIFICATIONS = """async () => {
    const worker = await navigator.serviceWorker.ready;
    return (await worker.getNotifications()).map((n) => [n.title, n.body]);
}"""


def notified(tab: Any, count: int, timeout: float = 10) -> list[list[str]]:
    """The notifications the page's service worker shows, once there are `count`."""
    deadline = time.monotonic() + timeout
    while len(shown := tab.evaluate(SHOWN_NOTIFICATIONS)) < count:
        assert time.monotonic() < deadline, shown
        time.sleep(0.05)
    return list(shown)


def shows(tab: Any, selector: str, text: str, gone: bool = False, timeout: float = 10) -> None:
    """Until the element's text has `text` (`gone`: no longer has it); the page's policy
    forbids the string evaluation Playwright's wait_for_function would use."""
    deadline = time.monotonic() + timeout
    while (text in tab.inner_text(selector)) == gone:
        assert time.monotonic() < deadline, tab.inner_text(selector)
        time.sleep(0.05)


def test_the_attack_corpus_runs_fetches_and_hides_nothing_on_the_page(page: Page) -> None:
    """Issue 42, 6: the attack corpus (tests/attacks.py) as an agent's message (the demo
    agent echoes it) and as the person's: no script runs, no request leaves the page, no
    text is hidden, no element of the agent's carries a handler."""
    from tests.attacks import ATTACKS

    an_editors_turn(page, "\n\n".join(ATTACKS))
    with paired_tab(page, (1280, 800)) as tab:
        requested: list[str] = []
        tab.on("request", lambda request: requested.append(request.url))
        tab.wait_for_selector("#sessions li")
        tab.click("#sessions li")
        tab.wait_for_selector("#transcript .agent")
        settled(tab)  # whatever would run or load has had its turn
        agent = tab.inner_text("#transcript .agent")
        assert agent.count("ATTACK") == len(ATTACKS), agent  # all shown, none hidden
        assert tab.inner_text("#transcript .you").count("ATTACK") == len(ATTACKS)
        dangerous = "script, iframe, svg, math, style, img, form, meta, base, object, embed"
        assert (
            tab.evaluate(f"document.querySelectorAll('#transcript :is({dangerous})').length") == 0
        )
        handlers = tab.evaluate(
            "[...document.querySelectorAll('#transcript *')]"
            ".some(e => [...e.attributes].some(a => a.name.startsWith('on') || a.name === 'style'))"
        )
        assert handlers is False
        links = tab.evaluate("[...document.querySelectorAll('#transcript a')].map(a => a.href)")
        assert all(link.startswith(("http://", "https://")) for link in links), links
        assert tab.evaluate("window.pwned === undefined")
        assert all(url.startswith(page.base) for url in requested), requested


def test_a_new_session_is_started_from_the_page_in_a_project_the_history_knows(
    page: Page, tmp_path: Path
) -> None:
    """Issue 42, 3: the sessions list holds the history's recent sessions too; one opens
    again with its transcript and takes a prompt. "New session": an agent, and a project
    from the history (`_acpctl/projects`); the session opens, and the page prompts in it."""
    project = tmp_path / "app"
    project.mkdir()
    run_turn = cli("run", "--agent", "demo", "--cwd", str(project), "hello")
    assert run_turn.returncode == 0, run_turn.stderr
    with paired_tab(page, (390, 844)) as tab:
        shows(tab, "#sessions li .state", "recent")
        tab.click("#sessions li")
        shows(tab, "#transcript", "You said: hello")
        tab.fill("#prompt", "again")
        tab.click("#send")
        shows(tab, "#transcript", "You said: again")
        tab.click("#back")
        tab.wait_for_selector("#new-session:not([hidden])")
        assert (
            tab.evaluate("[...document.querySelectorAll('#new-agent option')].map(o => o.value)")[0]
            == "demo"
        )
        tab.select_option("#new-project", str(project))
        tab.click("#new-session button")
        tab.wait_for_selector("#session-view:not([hidden])")
        assert str(project) in tab.inner_text("#session-where")
        tab.fill("#prompt", "fresh")
        tab.click("#send")
        shows(tab, "#transcript", "You said: fresh")
    listed = json.loads(cli("sessions", "list", "--json").stdout)
    ours = [s["id"] for s in listed if s["cwd"] == str(project)]
    assert len(ours) == 2  # the run's and the page's
    shown = [cli("sessions", "show", session).stdout for session in ours]
    assert any("hello" in text and "again" in text for text in shown)  # reopened, in its history


@pytest.mark.npm
def test_the_page_with_claude_agent_acp_on_the_model_stand_in(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: the page works with a real agent: claude-agent-acp (npm, pinned) on the
    model stand-in, through the host: an editor's turn, then the page shows its session,
    and prompts in it."""
    from tests.npm_agents import claude_on_the_stand_in

    package, reply = "@agentclientprotocol/claude-agent-acp", "Hello from the **stand-in** model."
    with claude_on_the_stand_in(home, package, reply) as stub:
        args = ("--listen", "127.0.0.1:0", "--idle-stop", "0")
        with serving(monkeypatch, *args, until=LISTENING) as (_, found, _state):
            claude_page = Page(
                found.group(1).decode().replace("ws://", "http://").removesuffix("/acp")
            )
            an_editors_turn(claude_page, "Say hello", agent="claude", cwd=str(home))
            with paired_tab(claude_page, (390, 844)) as tab:
                tab.wait_for_selector("#sessions li")
                assert "claude" in tab.inner_text("#sessions")
                tab.click("#sessions li")
                shows(tab, "#transcript", "Hello from the stand-in model.", timeout=30)
                assert tab.evaluate("document.querySelectorAll('#transcript strong').length") >= 1
                stub.default_reply = "A second answer."
                tab.fill("#prompt", "Once more")
                tab.click("#send")
                shows(tab, "#transcript", "A second answer.", timeout=60)
                ARTIFACTS.mkdir(exist_ok=True)
                tab.screenshot(path=str(ARTIFACTS / "claude-390x844.png"), full_page=True)


def test_a_connection_dropped_mid_stream_loses_nothing_and_doubles_nothing(page: Page) -> None:
    """Issue 42: the page's connection drops while an editor's turn streams (the phone
    slept); resumed by its cursor on a new socket, its transcript ends with every piece of
    the answer once."""
    turn = EditorsTurn(page, "slow", {}, asks=False)
    with paired_tab(page, (390, 844)) as tab:
        turn.thread.start()
        tab.wait_for_selector("#sessions li")
        tab.click("#sessions li")
        shows(tab, "#transcript", "You said: slow")  # streaming: 20 pieces in 2 s
        in_page(tab, "view.connection.socket.close()")
        turn.thread.join(30)
        assert turn.seen["stop"] == "end_turn"
        # The demo agent's slow answer: its words, 20 pieces in all, in the order it sent.
        whole = "".join((["You ", "said: ", "slow"] * 20)[:20]).strip()
        shows(tab, "#transcript", whole)
        answer = tab.inner_text("#transcript .agent")
        assert answer.strip() == whole, answer  # each piece once, none missing
        # Caught up by its cursor on the same connection, not made anew from the history.
        assert in_page(tab, "[view.resumes, view.replays]") == [1, 1]


def test_the_page_shows_who_answered_when_another_client_does(page: Page) -> None:
    """Issue 42, 3: the first answer wins, wherever it comes from; everyone else sees who
    answered and how: here the editor answers, and the page watching the session says
    so, and drops the question."""
    turn = EditorsTurn(page, "edit", {}, answers=True)
    with paired_tab(page, (390, 844)) as tab:
        turn.thread.start()
        assert turn.asked.wait(30)
        tab.wait_for_selector("#sessions li")
        tab.click("#sessions li")
        tab.wait_for_selector("#view-asked button.allow")  # asked here too
        turn.go.set()
        shows(tab, "#transcript", "answered: allow, by zed")
        tab.wait_for_selector("#view-asked", state="detached")
        turn.thread.join(30)
    assert turn.seen["stop"] == "end_turn"


def test_a_revoked_device_is_out_of_the_page(page: Page) -> None:
    """Issue 42: revoke the device: the page's connections end at once, and the page, which
    cannot come back, says so."""
    from tests.conftest import run_cli

    with paired_tab(page, (390, 844), refused=True) as tab:
        tab.wait_for_selector("#nothing-waits:not([hidden])")
        revoked = run_cli("serve", "--revoke", "phone")
        assert revoked.returncode == 0, revoked.stderr
        shows(tab, "#link", "this device is not paired, or was revoked")


@contextmanager
def recording_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Another server on this machine's loopback, on another port (a dev server; or one a
    sandboxed agent started): its address, and the headers of each request it was sent."""
    import http.server
    import threading

    received: list[dict[str, str]] = []

    class Recording(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            received.append(dict(self.headers.items()))
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<p>another server</p>")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("tls", [False, True], ids=["http", "tls"])
def test_a_cookie_sent_to_another_port_gets_no_one_in(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tls: bool
) -> None:
    """Issue 51, 6: browsers send a host's cookies to every port of it. A paired browser
    opens another server of this machine, which takes the device's cookie (the Secure one
    too, under TLS) and replays it with a forged Origin: refused, over WebSocket and HTTP.
    The page itself still gets in after a reload and after the browser restarts."""
    from playwright.sync_api import sync_playwright

    from tests.test_host import serving_tls

    @contextmanager
    def host() -> Iterator[str]:
        if tls:
            with serving_tls(monkeypatch, tmp_path) as (wss, _cert):
                yield wss
        else:
            args = ("--listen", "127.0.0.1:0", "--idle-stop", "0")
            with serving(monkeypatch, *args, until=LISTENING) as (_process, found, _state):
                yield found.group(1).decode()

    with host() as url:
        base = url.replace("wss://", "https://").replace("ws://", "http://").removesuffix("/acp")
        cookie_name = "__Host-acpctl-device" if tls else COOKIE
        address, _ = paired_address("--name", "phone")
        profile = tmp_path / "profile"

        def browse(*addresses: str) -> None:
            with sync_playwright() as playwright:
                context = playwright.chromium.launch_persistent_context(
                    str(profile),
                    executable_path=chromium(),
                    args=["--no-sandbox"],
                    ignore_https_errors=True,
                )
                try:
                    tab = context.new_page()
                    for where in addresses:
                        tab.goto(where)
                        if where.startswith(base + "/pair"):  # paired: the page opens
                            tab.wait_for_selector("#nothing-waits:not([hidden])")
                        elif where.startswith(base):  # the page, in: its lists shown
                            tab.wait_for_selector("#nothing-waits:not([hidden])")
                            tab.reload()
                            tab.wait_for_selector("#nothing-waits:not([hidden])")
                finally:
                    context.close()

        with recording_server() as (other, received):
            browse(address, base + "/", other + "/")
        taken = [h.get("Cookie", "") for h in received]
        assert any(cookie_name in c for c in taken), taken  # the browser sent it there

        async def replay() -> list[int]:
            statuses = []
            for headers in received:
                forged = {**headers, "Origin": base, "Host": base.split("://", 1)[1]}
                async with aiohttp.ClientSession() as http:
                    async with http.get(base + "/acp", headers=forged, ssl=False) as plain:
                        statuses.append(plain.status)
                    try:
                        async with http.ws_connect(
                            url,
                            headers=forged,
                            ssl=False,
                            protocols=(acp.WEBSOCKET_PAGE, acp.WEBSOCKET_DEVICE_KEY + "guess"),
                        ):
                            statuses.append(101)
                    except aiohttp.WSServerHandshakeError as refused:
                        statuses.append(refused.status)
            return statuses

        statuses = run(replay())
        assert statuses and set(statuses) == {401}, statuses
        browse(base + "/")  # the browser restarted: the page gets in, still paired


def test_after_the_host_is_killed_and_an_editor_starts_it_the_page_is_back_on_its_own(
    page: Page, home: Path
) -> None:
    """Issue 52, 4: after `kill -9` of a host started with --listen, an editor's run --acp
    started a host with no TCP listener, and the page said "is this device paired?". The
    listener is kept in config.toml's [serve] as bound, so any start of the host has it:
    the page says the host is unreachable while it is, and comes back, still paired. A
    revoked device is told so, and its lists are cleared."""
    import signal as signals

    from acpctl.config import load
    from acpctl.remote.host_socket import start_host
    from tests.conftest import run_cli, stop_running_host

    listener = load().serve.listener
    assert listener is not None and listener.listen == page.base.removeprefix("http://")
    an_editors_turn(page, "hello")
    try:
        with paired_tab(page, (390, 844), refused=True) as tab:
            tab.wait_for_selector("#sessions li")
            status = json.loads(run_cli("serve", "--status", "--json").stdout)
            os.kill(status["pid"], signals.SIGKILL)
            shows(tab, "#link", "the host is not reachable (retrying since", timeout=30)
            start_host()  # as an editor's run --acp starts it, with no option of its own
            shows(tab, "#link", "not reachable", gone=True, timeout=60)
            tab.wait_for_selector("#sessions li")  # back, paired: its lists again
            assert "not paired" not in tab.inner_text("#link")
            assert run_cli("serve", "--revoke", "phone").returncode == 0
            shows(tab, "#link", "this device is not paired, or was revoked", timeout=30)
            assert tab.evaluate("document.querySelectorAll('#sessions li').length") == 0
    finally:
        stop_running_host()


def terminal_image(text: str, foreground: int, background: int, path: Path) -> Path:
    """What a terminal shows of `text` (its half blocks, and the 256-colour black and white
    it sets) as a grey image (PGM), in a theme of `foreground` on `background`: a module
    four pixels square, which zbar reads as a camera would."""
    import re

    palette = {"16": 0, "231": 255}
    rows: list[list[int]] = []
    for line in text.splitlines():
        if "▀" not in line and "▄" not in line and "█" not in line:
            continue
        upper: list[int] = []
        lower: list[int] = []
        fg, bg = foreground, background
        for token in re.findall(r"\x1b\[[0-9;]*m|.", line):
            if token.startswith("\x1b["):
                codes = token[2:-1].split(";")
                if codes in ([""], ["0"]):
                    fg, bg = foreground, background
                for index, code in enumerate(codes[:-2]):
                    if code in ("38", "48") and codes[index + 1] == "5":
                        shade = palette.get(codes[index + 2], 128)
                        fg, bg = (shade, bg) if code == "38" else (fg, shade)
                continue
            top = fg if token in "▀█" else bg
            bottom = fg if token in "▄█" else bg
            upper += [top] * 4
            lower += [bottom] * 4
        rows += [upper] * 4 + [lower] * 4
    width = max(len(row) for row in rows)
    margin = 16  # the terminal's own background around it
    pixels = [[background] * (width + 2 * margin) for _ in range(margin)]
    pixels += [
        [background] * margin + row + [background] * (width - len(row) + margin) for row in rows
    ]
    pixels += [[background] * (width + 2 * margin) for _ in range(margin)]
    header = f"P5 {len(pixels[0])} {len(pixels)} 255\n".encode()
    path.write_bytes(header + bytes(value for row in pixels for value in row))
    return path


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_pairing_qr_code_reads_on_light_and_dark_terminals_and_as_a_png(
    page: Page, theme: str, tmp_path: Path
) -> None:
    """Issue 52, 5: zbar (Debian's zbar-tools) reads the terminal's QR code in a light and a
    dark theme, and the image --qr-png writes."""
    zbarimg = shutil.which("zbarimg")
    if zbarimg is None:
        pytest.skip("zbarimg is not installed (apt-get install zbar-tools; .ci/run does)")
    png = tmp_path / "pair.png"
    shown = cli("serve", "--pair", "--name", f"qr-{theme}", "--qr-png", str(png))
    assert shown.returncode == 0, shown.stderr
    (address,) = [line for line in shown.stdout.splitlines() if line.startswith("http")]
    fg, bg = (30, 250) if theme == "light" else (230, 20)
    image = terminal_image(shown.stdout, fg, bg, tmp_path / f"{theme}.pgm")
    for picture in (image, png):
        read = subprocess.run(
            [zbarimg, "--raw", "-q", str(picture)], capture_output=True, text=True, timeout=60
        )
        assert read.stdout.strip() == address, (picture.name, read.stdout, read.stderr)
    assert png.read_bytes().startswith(b"\x89PNG")
