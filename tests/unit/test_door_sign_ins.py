"""The sign-in events as the front doors show them (api/doors/sign_ins.py): each of the three, as an AG-UI
CUSTOM event and as the AI SDK's data part; no link is carried past the sign-in's end, and other events
show nothing."""

from __future__ import annotations

from typing import Literal

from api.doors.ag_ui import sign_in_event
from api.doors.ai_sdk import sign_in_part
from api.doors.shown import SignIn
from api.doors.sign_ins import sign_in
from common.events.catalogue import (
    McpAuthorizationCompleted,
    McpAuthorizationDeclined,
    McpAuthorizationRequired,
    RunStarted,
)

SERVER = "https://mcp.example/mcp"
URL = "https://auth.example/authorize?state=s"
EXPIRES = "2026-12-07T00:00:00Z"
BASE = {"authorization_id": "a1", "grant": "notes", "server_url": SERVER}
LINK = {"authorization_url": URL, "expires_at": EXPIRES}


def declined(reason: Literal["declined", "expired"]) -> McpAuthorizationDeclined:
    return McpAuthorizationDeclined(authorization_id="a1", grant="notes", server_url=SERVER, reason=reason)


def test_each_sign_in_event_is_shown() -> None:
    asked = McpAuthorizationRequired(
        authorization_id="a1", grant="notes", server_url=SERVER, authorization_url=URL, expires_at=EXPIRES
    )
    assert sign_in(asked) == SignIn("a1", "notes", SERVER, "required", URL, EXPIRES)
    completed = McpAuthorizationCompleted(authorization_id="a1", grant="notes", server_url=SERVER)
    assert sign_in(completed) == SignIn("a1", "notes", SERVER, "completed")
    assert sign_in(declined("declined")) == SignIn("a1", "notes", SERVER, "declined")
    assert sign_in(declined("expired")) == SignIn("a1", "notes", SERVER, "expired")
    assert sign_in(RunStarted(run_id="r1")) is None


def test_ag_ui_names_each_custom_event_after_its_session_event() -> None:
    required = sign_in_event(SignIn("a1", "notes", SERVER, "required", URL, EXPIRES))
    assert (required.name, required.value) == ("switchboard.mcp_authorization_required", {**BASE, **LINK})
    completed = sign_in_event(SignIn("a1", "notes", SERVER, "completed"))
    assert (completed.name, completed.value) == ("switchboard.mcp_authorization_completed", BASE)
    expired = sign_in_event(SignIn("a1", "notes", SERVER, "expired"))
    assert (expired.name, expired.value) == ("switchboard.mcp_authorization_declined", {**BASE, "reason": "expired"})


def test_ai_sdk_shows_one_part_per_sign_in_whose_state_changes() -> None:
    assert sign_in_part(SignIn("a1", "notes", SERVER, "required", URL, EXPIRES)) == {
        "type": "data-mcp-authorization",
        "id": "a1",
        "data": {**BASE, "state": "required", **LINK},
    }
    for state in ("completed", "declined", "expired"):
        part = sign_in_part(SignIn("a1", "notes", SERVER, state))
        assert (part["id"], part["data"]) == ("a1", {**BASE, "state": state})
