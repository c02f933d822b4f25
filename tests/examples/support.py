"""What the example tests share: where the examples are, and reads of what a run left on the server."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.served import Served

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
Event = dict[str, Any]
ENDS = ("run_completed", "run_failed", "run_cancelled")


def admin(served: Served) -> httpx.Client:
    return httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {served.key}"}, timeout=10)


def session_log(served: Served, session_id: str) -> list[Event]:
    """The session's whole log, oldest first."""
    events: list[Event] = []
    params: dict[str, Any] = {"order": "asc", "limit": 200}
    with admin(served) as http:
        while True:
            answer = http.get(f"/v1/sessions/{session_id}/events", params=params)
            assert answer.status_code == 200, answer.text
            page = answer.json()
            events += page["items"]
            if page["next_cursor"] is None:
                return events
            params["after_seq"] = page["next_cursor"]


def listed(served: Served, path: str) -> list[dict[str, Any]]:
    """Every item of a listing route, newest first."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 200}
    with admin(served) as http:
        while True:
            answer = http.get(path, params=params)
            assert answer.status_code == 200, answer.text
            page = answer.json()
            items += page["items"]
            if page["next_cursor"] is None:
                return items
            params["after"] = page["next_cursor"]


def of_type(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e["type"] == kind]


def text_of(event: Event) -> str:
    """The text blocks of a tool_result or of a message event, joined."""
    content = event["message"]["content"] if "message" in event else event["content"]
    return "".join(block["data"]["text"] for block in content if block["type"] == "text")


def wait_until(what: str, done: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
