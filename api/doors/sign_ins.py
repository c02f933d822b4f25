"""A session's sign-in events (an OAuth grant's server the person is asked to sign in to) as a run view
shows them (`shown.SignIn`). Read by their type's tag, so the ending a newer catalogue declares
(`mcp_authorization_declined`, with `reason` `declined` or `expired`) is shown as soon as it decodes."""

from __future__ import annotations

from api.doors.shown import SignIn
from common.events.catalogue import Event

# Each sign-in event's tag -> the state it puts the sign-in in.
_STATES = {
    "mcp_authorization_required": "required",
    "mcp_authorization_completed": "completed",
    "mcp_authorization_declined": "declined",
}
_ENDINGS = frozenset({"declined", "expired"})


def sign_in(event: Event) -> SignIn | None:
    """The sign-in `event` asks for or ends; None for any other event."""
    state = _STATES.get(str(type(event).__struct_config__.tag))
    if state is None:
        return None
    if state == "declined":
        # A decline, or the wait running out; any other reason a newer server gives reads as a decline.
        reason = getattr(event, "reason", state)
        state = reason if reason in _ENDINGS else state
    url = getattr(event, "authorization_url", None)
    expires = getattr(event, "expires_at", None)
    return SignIn(
        authorization_id=str(getattr(event, "authorization_id", "")),
        grant=str(getattr(event, "grant", "")),
        server_url=str(getattr(event, "server_url", "")),
        state=state,
        authorization_url=url if state == "required" and isinstance(url, str) else None,
        expires_at=expires if state == "required" and isinstance(expires, str) else None,
    )
