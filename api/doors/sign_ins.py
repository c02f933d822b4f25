"""A session's sign-in events (an OAuth grant's server the person is asked to sign in to) as a run view
shows them (`shown.SignIn`)."""

from __future__ import annotations

from api.doors.shown import SignIn
from common.events.catalogue import (
    Event,
    McpAuthorizationCompleted,
    McpAuthorizationDeclined,
    McpAuthorizationRequired,
)


def sign_in(event: Event) -> SignIn | None:
    """The sign-in `event` asks for or ends; None for any other event."""
    match event:
        case McpAuthorizationRequired():
            return SignIn(
                authorization_id=event.authorization_id,
                grant=event.grant,
                server_url=event.server_url,
                state="required",
                authorization_url=event.authorization_url,
                expires_at=event.expires_at,
            )
        case McpAuthorizationCompleted():
            state = "completed"
        case McpAuthorizationDeclined():
            # `declined` or `expired`; the SignIn's state says which.
            state = event.reason
        case _:
            return None
    return SignIn(
        authorization_id=event.authorization_id,
        grant=event.grant,
        server_url=event.server_url,
        state=state,
        authorization_url=None,
        expires_at=None,
    )
