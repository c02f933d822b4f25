"""A session as an MCP server: an MCP client (the official `mcp` package) lists and calls the tools that a
client registered in the session.

    .venv/bin/switchboard session new          # prints a session id and a session token
    export SWITCHBOARD_SESSION_ID=... SWITCHBOARD_SESSION_TOKEN=swb_st_...
    .venv/bin/python examples/mcp_client.py

So that it runs alone, the script is both sides: it registers a client named "glossary" with one tool
(`define`), answers that tool's calls from the registration's call stream as a browser tab or a backend
would, and then, as the MCP client, lists the session's tools at `/v1/sessions/{sid}/mcp` and calls
`client__glossary__define`. A desktop agent or an IDE connects to the same URL with the same bearer
token. It prints what it listed and the answer, leaves the registration, and exits 0 (1 on a failure).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

URL = os.environ.get("SWITCHBOARD_URL", "http://127.0.0.1:8000")
DEFINE = {
    "name": "define",
    "description": "What a word means in this app",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    "annotations": {"readOnlyHint": True},
}
GLOSSARY = {"switchboard": "routes an agent's tool calls to the apps that serve them"}


async def serve_calls(http: httpx2.AsyncClient, path: str) -> None:
    """Answer the registration's calls: ack each, look the word up, post the result."""
    async with http.sse(f"{path}/calls/stream", timeout=httpx2.Timeout(10, read=None), max_event_size=None) as source:
        async for frame in source:
            if not frame.data:
                continue
            event = json.loads(frame.data)
            if event.get("type") != "client_tool_dispatched":
                continue
            call = f"{path}/calls/{event['call_id']}"
            await http.post(f"{call}/ack")
            word = str(event["arguments"].get("word", "")).lower()
            text = GLOSSARY.get(word, f"no entry for {word!r}")
            await http.post(f"{call}/result", json={"text": text})


async def main() -> int:
    session_id, token = os.environ["SWITCHBOARD_SESSION_ID"], os.environ["SWITCHBOARD_SESSION_TOKEN"]
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(base_url=URL, headers=headers, timeout=30) as http:
        body: dict[str, Any] = {"name": "glossary", "lifetime": {"type": "never"}, "tools": [DEFINE]}
        registered = await http.post(f"/v1/sessions/{session_id}/clients", json=body)
        if registered.status_code != 201:
            print(f"registration refused: {registered.status_code} {registered.text}", file=sys.stderr)  # noqa: T201
            return 1
        path = f"/v1/sessions/{session_id}/clients/{registered.json()['id']}"
        serving = asyncio.create_task(serve_calls(http, path))
        try:
            transport = streamable_http_client(f"{URL}/v1/sessions/{session_id}/mcp", http_client=http)
            async with Client(transport) as mcp:
                for tool in (await mcp.list_tools()).tools:
                    print(f"tool: {tool.name}: {tool.description}")  # noqa: T201
                result = await mcp.call_tool("client__glossary__define", {"word": "switchboard"})
            answer = " ".join(getattr(block, "text", "") for block in result.content)
            print(f"{'error' if result.is_error else 'answer'}: {answer}")  # noqa: T201
            return 1 if result.is_error else 0
        finally:
            serving.cancel()
            await http.delete(path)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
