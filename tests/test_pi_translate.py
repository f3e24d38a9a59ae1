"""pi-rpc translation without a pi process: stream repair, prompt blocks, plans (fast tier)."""

from __future__ import annotations

from acpctl.runner.backends.pi import translate as pt


def test_stream_repair_sends_exactly_the_missing_part() -> None:
    stream = pt.StreamText()
    assert stream.delta(0, "Hel", None) == "Hel"
    assert stream.delta(0, "lo", None) == "lo"
    assert stream.delta(0, "Hello wor", None) == " wor"  # a cumulative snapshot
    assert stream.missing(0, "Hello world!") == "ld!"  # the final text holds more
    assert stream.missing(0, "Hello world!") == ""  # nothing twice
    assert stream.delta(1, "x", "ab") == "ab"  # the partial message is the truth


def test_prompt_blocks_become_pi_input() -> None:
    message, images, dropped = pt.prompt_input(
        [
            {"type": "text", "text": "look"},
            {"type": "resource_link", "uri": "file:///a.py", "name": "a.py"},
            {"type": "resource", "resource": {"uri": "file:///b.py", "text": "print(1)"}},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        ],
        accepts_images=False,
    )
    assert message.startswith("look\n\n[a.py](file:///a.py)") and "print(1)" in message
    assert images == [] and "image block" in dropped[0]
    _, images, _ = pt.prompt_input([{"type": "image", "data": "AAAA"}], accepts_images=True)
    assert images == [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]


def test_plan_events_become_plans() -> None:
    update = pt.plan(
        {
            "type": "plan_mode_complete",
            "steps": ["Read the code", {"content": "Fix it", "status": "in_progress"}],
        }
    )
    assert update == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "Read the code", "priority": "medium", "status": "pending"},
            {"content": "Fix it", "priority": "medium", "status": "in_progress"},
        ],
    }
    assert pt.plan({"type": "plan_mode_complete"}) is None
