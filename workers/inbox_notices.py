"""What a session's notices do to the inbox: `change` maps one notice to an item opened, one closed, or
nothing; `inbox_consumer` applies it (the notice workers hand each notice to their consumers).

A notice may be handed twice or after a later one of the same call: `Inbox.open` and `Inbox.close` apply it
only when it is newer, by seq, than the last one applied to that call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from broker.services.inbox import Inbox, InboxKind, Item
from common.codec import now_ms, rfc3339_ms
from common.events.catalogue import (
    ApprovalRequested,
    ApprovalResolved,
    ClientToolDispatched,
    ClientToolFailed,
    ClientToolWaiting,
    InputProvided,
    InputRequested,
    McpAuthorizationCompleted,
    McpAuthorizationDeclined,
    McpAuthorizationRequired,
    ToolResult,
    type_name,
)
from workers.notices import Notice

# What opens an item (an approval, a call waiting for its client, an input request, a sign-in), and what ends
# what a call's item waits for (its dispatch again, to a client that came back; its result; its failure; an
# approval's decision); an input request's answer, or its end with its call, ends the request's.
_OPENS = (ApprovalRequested, ClientToolWaiting, InputRequested, McpAuthorizationRequired)
_CLOSES = (ApprovalResolved, ClientToolDispatched, ClientToolFailed, ToolResult)
# What ends a sign-in's wait: it completed, or was declined or ran out.
_SIGNED = (McpAuthorizationCompleted, McpAuthorizationDeclined)
# The event types the inbox reads.
INBOX_EVENT_TYPES = frozenset(type_name(cls) for cls in (*_OPENS, *_CLOSES, *_SIGNED, InputProvided))


@dataclass(frozen=True, slots=True)
class Open:
    item: Item


@dataclass(frozen=True, slots=True)
class Close:
    session_id: str
    # The call's id, or an input request's.
    call_id: str


def change(notice: Notice) -> Open | Close | None:
    """What `notice` does to the inbox. A call's dispatch (again, to a client that came back), its result
    and its failure each end whatever waited on it: an approval, or a call waiting for its client."""
    event = notice.event
    if isinstance(event, ApprovalRequested):
        # Its deadline is its approval_timeout_s's, from the call's record (the event does not carry it).
        since = _since(event.created_at)
        return _opened(notice, "approval", event.call_id, event.tool, None, since, notice.approval_deadline)
    if isinstance(event, ClientToolWaiting):
        since, deadline = rfc3339_ms(event.since), rfc3339_ms(event.deadline)
        return waiting_call(notice, event.call_id, event.tool, event.client_name, since, deadline)
    if isinstance(event, InputRequested):
        # Its deadline is the call's timeout_s's, which the open request leaves running (the result
        # deadline waits); none without one.
        since = _since(event.created_at)
        item = _opened(notice, "input", event.call_id, event.tool, None, since, notice.input_deadline)
        return Open(replace(item.item, request_id=event.request_id))
    if isinstance(event, InputProvided):
        return Close(notice.session_id, event.request_id)
    if isinstance(event, McpAuthorizationRequired):
        # A sign-in a step waits for, until its link completes, the person declines it, or `expires_at`.
        since, deadline = _since(event.created_at), rfc3339_ms(event.expires_at)
        item = _opened(notice, "authorization", "", event.grant, None, since, deadline)
        sign_in, url = event.authorization_id, event.authorization_url
        return Open(replace(item.item, authorization_id=sign_in, authorization_url=url))
    if isinstance(event, _SIGNED):
        return Close(notice.session_id, event.authorization_id)
    if isinstance(event, _CLOSES):
        return Close(notice.session_id, event.call_id)
    return None


def waiting_call(notice: Notice, call_id: str, tool: str, client_name: str, since: int, deadline: int | None) -> Open:
    """The item of a call waiting for its client (`client_tool_waiting`): `since` when the wait began and
    `deadline` (ms) when it fails with client_gone."""
    return _opened(notice, "call", call_id, tool, client_name, since, deadline)


def _opened(
    notice: Notice,
    kind: InboxKind,
    call_id: str,
    tool: str,
    client_name: str | None,
    since: int,
    deadline: int | None,
) -> Open:
    return Open(
        Item(
            kind=kind,
            session_id=notice.session_id,
            run_id=notice.run_id,
            call_id=call_id,
            tool=tool,
            client_name=client_name,
            since=since,
            deadline=deadline,
            subject=notice.subject,
            agent_id=notice.agent_id,
        )
    )


def _since(created_at: str) -> int:
    # An event read from the log always carries when it was appended; a live frame (none) is now.
    if not created_at:
        return now_ms()
    return rfc3339_ms(created_at)


async def apply(inbox: Inbox, notice: Notice) -> str | None:
    """Apply one notice: the inbox's outcome ('applied', 'stale', 'gone'), or None when it changes nothing."""
    step = change(notice)
    if isinstance(step, Open):
        return await inbox.open(step.item, seq=notice.seq)
    if isinstance(step, Close):
        return await inbox.close(step.session_id, step.call_id, seq=notice.seq)
    return None


def inbox_consumer(inbox: Inbox) -> Callable[[Notice], Awaitable[None]]:
    """The inbox's notice consumer (`async def on_notice(notice) -> None`), for the notice workers' list."""

    async def on_notice(notice: Notice) -> None:
        await apply(inbox, notice)

    return on_notice
