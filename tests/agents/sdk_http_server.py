"""The ACP Python SDK's own remote server (its ASGI app: Streamable HTTP and WebSocket on
/acp) under uvicorn, with the SDK agent of tests/agents/sdk_agent.py behind it: a remote
agent nobody here wrote. Usage: python -m tests.agents.sdk_http_server PORT"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from acp.http.asgi import create_asgi_app

from tests.agents.sdk_agent import SdkAgent


def make_agent(conn: Any) -> Any:
    agent = SdkAgent()
    agent.on_connect(conn)
    return agent


if __name__ == "__main__":
    app = create_asgi_app(make_agent)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="on")
