"""Issue 42, 5: being told something waits. config.toml's [serve] on_waiting runs, with no
shell, when an agent's question has waited unanswered for on_waiting_after_s: a JSON
summary on its stdin, ended after on_waiting_timeout_s. Against a real host and the demo
agent, whose word `edit` asks a permission."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from acpctl import config
from acpctl import protocol as acp
from acpctl.errors import UsageError
from tests.conftest import run
from tests.test_host import serving, unix_client


def notifier_config(home: Path, tmp_path: Path, after_s: float, script: str) -> Path:
    """[serve] on_waiting: python running `script` (its stdin in `told`); the file it
    writes to."""
    told = tmp_path / "told.jsonl"
    notifier = tmp_path / "notifier.py"
    notifier.write_text(script.replace("TOLD", repr(str(told))))
    path = config.load().path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "[serve]\n"
        f"on_waiting = [{json.dumps(sys.executable)}, {json.dumps(str(notifier))}]\n"
        f"on_waiting_after_s = {after_s}\n"
        "on_waiting_timeout_s = 1\n"
        'page_url = "https://desk.example.ts.net/"\n'
    )
    return told


WRITES_STDIN = "import sys\nopen(TOLD, 'a').write(sys.stdin.read())\nprint('sent')\n"


@pytest.mark.e2e
def test_a_question_left_waiting_runs_the_notifier_with_a_summary(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    told = notifier_config(home, tmp_path, 0.3, WRITES_STDIN)

    async def scenario() -> None:
        async with unix_client() as editor:
            await editor.request(acp.INITIALIZE, {"protocolVersion": 1})
            new = await editor.request(acp.SESSION_NEW, {"cwd": str(tmp_path), "mcpServers": []})
            session = new["result"]["sessionId"]
            await editor.send_prompt(session, "edit")
            asked = await editor.until(lambda m: m.get("method") == acp.REQUEST_PERMISSION)
            # The whole summary, not only the file: the notifier opens it before it writes.
            deadline = time.monotonic() + 30
            while not (told.exists() and told.read_text().endswith("\n")):
                assert time.monotonic() < deadline, "the notifier never wrote its summary"
                await asyncio.sleep(0.05)
            summary = json.loads(told.read_text())
            assert summary["sessionId"] == session and summary["agent"] == "demo"
            assert summary["kind"] == "permission" and summary["asked"] == "Edit /tmp/demo.txt"
            assert summary["options"] == ["Allow", "Reject"] and summary["cwd"] == str(tmp_path)
            # Where it is answered: the page, opened at the session.
            assert summary["url"] == f"https://desk.example.ts.net/#agent=demo&session={session}"
            # Answered now: the turn goes on; a question answered in time runs nothing.
            await editor.send(
                {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
                }
            )
            assert (await editor.until(lambda m: m.get("id") == 7))["result"]

    with serving(monkeypatch, "--idle-stop", "0"):
        run(scenario())
    assert len(told.read_text().splitlines()) == 1  # once: the question was answered


@pytest.mark.e2e
def test_a_question_answered_in_time_runs_nothing_and_a_hung_notifier_is_ended(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hangs = (
        "import time, sys\nsys.stdin.read()\nopen(TOLD, 'a').write('started\\n')\ntime.sleep(60)\n"
    )
    # 2 s: "answered in time" holds on a loaded machine too (the test answers at once).
    told = notifier_config(home, tmp_path, 2, hangs)

    async def turn(text: str, left_waiting: bool) -> None:
        async with unix_client() as editor:
            await editor.request(acp.INITIALIZE, {"protocolVersion": 1})
            new = await editor.request(acp.SESSION_NEW, {"cwd": str(tmp_path), "mcpServers": []})
            await editor.send_prompt(new["result"]["sessionId"], text)
            asked = await editor.until(lambda m: m.get("method") == acp.REQUEST_PERMISSION)
            while left_waiting and not told.exists():  # answered once the notifier runs
                await asyncio.sleep(0.05)
            await editor.send(
                {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"outcome": {"outcome": "cancelled"}},
                }
            )
            await editor.until(lambda m: m.get("id") == 7)

    with serving(monkeypatch, "--idle-stop", "0") as (_, _, state):
        run(turn("edit", False))  # answered at once: its notifier never starts (the one
        # line at the end is the second's, whose wait began after this one's had passed)
        run(turn("edit", True))  # left waiting: the notifier starts, and hangs
        deadline = time.monotonic() + 30
        while "was ended" not in host_log(state) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "ran longer than 1 s and was ended" in host_log(state)
    assert told.read_text() == "started\n"


def host_log(state: Path) -> str:
    return "".join(p.read_text() for p in state.rglob("serve-*.log"))


def test_the_serve_table_is_checked(home: Path) -> None:
    path = config.load().path
    path.parent.mkdir(parents=True, exist_ok=True)
    for text, said in (
        ('[serve]\non_waiting = "ntfy publish topic"\n', "list of strings"),
        ("[serve]\non_waiting = []\non_waiting_timeout_s = 0\n", "more than 0"),
        ("[serve]\non_waiting_after_s = -1\n", "on_waiting_after_s must be"),
        ("serve = 3\n", "[serve] must be a table"),
        ('[serve]\npage_url = "desk:8765"\n', "page_url must be an http"),
    ):
        path.write_text(text)
        with pytest.raises(UsageError, match=said.replace("[", r"\[").replace("]", r"\]")):
            config.load()
    path.write_text('[serve]\non_waiting = ["ntfy", "publish", "t"]\n')
    settings = config.load().serve
    assert settings.on_waiting == ("ntfy", "publish", "t") and settings.on_waiting_after_s == 30
