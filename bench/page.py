"""The host's page against a stdio editor, in the same run (issue 42), on the demo agent,
in Debian's chromium driven by Playwright, over loopback.

- Opening a session of 1,000 updates (250 turns, each a prompt, a thought, a plan and an
  answer): the page, from the click on the session to its last answer shown; a stdio
  editor (`acpctl run --acp` through the host), from its session/load to the answer,
  the replay before it.
- A permission answered: an editor's turn waits on one, then the answer is given, and the
  time runs until the editor has the tool call's update that the agent sent once it had
  the answer. From the page: from the click on "Allow". From a stdio editor answering
  itself: from its answer's write.

The two sides run in turn in each repetition (in order, then reversed).

`--live` (issue 52) measures instead what a person waits for on the page pushed, not polled:
- a question asked → on the page, in the list and in the session's view (target 100 ms);
- a question asked → its Web Push sent, past `on_waiting_after_s` (to an https push
  service stand-in on 127.0.0.1);
- the bytes a first open and a reload move (targets 80 KB and 10 KB);
- with a 10,000-session history, the host's CPU and another client's turn p95 with 0, 10
  and 50 idle pages open, interleaved (target: 50 pages within 1.2x of none, under 10 ms).

    python bench/page.py [--reps 5] [--live]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from host import host, listening_url
from rawpeer import ACPCTL_COMMAND, Peer, interleaved, now, private_home

TURNS = 250  # each replays as 4 updates
UPDATED = "tool_call_update"


def acpctl(*args: str) -> str:
    return subprocess.run(
        [*ACPCTL_COMMAND, *args], capture_output=True, text=True, check=True
    ).stdout


@asynccontextmanager
async def editor_in_a_new_session(url: str, token: str) -> AsyncIterator[tuple[Editor, str]]:
    """A WebSocket editor with the token, initialized, and the session it made."""
    import aiohttp

    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Authorization": f"Bearer {token}"}) as socket,
    ):
        editor = Editor(socket)
        await editor.call("initialize", {"protocolVersion": 1})
        new = await editor.call("session/new", {"cwd": "/tmp", "mcpServers": []})
        yield editor, str(new["result"]["sessionId"])


async def made_session(url: str, token: str) -> str:
    """A session of TURNS turns at the host, by a WebSocket editor."""
    async with editor_in_a_new_session(url, token) as (editor, session):
        for _ in range(TURNS):
            prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "think, plan"}]}
            await editor.call("session/prompt", prompt)
        return session


class Editor:
    """A raw WebSocket client with the token: the editor whose turn waits."""

    def __init__(self, socket: Any) -> None:
        self.socket = socket
        self.next_id = 0

    async def send(self, message: dict[str, Any]) -> None:
        await self.socket.send_str(json.dumps({"jsonrpc": "2.0", **message}))

    async def receive(self) -> dict[str, Any]:
        return dict(json.loads((await self.socket.receive()).data))

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        await self.send({"id": self.next_id, "method": method, "params": params})
        while (message := await self.receive()).get("id") != self.next_id or "method" in message:
            pass
        return message


async def stdio_load(session: str) -> float:
    peer = await Peer.start([*ACPCTL_COMMAND, "run", "--acp", "--agent", "demo", "--through-host"])
    await peer.call("initialize", {"protocolVersion": 1})
    begin = now()
    answer = await peer.call(
        "session/load", {"sessionId": session, "cwd": "/tmp", "mcpServers": []}
    )
    elapsed = now() - begin
    assert "result" in answer, answer
    await peer.close()
    return elapsed


def paired_context(browser: Any) -> Any:
    """A browser context paired as a device through its page (its cookie and its key in
    IndexedDB kept for every tab it opens)."""
    pairing = acpctl("serve", "--pair")
    address = next(line for line in pairing.splitlines() if line.startswith("http"))
    context = browser.new_context(viewport={"width": 390, "height": 844})
    tab = context.new_page()
    tab.goto(address)
    tab.wait_for_selector("#nothing-waits:not([hidden])")  # paired, the page opened
    tab.close()
    return context


def page_load(context: Any, base: str, session: str) -> float:
    tab = context.new_page()
    tab.goto(base + "/")
    tab.wait_for_selector("#sessions li")
    begin = now()
    tab.click("#sessions li")
    while tab.evaluate("document.querySelectorAll('#transcript .you').length") < TURNS:
        time.sleep(0.005)
    elapsed = now() - begin
    tab.close()
    return elapsed


async def stdio_answer() -> float:
    """A stdio editor's own answer to the agent's permission: from its write to the tool
    call's update."""
    peer = await Peer.start([*ACPCTL_COMMAND, "run", "--acp", "--agent", "demo", "--through-host"])
    await peer.call("initialize", {"protocolVersion": 1})
    new = await peer.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    session = new["result"]["sessionId"]
    peer.send(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "edit"}]}
    )
    asked = await peer.until(lambda m: m.get("method") == "session/request_permission")
    begin = now()
    peer.write({"jsonrpc": "2.0", "id": asked["id"], "result": ALLOW})
    await peer.until(
        lambda m: m.get("params", {}).get("update", {}).get("sessionUpdate") == UPDATED
    )
    elapsed = now() - begin
    await peer.close()
    return elapsed


ALLOW = {"outcome": {"outcome": "selected", "optionId": "allow"}}


def page_answer(context: Any, base: str, url: str, token: str) -> float:
    """The page's answer to the permission an editor's turn waits on: from the click to the
    editor's tool call update."""
    asked, updated = threading.Event(), threading.Event()
    clock: dict[str, float] = {}

    async def editor_side() -> None:
        async with editor_in_a_new_session(url, token) as (editor, session):
            prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "edit"}]}
            await editor.send({"id": 99, "method": "session/prompt", "params": prompt})
            while (await editor.receive()).get("method") != "session/request_permission":
                pass
            asked.set()
            while True:
                message = await editor.receive()
                if message.get("params", {}).get("update", {}).get("sessionUpdate") == UPDATED:
                    clock["updated"] = now()
                    break
            updated.set()

    thread = threading.Thread(target=lambda: asyncio.run(editor_side()))
    tab = context.new_page()
    tab.goto(base + "/")
    thread.start()
    assert asked.wait(30)
    tab.wait_for_selector("#waiting button.allow")
    # The tap as the page gets it: Playwright's own click would add its checks and mouse
    # events (tens of milliseconds) that no person's tap waits for.
    begin = now()
    tab.evaluate("document.querySelector('#waiting button.allow').click()")
    assert updated.wait(30)
    thread.join()
    tab.close()
    return clock["updated"] - begin


def in_thread(work: Any) -> float:
    """A coroutine run to its end in a thread of its own: Playwright's synchronous API
    holds this thread's event loop."""
    done: list[float] = []
    thread = threading.Thread(target=lambda: done.append(asyncio.run(work)))
    thread.start()
    thread.join()
    return done[0]


def cell(values: list[float]) -> str:
    return f"{min(values) * 1000:.1f} / {statistics.median(values) * 1000:.1f} ms"


def main(reps: int) -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed (apt-get install chromium)"
    with host("--listen", "127.0.0.1:0", "--idle-stop", "0") as process:
        url = asyncio.run(listening_url(process))
        base = url.removesuffix("/acp").replace("ws://", "http://")
        token = acpctl("serve", "--show-token").strip()
        session = asyncio.run(made_session(url, token))
        times: dict[str, list[float]] = {
            k: [] for k in ("load page", "load stdio", "answer page", "answer stdio")
        }
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            context = paired_context(browser)
            for rep in range(reps):
                for which in interleaved(rep, ["page", "stdio"]):
                    if which == "page":
                        times["load page"].append(page_load(context, base, session))
                        times["answer page"].append(page_answer(context, base, url, token))
                    else:
                        times["load stdio"].append(in_thread(stdio_load(session)))
                        times["answer stdio"].append(in_thread(stdio_answer()))
                print(f"repetition {rep + 1} of {reps} done", file=sys.stderr)
            browser.close()
    print("| wait (min / median) | the page | a stdio editor | page − stdio (medians) |")
    print("|---|---|---|---|")
    for label, key in (
        (f"opening a session of {TURNS * 4} updates", "load"),
        ("a permission answered, to the agent's update at the editor", "answer"),
    ):
        page, stdio = times[f"{key} page"], times[f"{key} stdio"]
        gap = (statistics.median(page) - statistics.median(stdio)) * 1000
        print(f"| {label} | {cell(page)} | {cell(stdio)} | {gap:+.1f} ms |")
    print(f"\n{reps} repetitions, interleaved.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--live", action="store_true", help="the pushed page's figures")
    arguments = parser.parse_args()
    with private_home():
        if arguments.live:
            from page_live import live

            live(arguments.reps)
        else:
            main(arguments.reps)
