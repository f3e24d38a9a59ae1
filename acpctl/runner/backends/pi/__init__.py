"""The pi-rpc backend: agents that speak pi's `--mode rpc` JSONL protocol, as ACP agents.

To the server this backend looks like one more ACP agent (the same call/notify/send surface
as the native relay); behind it, every ACP session owns one `pi --mode rpc` child whose cwd
is the session's cwd and whose session files live in a directory the store hands out inside
the session's own. A child that dies fails its prompt with its stderr tail and is started
again, on the same session file, by the next prompt.

    agent.py      the ACP face: methods, permission dialogs, the sessions
    session.py    one session: its child, restarts, tools announced, cancel
    turn.py       one prompt: pi's events, by a table of handlers, to ACP updates
    child.py      one pi process: commands and responses, events to the turn
    translate.py  ACP ↔ pi data: prompt blocks, updates, stream repair, tool diffs
    permission_gate.ts  the pi extension that asks before write, edit and bash
"""

from acpctl.runner.backends.pi.agent import PiRpcBackend

__all__ = ["PiRpcBackend"]
