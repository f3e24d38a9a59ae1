"""An ACP agent that writes a whole turn at once: the fastest producer a relay can have.

Its chunks are made before the turn and written in one call, so the rate a client sees
through a relay is the relay's own ceiling (direct, it is a plain pipe's).

    python bench/fast_agent.py [LINES]   (200,000 chunks a turn unless told)
"""

from __future__ import annotations

import json
import sys
from typing import Any

LINES = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000


def turn(session_id: str) -> bytes:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "w "}}
    chunk = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    }
    return (json.dumps(chunk, separators=(",", ":")) + "\n").encode() * LINES


def main() -> None:
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method = message.get("method")
        answer: dict[str, Any] | None = None
        if method == "initialize":
            answer = {"protocolVersion": 1, "agentCapabilities": {}}
        elif method == "session/new":
            answer = {"sessionId": "s1"}
        elif method == "session/prompt":
            sys.stdout.buffer.write(turn(message["params"]["sessionId"]))
            answer = {"stopReason": "end_turn"}
        if answer is not None:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
            sys.stdout.buffer.write((json.dumps(reply) + "\n").encode())
            sys.stdout.flush()


if __name__ == "__main__":
    main()
