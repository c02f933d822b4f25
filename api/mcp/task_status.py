"""The `subscriptions/listen` stream. Task status notifications (`notifications/tasks`, the Tasks
extension): a stream naming `taskIds` gets each listed task's detailed state at once and again whenever it
changes, read from the call's record as tasks/get reads it, woken by the session's live feed. Tool-list
changes: a stream asking `toolsListChanged` gets `notifications/tools/list_changed` whenever a client of the
session registers, leaves, lapses or changes its tools (on /mcp/{client_name} too, for any client: the
caller lists again). The stream ends once every task it follows is terminal and it asked no tool-list
changes (nothing more could be sent on it), or when the caller goes."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp.types as mt
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from api.mcp.context import scoped
from api.mcp.tasks import detailed, missing_capability, negotiated
from api.state import AppState
from broker.services.live import Signal
from common.events.catalogue import ClientLeft, ClientRegistered, ClientToolsUpdated
from common.events.marks import is_logged, of_type

MAX_TASK_IDS = 100
TASK_STATUS = "notifications/tasks"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
# How often the followed tasks are read again when the live feed is quiet (a lost pub/sub message, or a
# change no event marks: a deadline passing is logged, so this is a backstop only).
_CHECK_EVERY_S = 2.0
_TERMINAL = frozenset({"completed", "failed", "cancelled"})


def _tools_changed(item: bytes) -> bool:
    """Whether a live feed item is a change of the session's client tools."""
    return is_logged(item) and any(of_type(item, kind) for kind in (ClientRegistered, ClientToolsUpdated, ClientLeft))


def _task_ids(params: mt.SubscriptionsListenRequestParams) -> list[str]:
    listed = (params.notifications.model_extra or {}).get("taskIds") or []
    if not isinstance(listed, list) or not all(isinstance(i, str) for i in listed) or len(listed) > MAX_TASK_IDS:
        raise MCPError(code=INVALID_PARAMS, message=f"notifications.taskIds: at most {MAX_TASK_IDS} task ids")
    return list(dict.fromkeys(listed))


class _Followed:
    """The tasks one stream follows, and what it last sent of each."""

    def __init__(self, state: AppState, session_id: str, ctx: Any, meta: dict[str, Any]) -> None:
        self._state, self._session_id, self._ctx, self._meta = state, session_id, ctx, meta
        self.sent: dict[str, dict[str, Any]] = {}

    async def found(self, task_ids: list[str]) -> list[str]:
        return [i for i in task_ids if await self._state.broker.calls.task(self._session_id, i) is not None]

    async def refresh(self, task_ids: list[str]) -> None:
        for task_id in task_ids:
            task = await self._state.broker.calls.task(self._session_id, task_id)
            if task is None:
                continue
            now = await detailed(self._state, self._session_id, task_id, task)
            if self.sent.get(task_id) == now:
                continue
            self.sent[task_id] = now
            notification = mt.Notification[dict[str, Any], str](method=TASK_STATUS, params={**now, "_meta": self._meta})
            # The session sends a notification model as its method and params: this one is the
            # extension's, outside the core union its signature names.
            await self._ctx.session.send_notification(notification, related_request_id=self._ctx.request_id)

    def open(self) -> list[str]:
        return [i for i, sent in self.sent.items() if sent.get("status") not in _TERMINAL]


async def listen(ctx: Any, params: mt.SubscriptionsListenRequestParams) -> mt.SubscriptionsListenResult:
    """Serve one `subscriptions/listen` stream: task status notifications for the listed tasks of the
    session, and tool-list changes when asked (the ack names the tasks found and whether tool-list changes
    are sent; other notification kinds are not offered)."""
    task_ids = _task_ids(params)
    tools = bool(params.notifications.tools_list_changed)
    if task_ids and not negotiated(ctx):
        raise missing_capability()
    state, session_id, _ = scoped(ctx)
    meta: dict[str, Any] = {SUBSCRIPTION_ID: ctx.request_id}
    # Subscribed before anything is read, so no change after the first read goes unseen.
    subscription = await state.hub.subscribe_session(session_id)
    try:
        followed = _Followed(state, session_id, ctx, meta)
        found = await followed.found(task_ids)
        honored = mt.SubscriptionFilter.model_validate(
            {"taskIds": found, **({"toolsListChanged": True} if tools else {})}
        )
        ack = mt.SubscriptionsAcknowledgedNotification(
            params=mt.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)
        )
        await ctx.session.send_notification(ack, related_request_id=ctx.request_id)
        await followed.refresh(found)
        while (following := followed.open()) or tools:
            try:
                item = await asyncio.wait_for(subscription.get(), _CHECK_EVERY_S)
            except TimeoutError:
                item = None
            if item is Signal.DELETED or item is Signal.CLOSING:
                break
            if isinstance(item, bytes):
                if tools and _tools_changed(item):
                    changed = mt.ToolListChangedNotification(
                        params=mt.NotificationParams.model_validate({"_meta": meta})
                    )
                    await ctx.session.send_notification(changed, related_request_id=ctx.request_id)
                following = [i for i in following if i.encode() in item]
            await followed.refresh(following)
    finally:
        state.hub.unsubscribe(subscription)
    return mt.SubscriptionsListenResult(_meta=meta)
