"""A deliberately misbehaving ACP agent for `acpctl doctor` tests.

FAKE_AGENT_MODE: banner (prints a banner on stdout first), hang (never answers),
banner-hang (a banner, then reads and never answers), crash (dies during initialize),
auth (session/new answers auth_required), silent (a prompt gets no word for FAKE_SILENCE_S,
then end_turn), retrying (silent too, while it logs failed API attempts in a Claude Code
transcript under $HOME/.claude, copied from tests/corpus), paced (a prompt is answered by
FAKE_CHUNKS, a JSON list of [seconds to wait, text] pairs, then end_turn, as a slowly
streaming model is); in every other mode a prompt
fails as a 404 for the model fails. A client that can run terminal auth is offered a
terminal method, as claude-agent-acp offers /login.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

MODE = os.environ.get("FAKE_AGENT_MODE", "")


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if MODE in ("banner", "banner-hang"):
    print("Welcome to FancyAgent v1.0!", flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if MODE in ("hang", "banner-hang"):
        time.sleep(3600)
    if MODE == "crash":
        print(
            "Error: Cannot find module '/home/u/.npm/_npx/abc/node_modules/x/index.js'",
            file=sys.stderr,
            flush=True,
        )
        sys.exit(1)
    if request.get("method") == "initialize":
        methods: list[dict[str, object]] = [{"id": "login", "name": "Log in"}]
        capabilities = request["params"].get("clientCapabilities") or {}
        if (capabilities.get("auth") or {}).get("terminal"):  # as claude-agent-acp does
            methods.append(
                {"id": "tty", "name": "Terminal login", "type": "terminal", "args": ["--login"]}
            )
        send(
            {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {
                    "protocolVersion": 1,
                    "agentCapabilities": {"loadSession": False},
                    "authMethods": methods,
                    "agentInfo": {"name": "fake", "version": "0.0.1"},
                },
            }
        )
    elif request.get("method") == "session/new":
        if MODE == "auth":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {"code": -32000, "message": "Authentication required"},
                }
            )
        else:
            send({"jsonrpc": "2.0", "id": request["id"], "result": {"sessionId": "s1"}})
    elif request.get("method") == "session/prompt":
        if MODE == "retrying":  # as Claude Code does while the API refuses its key
            corpus = Path(__file__).resolve().parent.parent / "corpus"
            transcript = Path.home() / ".claude" / "projects" / "-work" / "s1.jsonl"
            transcript.parent.mkdir(parents=True, exist_ok=True)
            transcript.write_text((corpus / "claude-transcript-401.jsonl").read_text())
        if MODE == "paced":
            for pause, text in json.loads(os.environ["FAKE_CHUNKS"]):
                time.sleep(pause)
                update = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                }
                params = {"sessionId": "s1", "update": update}
                send({"jsonrpc": "2.0", "method": "session/update", "params": params})
            send({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}})
        elif MODE in ("silent", "retrying"):  # says nothing for a while, then ends the turn
            time.sleep(float(os.environ.get("FAKE_SILENCE_S", "2")))
            send({"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}})
        else:  # what claude-agent-acp answers when the API says 404 for the model
            message = "Internal error: API Error: 404 model: claude-nope not found"
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {"code": -32603, "message": message},
                }
            )
