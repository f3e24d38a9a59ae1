"""An ACP agent that answers a prompt with a line acpctl cannot read, on request.

A prompt containing "deep" is answered with a message nested 100,000 deep. A prompt
containing "elicit" first sends a request-scoped elicitation/create naming the prompt's
request id, and answers with the action the client chose. A prompt containing "subagent"
announces a child session (the unstable schema's subagent_update), streams a chunk on the
child, asks permission for the child, and says the chosen option on the child. Anything
else gets one chunk "ok" and end_turn. Any other request is answered with its params
echoed under "echo". Every start writes "started" to HOSTILE_AGENT_LOG, if set.
"""

from __future__ import annotations

import json
import os
import sys


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if os.environ.get("HOSTILE_AGENT_LOG"):
    with open(os.environ["HOSTILE_AGENT_LOG"], "a") as log:
        log.write("started\n")
for line in sys.stdin:
    message = json.loads(line)
    method, msg_id, params = message.get("method"), message.get("id"), message.get("params")
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "result": {
                    "protocolVersion": 1,
                    "agentCapabilities": {},
                    "agentInfo": {"name": "hostile"},
                },
            }
        )
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": msg_id, "result": {"sessionId": f"h{os.getpid()}"}})
    elif method == "session/prompt":
        text = " ".join(b.get("text", "") for b in params["prompt"])
        if "elicit" in text:
            send(
                {
                    "jsonrpc": "2.0",
                    "id": "elicit-1",
                    "method": "elicitation/create",
                    "params": {"requestId": msg_id, "mode": "form", "message": "Which one?"},
                }
            )
            answer = json.loads(sys.stdin.readline())
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": params["sessionId"],
                        "update": {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": answer["result"]["action"]},
                        },
                    },
                }
            )
            send({"jsonrpc": "2.0", "id": msg_id, "result": {"stopReason": "end_turn"}})
            continue
        if "subagent" in text:
            child = f"child-of-{params['sessionId']}"

            def update(session: str, body: dict[str, object]) -> None:
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {"sessionId": session, "update": body},
                    }
                )

            update(
                params["sessionId"],
                {"sessionUpdate": "subagent_update", "sessionId": child, "title": "Helper"},
            )
            update(
                child,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "busy"},
                },
            )
            send(
                {
                    "jsonrpc": "2.0",
                    "id": "ask-1",
                    "method": "session/request_permission",
                    "params": {
                        "sessionId": child,
                        "toolCall": {"toolCallId": "c1", "title": "Read a file"},
                        "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}],
                    },
                }
            )
            answer = json.loads(sys.stdin.readline())
            chosen = answer["result"]["outcome"].get("optionId", "cancelled")
            update(
                child,
                {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": chosen},
                },
            )
            send({"jsonrpc": "2.0", "id": msg_id, "result": {"stopReason": "end_turn"}})
            continue
        if "deep" in text:
            sys.stdout.write(
                f'{{"jsonrpc":"2.0","id":{msg_id},"result":' + "[" * 100_000 + "]" * 100_000 + "}\n"
            )
            sys.stdout.flush()
            continue
        send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": params["sessionId"],
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": "ok"},
                    },
                },
            }
        )
        send({"jsonrpc": "2.0", "id": msg_id, "result": {"stopReason": "end_turn"}})
    elif msg_id is not None:
        send({"jsonrpc": "2.0", "id": msg_id, "result": {"echo": params}})
