"""An agent whose MCP grant needs the person's sign-in (OAuth): the session asks for it, this script prints the
link, and once the person has signed in the grant's tool runs with their token.

    export SWITCHBOARD_URL=http://127.0.0.1:8000 SWITCHBOARD_API_KEY=swb_ak_...
    export SWITCHBOARD_MCP_URL=https://mcp.example.com/mcp     # an MCP server that wants OAuth
    export SWITCHBOARD_MCP_CLIENT_ID=... SWITCHBOARD_MCP_CLIENT_SECRET=...   # optional: a registered client
    .venv/bin/python examples/mcp_sign_in.py

The server needs `SWITCHBOARD_SECRET_KEY` (the tokens are kept sealed) and `SWITCHBOARD_PUBLIC_URL` (the
authorization server sends the browser back to its `/v1/mcp/oauth/callback`). The script makes an agent of
the scripted model with one grant, `notes`, opens a session (for `SWITCHBOARD_SUBJECT`, when set: one sign-in
then serves all of that person's sessions), and sends `SWITCHBOARD_PROMPT` (by default a scripted call of the
grant's `note` tool). It follows the session's events with `?include=extensions` (the sign-in events are
extensions) and prints:

    sign in to notes (https://mcp.example.com/mcp) by 2026-12-07T10:00:00Z: https://auth.example.com/authorize?...

Open that link in a browser. The run's step waits for the sign-in, held by no worker; once
`mcp_authorization_completed` comes it goes on with the grant's tools, and the script prints the tool's
answer. A decline, or the wait running out (`mcp_authorization_declined`), lets the run go on without them.
Exit 0 once the tool ran signed in, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx2

URL = os.environ.get("SWITCHBOARD_URL", "http://127.0.0.1:8000")
PROMPT = os.environ.get("SWITCHBOARD_PROMPT", '/call mcp__notes__note {"text": "signed in from the example"}')
MODEL = {"format": "openai_responses", "model": "scripted", "max_tokens": 1000, "context_window": 8000}
ENDS = ("run_completed", "run_failed", "run_cancelled")


def say(line: str) -> None:
    print(line, flush=True)  # noqa: T201


def grant() -> dict[str, Any]:
    auth: dict[str, Any] = {"type": "oauth"}
    for name in ("client_id", "client_secret"):
        value = os.environ.get(f"SWITCHBOARD_MCP_{name.upper()}")
        if value:
            auth[name] = value
    return {"name": "notes", "url": os.environ["SWITCHBOARD_MCP_URL"], "default_policy": "allow", "auth": auth}


async def open_session(admin: httpx2.AsyncClient) -> tuple[str, str]:
    """An agent of the scripted model with the grant, and a session of it: its id and session token."""
    providers = (await admin.get("/v1/model-providers")).raise_for_status().json()["items"]
    scripted = next(p["id"] for p in providers if p["display_name"] == "Scripted")
    agent = (await admin.post("/v1/agents", json={"name": "mcp sign-in example"})).raise_for_status().json()
    version = {"model_provider_id": scripted, "model": MODEL, "mcp": [grant()]}
    (await admin.post(f"/v1/agents/{agent['id']}/versions", json=version)).raise_for_status()
    body: dict[str, Any] = {"agent_id": agent["id"]}
    if os.environ.get("SWITCHBOARD_SUBJECT"):
        body["subject"] = os.environ["SWITCHBOARD_SUBJECT"]
    session = (await admin.post("/v1/sessions", json=body)).raise_for_status().json()
    return session["id"], session["session_token"]


async def events(http: httpx2.AsyncClient, session_id: str) -> AsyncIterator[dict[str, Any]]:
    """The session's events from its start, with the extensions, as they come."""
    path = f"/v1/sessions/{session_id}/events/stream"
    params = {"after_seq": "0", "include": "extensions"}
    async with http.sse(path, params=params, timeout=httpx2.Timeout(10, read=None), max_event_size=None) as source:
        async for frame in source:
            if frame.data:
                yield json.loads(frame.data)


def link(url: str) -> str | None:
    """The sign-in link, if it is one a browser should be sent to (http or https)."""
    return url if urlsplit(url).scheme in ("http", "https") else None


def see(event: dict[str, Any]) -> int | None:
    """What the script makes of each event: it prints the sign-in link and what became of it. The exit code
    once there is one: 0 when the grant's tool answered, 1 when it never will."""
    kind = event["type"]
    if kind == "mcp_authorization_required":
        asked(event)
    elif kind == "mcp_authorization_completed":
        say(f"signed in to {event['grant']}")
    elif kind == "mcp_authorization_declined":
        say(f"no sign-in to {event['grant']}: {event['reason']}")
        return 1
    elif kind == "tool_result":
        return result(event)
    elif kind in ENDS:
        return 1
    return None


def asked(event: dict[str, Any]) -> None:
    where = link(event["authorization_url"])
    if where is None:
        say(f"the sign-in link for {event['grant']} is not an http(s) address; not opening it")
    else:
        say(f"sign in to {event['grant']} ({event['server_url']}) by {event['expires_at']}: {where}")


def result(event: dict[str, Any]) -> int | None:
    # The first text block: a tool with structured content has its JSON as a text block after it.
    text = next((b["data"]["text"] for b in event["content"] if b["type"] == "text"), "")
    say(f"{'error' if event['is_error'] else 'result'}: {text}")
    return None if event["is_error"] else 0


async def follow(http: httpx2.AsyncClient, session_id: str) -> int:
    async for event in events(http, session_id):
        code = see(event)
        if code is not None:
            return code
    return 1


async def post_prompt(http: httpx2.AsyncClient, session_id: str) -> None:
    sent = await http.post(f"/v1/sessions/{session_id}/events", json={"type": "input", "text": PROMPT})
    sent.raise_for_status()


async def main() -> int:
    admin_headers = {"Authorization": f"Bearer {os.environ['SWITCHBOARD_API_KEY']}"}
    async with httpx2.AsyncClient(base_url=URL, headers=admin_headers, timeout=30) as admin:
        session_id, token = await open_session(admin)
    say(f"session {session_id}")
    async with httpx2.AsyncClient(base_url=URL, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        following = asyncio.create_task(follow(http, session_id))
        await post_prompt(http, session_id)
        return await following


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
