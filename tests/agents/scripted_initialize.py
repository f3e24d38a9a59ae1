"""An agent that only answers initialize, the way SCRIPT says, and notes in LOG every line
it reads: for the tests of initialize relayed before acpctl's server is up.

SCRIPT: "answer" (at once), "banner" (a line of text on stdout first), "error" (an error
answer), "notify" (a notification before the answer), "slow" (the answer after 0.6 s)."""

from __future__ import annotations

import json
import os
import sys
import time

script = os.environ["SCRIPT"]
log = open(os.environ["LOG"], "a")  # noqa: SIM115 - open for the agent's whole life


def say(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    log.write(line)
    log.flush()
    message = json.loads(line)
    if message.get("method") != "initialize":
        if "id" in message:
            say({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        continue
    if script == "banner":
        sys.stdout.write("Welcome to the scripted agent!\n")
    if script == "notify":
        say({"jsonrpc": "2.0", "method": "_scripted/hello", "params": {}})
    if script == "slow":
        time.sleep(0.6)
    if script == "error":
        say({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32000, "message": "no"}})
        continue
    say(
        {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {
                "protocolVersion": 1,
                "agentCapabilities": {"promptCapabilities": {"image": True}},
                "agentInfo": {"name": f"scripted-{script}"},
            },
        }
    )
