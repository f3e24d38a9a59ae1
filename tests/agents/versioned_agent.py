"""An agent that speaks the ACP versions VERSIONS names ("1", "2", "1,2"), choosing as the
TypeScript SDK's AgentProtocolRouter chooses: the highest it speaks at or below what the
client asks; none, and initialize is refused with -32022 and the versions it speaks. With
VERSIONS "always 2", it answers 2 whatever it is asked (a v2-only agent that does not
negotiate). It answers session/new (v1) and nothing else: enough for doctor's probes."""

from __future__ import annotations

import json
import os
import sys

always_2 = os.environ["VERSIONS"] == "always 2"
speaks = [2] if always_2 else sorted(int(v) for v in os.environ["VERSIONS"].split(","))


def say(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message.get("method") == "initialize":
        asked = message["params"]["protocolVersion"]
        chosen = [2] if always_2 else [v for v in speaks if v <= asked]
        if not chosen:
            error = {"code": -32022, "message": "Unsupported protocol version"}
            error["data"] = {"requested": asked, "supported": speaks}
            say({"jsonrpc": "2.0", "id": message["id"], "error": error})
            continue
        version = chosen[-1]
        if version == 2:
            result = {"protocolVersion": 2, "capabilities": {}, "info": {"name": "versioned"}}
        else:
            result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "v"}}
        say({"jsonrpc": "2.0", "id": message["id"], "result": result})
    elif message.get("method") == "session/new":
        say({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "s1"}})
    else:
        error = {"code": -32601, "message": "method not found"}
        say({"jsonrpc": "2.0", "id": message["id"], "error": error})
