"""No single input wedges or kills a connection, and no file acpctl touches is damaged:
regression tests for each hole found, through real processes where it matters."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acpctl import protocol as acp
from tests.conftest import TEST_AGENTS, run_cli, write_executable
from tests.fake_backend import Harness
from tests.raw_peer import raw_editor


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 90))


# -- the connection ---------------------------------------------------------------------


@pytest.mark.e2e
def test_deeply_nested_lines_from_the_editor_get_errors_and_serving_goes_on(
    home: Path, tmp_path: Path
) -> None:
    async def scenario() -> None:
        async with raw_editor() as editor:
            editor.write(b"[" * 100_000 + b"\n")
            params = "{" + '"a":{' * 5_000 + "}" * 5_000 + "}"
            editor.write(
                b'{"jsonrpc":"2.0","id":"deep","method":"x","params":' + params.encode() + b"}\n"
            )
            errors = [
                await editor.wait_for(
                    lambda m: isinstance(m, dict) and "error" in m and m.get("id") is None
                )
            ]
            assert errors[0]["error"]["code"] == acp.PARSE_ERROR
            sid = await editor.session(str(tmp_path))
            answer = await editor.prompt(sid, "still here?")
            assert answer["result"]["stopReason"] == acp.END_TURN
            parse_errors = [
                m
                for m in editor.messages
                if isinstance(m, dict) and m.get("error", {}).get("code") == acp.PARSE_ERROR
            ]
            assert len(parse_errors) == 2
        assert editor.process.returncode == 0

    run(scenario())


@pytest.mark.e2e
def test_an_unreadable_message_from_the_agent_fails_the_prompt_not_the_session(
    home: Path, tmp_path: Path
) -> None:
    starts = tmp_path / "starts.log"
    agent = write_executable(
        tmp_path / "hostile",
        f"#!/bin/sh\nexec {sys.executable} {TEST_AGENTS / 'hostile_agent.py'}\n",
    )
    assert (
        run_cli(
            "agents", "add", "hostile", "--env", f"HOSTILE_AGENT_LOG={starts}", "--", str(agent)
        ).returncode
        == 0
    )

    async def scenario() -> None:
        async with raw_editor("--agent", "hostile") as editor:
            sid = await editor.session(str(tmp_path))
            failed = await editor.prompt(sid, "go deep")
            assert "cannot read (nested too deeply)" in failed["error"]["message"]
            again = await editor.prompt(sid, "and now?")
            assert again["result"]["stopReason"] == acp.END_TURN
        assert starts.read_text().count("started") == 2  # ended, then started again

    run(scenario())


@pytest.mark.e2e
def test_a_huge_batch_does_not_starve_other_input(home: Path, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with raw_editor() as editor:
            await editor.call("initialize", {"protocolVersion": 1})
            editor.send(
                [
                    {"jsonrpc": "2.0", "id": f"b{i}", "method": "session/list", "params": {}}
                    for i in range(10_000)
                ]
            )
            after = await editor.call("session/list", {})
            assert "result" in after
            batch = await editor.wait_for(lambda m: isinstance(m, list), timeout=60)
            assert len(batch) == 10_000
            order = editor.messages.index(after) < editor.messages.index(batch)
            assert order, "the request sent after the batch waited for all of it"

    run(scenario())


@pytest.mark.e2e
def test_closing_the_connection_exits_quietly(home: Path, tmp_path: Path) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "acpctl", "run", "--acp"],
        input=json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        + "\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert process.returncode == 0
    assert "Traceback" not in process.stderr and "Exception ignored" not in process.stderr


# -- recording on a full disk -------------------------------------------------------------


@contextlib.contextmanager
def small_disk(path: Path, size: str = "256k") -> Iterator[Path]:
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> Path:
    """Fill the disk to the last page (tmpfs counts whole pages: appends still fit into the
    last page of a file, then fail part-way)."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 4096)
    return filler


def test_a_full_disk_never_stops_the_relay_and_loses_no_event(
    home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_disk(tmp_path / "disk") as disk:

        async def scenario(h: Harness) -> None:
            sid = await h.session()
            await h.result(
                acp.SESSION_PROMPT,
                {"sessionId": sid, "prompt": [{"type": "text", "text": "before"}]},
            )
            filler = fill(disk)
            for turn in range(3):  # each turn needs a new page: writes fail
                result = await h.result(
                    acp.SESSION_PROMPT,
                    {
                        "sessionId": sid,
                        "prompt": [{"type": "text", "text": f"while full {turn} " + "x" * 5000}],
                    },
                )
                assert result == {"stopReason": acp.END_TURN}
            lines = (disk / "sessions" / sid / "events.jsonl").read_bytes()
            assert lines.endswith(b"\n")  # no partial line was left behind
            filler.unlink()  # space returns
            await h.result(
                acp.SESSION_PROMPT,
                {"sessionId": sid, "prompt": [{"type": "text", "text": "after"}]},
            )
            prompts = [
                e["update"]["content"]["text"][:12]
                for e in h.store.iter_events(sid)
                if e["type"] == "update"
            ]
            assert prompts == ["before", "while full 0", "while full 1", "while full 2", "after"]
            assert [e["type"] for e in h.store.iter_events(sid)].count("turn_end") == 5
            assert h.store.read_meta(sid).turns == 5

        caplog.set_level(logging.WARNING, "tests.fake")

        async def main() -> None:
            h = Harness(disk / "sessions")
            await asyncio.wait_for(scenario(h), 20)

        asyncio.run(main())
        warnings = [r.getMessage() for r in caplog.records]
        failed = [w.split(" of session")[0] for w in warnings if "cannot write" in w]
        assert sorted(failed) == ["cannot write the events", "cannot write the metadata"]
        assert sum("are written again" in w for w in warnings) == 2
