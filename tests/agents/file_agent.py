"""An ACP agent that does to files what its prompt says, and answers what came of it: the
sandbox's tests (tests/test_sandbox.py) run it confined.

    write PATH   writes PATH ("wrote PATH", or the error the system gave)
    read PATH    reads PATH ("read: TEXT", or the error)
    term PATH    asks its client to run `touch PATH` (terminal/create) and says the exit
    terminal J   asks its client for terminal/create with the JSON object J's params (command,
                 args, env, cwd) and says the exit and what it printed
    env NAME     the variable NAME as it sees it ("unset" where it has none)
    pid          its process id as it sees it (1 in a pid namespace: its own init's child)
"""

from __future__ import annotations

import json
import os
import sys
from itertools import count
from typing import Any

ids = count(1000)


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def ask(method: str, params: dict[str, Any]) -> Any:
    """A request to the client, and its answer (nothing else comes meanwhile here)."""
    msg_id = next(ids)
    send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("id") == msg_id and "method" not in message:
            return message.get("result", message.get("error"))
    raise SystemExit(0)


def act(session: str, text: str) -> str:
    verb, _, path = text.partition(" ")
    try:
        if verb == "write":
            with open(path, "w") as file:
                file.write("written in the sandbox\n")
            return f"wrote {path}"
        if verb == "read":
            with open(path) as file:
                return f"read: {file.read().strip()}"
        if verb == "pid":
            return f"pid {os.getpid()}"
        if verb == "term":
            created = ask(
                "terminal/create", {"sessionId": session, "command": "touch", "args": [path]}
            )
            terminal = created["terminalId"]
            exited = ask("terminal/wait_for_exit", {"sessionId": session, "terminalId": terminal})
            ask("terminal/release", {"sessionId": session, "terminalId": terminal})
            return f"term exit {exited.get('exitCode')}"
        if verb == "terminal":
            created = ask("terminal/create", {"sessionId": session, **json.loads(path)})
            if "terminalId" not in created:
                return f"refused: {created.get('message')}"
            terminal = created["terminalId"]
            exited = ask("terminal/wait_for_exit", {"sessionId": session, "terminalId": terminal})
            output = ask("terminal/output", {"sessionId": session, "terminalId": terminal})
            ask("terminal/release", {"sessionId": session, "terminalId": terminal})
            return f"exit {exited.get('exitCode')}: {output.get('output', '').strip()}"
        if verb == "env":
            return os.environ.get(path, "unset")
    except OSError as exc:
        return f"error: {exc.strerror}"
    return f"unknown: {text}"


for line in sys.stdin:
    request = json.loads(line)
    method, msg_id = request.get("method"), request.get("id")
    params = request.get("params") or {}
    if method == "initialize":
        result: Any = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
    elif method == "session/new":
        result = {"sessionId": f"file-{next(ids)}"}
    elif method == "session/prompt":
        text = " ".join(b.get("text", "") for b in params.get("prompt", []))
        said = act(params["sessionId"], text)
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": said}}
        send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": params["sessionId"], "update": update},
            }
        )
        result = {"stopReason": "end_turn"}
    elif msg_id is None:
        continue
    else:
        send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": method}})
        continue
    send({"jsonrpc": "2.0", "id": msg_id, "result": result})
