"""Linked hosts (issue 55): what a person waits for when this machine's host (A) links
other machines' (B, C; here, hosts of their own directories on this machine, linked over
WebSocket on loopback).

- A question asked on B, seen at A: from B's editor being asked a permission to a client
  of A that asked to be told of changes (as the page does) being told it waits, marked b
  (both read at once, each timed as it arrives: the client of A may be told first).
- A's lists with 3 hosts × SESSIONS live sessions: A's `_acpctl/sessions` and
  `_acpctl/waiting`, answered to a client of A (what the page asks as it opens).
- A's memory: its resident set with its links watched against none.
- `acpctl sessions list` with B and C linked against the same list with no link.

    python bench/fleet.py [--reps 20] [--sessions 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from rawpeer import ACPCTL_COMMAND, DEMO, agents_add, interleaved, now, percentile, private_home

from acpctl import jsonrpc
from acpctl import protocol as acp

WS = re.compile(rb"listening on (ws://127\.0\.0\.1:\d+/acp)")


def dirs(root: Path) -> dict[str, str]:
    state = tempfile.mkdtemp(prefix="acpb", dir="/tmp")  # short: a socket lives there
    return {
        "ACPCTL_CONFIG_DIR": str(root / "config"),
        "ACPCTL_DATA_DIR": str(root / "data"),
        "ACPCTL_STATE_DIR": state,
    }


@contextlib.contextmanager
def a_host(env: dict[str, str], until: bytes = WS.pattern) -> Iterator[tuple[str, int]]:
    """`acpctl host start` listening on loopback with `env`'s directories: its address
    and pid, once its stderr says `until`."""
    process = subprocess.Popen(
        [*ACPCTL_COMMAND, "host", "start", "--listen", "127.0.0.1:0", "--idle-stop", "0"],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
    )
    assert process.stderr is not None
    seen = b""
    while re.search(until, seen) is None:
        line = process.stderr.readline()
        assert line, seen.decode(errors="replace")
        seen += line
    address = WS.search(seen)
    assert address is not None
    try:
        yield address.group(1).decode(), process.pid
    finally:
        process.terminate()
        process.wait(30)


class Client:
    """A client of a host's unix socket, connected to its demo agent."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.ids = iter(range(1, 1 << 30))
        self.seen: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, env: dict[str, str], changes: bool = False) -> Client:
        path = Path(env["ACPCTL_STATE_DIR"]) / "host" / "acp.sock"
        reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 26)
        client = cls(reader, writer)
        client.send(0, acp.HOST_CONNECT, {"agent": "demo"})
        await client.until(lambda m: m.get("id") == 0)
        meta = {"_meta": {acp.CHANGES_META: True}} if changes else {}
        await client.call(acp.INITIALIZE, {"protocolVersion": 1, "clientCapabilities": meta})
        return client

    def send(self, msg_id: Any, method: str, params: Any) -> None:
        self.writer.write(jsonrpc.encode(jsonrpc.request(msg_id, method, params)))

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        msg_id = next(self.ids)
        self.send(msg_id, method, params)
        return await self.until(lambda m: m.get("id") == msg_id and "method" not in m)

    async def until(self, wanted: Any) -> dict[str, Any]:
        for i, message in enumerate(self.seen):
            if wanted(message):
                return self.seen.pop(i)
        while True:
            line = await asyncio.wait_for(self.reader.readline(), 60)
            assert line, "the host closed the connection"
            message = json.loads(line)
            if wanted(message):
                return message  # type: ignore[no-any-return]
            self.seen.append(message)
            del self.seen[:-200]

    def close(self) -> None:
        self.writer.close()


async def sessions_on(env: dict[str, str], count: int) -> Client:
    """`count` live sessions at the host of `env`, held by the client returned."""
    client = await Client.open(env)
    for _ in range(count):
        await client.call(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []})
    return client


async def question_seen(b: dict[str, str], a: dict[str, str], reps: int) -> list[float]:
    editor = await Client.open(b)
    session = (await editor.call(acp.SESSION_NEW, {"cwd": "/tmp", "mcpServers": []}))["result"]
    viewer = await Client.open(a, changes=True)
    took = []

    def at_b(message: dict[str, Any]) -> bool:
        waiting = message.get("params", {}).get("waiting", [])
        return message.get("method") == acp.WAITING_CHANGED and any(
            e.get("host") == "b" for e in waiting
        )

    async def when(client: Client, wanted: Any) -> tuple[float, dict[str, Any]]:
        message = await client.until(wanted)
        return now(), message

    for n in range(reps):
        prompt = {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "edit"}]}
        editor.send(f"prompt-{n}", acp.SESSION_PROMPT, prompt)
        # Both read at once: each is timed as it arrives, whichever comes first.
        (asked_at, asked), (told_at, _) = await asyncio.gather(
            when(editor, lambda m: m.get("method") == acp.REQUEST_PERMISSION),
            when(viewer, at_b),
        )
        took.append(told_at - asked_at)
        allow = {"outcome": {"outcome": "selected", "optionId": "allow"}}
        editor.writer.write(jsonrpc.encode(jsonrpc.result(asked["id"], allow)))
        await editor.until(lambda m, n=n: m.get("id") == f"prompt-{n}" and "method" not in m)
        await viewer.until(lambda m: m.get("method") == acp.WAITING_CHANGED and not at_b(m))
    editor.close()
    viewer.close()
    return took


async def lists_at(a: dict[str, str], reps: int) -> tuple[list[float], int]:
    viewer = await Client.open(a, changes=True)
    took, listed = [], 0
    for _ in range(reps):
        begin = now()
        sessions = await viewer.call(acp.HOST_SESSIONS, {})
        await viewer.call(acp.HOST_WAITING, {})
        took.append(now() - begin)
        listed = sum(1 for s in sessions["result"]["sessions"] if s.get("live"))
    viewer.close()
    return took, listed


def page_opens(env: dict[str, str], url: str, count: int, reps: int) -> list[float]:
    """A's page in Debian's chromium (a paired device), from its address asked to every
    host's live sessions listed; none without chromium or Playwright (said)."""
    import shutil

    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        print(
            "(the page is not timed: Debian's chromium and Playwright are needed)", file=sys.stderr
        )
        return []
    pairing = subprocess.run(
        [*ACPCTL_COMMAND, "host", "pair"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    ).stdout
    address = next(line for line in pairing.splitlines() if line.startswith("http"))
    base = url.removesuffix("/acp").replace("ws://", "http://")
    took = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 390, "height": 844})
        tab = context.new_page()
        tab.goto(address)
        tab.wait_for_selector("#nothing-waits:not([hidden])")  # paired, the page opened
        tab.close()
        for _ in range(reps):
            tab = context.new_page()
            begin = now()
            tab.goto(base + "/")
            listed = "document.querySelectorAll('#sessions li .state.idle').length"
            while tab.evaluate(listed) < count:  # (a function waited on is eval: the CSP's no)
                time.sleep(0.005)
            took.append(now() - begin)
            tab.close()
        browser.close()
    return took


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def listed_in(env: dict[str, str]) -> float:
    begin = now()
    subprocess.run(
        [*ACPCTL_COMMAND, "sessions", "list"],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, **env},
    )
    return now() - begin


def cell(values: list[float]) -> str:
    return (
        f"{min(values) * 1000:.2f} / {statistics.median(values) * 1000:.2f} / "
        f"{percentile(values, 0.95) * 1000:.2f} ms"
    )


def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="acpctl-fleet-"))
    hosts = {name: dirs(root / name) for name in ("a", "b", "c")}
    for env in hosts.values():
        agents_add("demo", "--", *DEMO, env=env)
    with a_host(hosts["b"]) as (b_url, _), a_host(hosts["c"]) as (c_url, _):
        for name, url in (("b", b_url), ("c", c_url)):
            token = root / f"{name}.token"
            shown = subprocess.run(
                [*ACPCTL_COMMAND, "host", "show-token"],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, **hosts[name]},
            )
            token.write_text(shown.stdout)
            token.chmod(0o600)
            link = ["host", "link", "add", name, "--url", url, "--token-file", str(token)]
            subprocess.run([*ACPCTL_COMMAND, *link], check=True, stdout=subprocess.DEVNULL,
                           env={**os.environ, **hosts["a"]})  # fmt: skip
        unlinked = {**hosts["a"], "ACPCTL_CONFIG_DIR": str(root / "unlinked")}
        agents_add("demo", "--", *DEMO, env=unlinked)
        with a_host(unlinked) as (_, bare_pid):
            # The same work of its own as the linked A's below: its memory then differs by
            # the links alone.
            async def alone() -> None:
                held = await sessions_on(unlinked, args.sessions)
                await lists_at(unlinked, args.reps)
                held.close()

            asyncio.run(alone())
            bare = rss_kib(bare_pid)
        watching = WS.pattern + rb"[\s\S]*watching linked hosts b, c"
        with a_host(hosts["a"], until=watching) as (a_url, a_pid):

            async def measure() -> dict[str, Any]:
                held = [await sessions_on(hosts[n], args.sessions) for n in ("a", "b", "c")]
                # Until A lists them all (B and C tell their sessions at most once a second).
                while (await lists_at(hosts["a"], 1))[1] < 3 * args.sessions:
                    await asyncio.sleep(0.1)
                seen = await question_seen(hosts["b"], hosts["a"], args.reps)
                listed, count = await lists_at(hosts["a"], args.reps)
                for client in held:
                    client.close()
                return {"seen": seen, "lists": listed, "count": count}

            got = asyncio.run(measure())
            linked = rss_kib(a_pid)
            opened = page_opens(hosts["a"], a_url, 3 * args.sessions, args.reps)
            list_times: dict[str, list[float]] = {"linked": [], "one host": []}
            for rep in range(args.reps):
                for config in interleaved(rep, list(list_times)):
                    env = hosts["a"] if config == "linked" else unlinked
                    list_times[config].append(listed_in(env))
    print("| fleet | min / median / p95 |\n|---|---|")
    print(f"| a question asked on B, told to a client of A | {cell(got['seen'])} |")
    print(f"| A's sessions and waiting lists, {got['count']} live sessions of 3 hosts | "
          f"{cell(got['lists'])} |")  # fmt: skip
    if opened:
        print(
            f"| A's page opened, to its {3 * args.sessions} live sessions listed | {cell(opened)} |"
        )
    print(f"| `sessions list`, B and C linked | {cell(list_times['linked'])} |")
    print(f"| `sessions list`, no link | {cell(list_times['one host'])} |")
    each = (linked - bare) / 2
    print(
        f"\nA's resident memory: {bare} KiB with no link, {linked} KiB watching 2 linked"
        f" hosts ({each:.0f} KiB a linked host, its {args.sessions} sessions listed)"
    )
    print(f"{args.reps} repetitions.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=50)
    with private_home():
        started = time.monotonic()
        main(parser.parse_args())
        print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
