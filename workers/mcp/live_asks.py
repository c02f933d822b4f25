"""A grant's server of an older protocol (2025-11-25 and before) asking for input during a call: its
`elicitation/create` comes on the session while the server holds the `tools/call` open, so the question
is the session's input request (`input_requested`, source `mcp`, the grant's name; broker/services/
inputs.py `ask_grant_live`) and the worker's call task waits for the person's answer, under the call's
renewed lease, and hands it to the server as the ElicitResult.

The `mcp` client hands its elicitation callback the server's request id and `_meta`, not the request the
question belongs to (its Streamable HTTP transport does not note which POST's stream carried it), so a
connection shared by several sessions' calls cannot tell whose question it is. A call of an older server
therefore runs on a connection of its own (workers/mcp/hub.py), which alone declares elicitation, and its
`Asker` answers for that one call.

A question is held to what a round of InputRequiredResult is (workers/mcp/asking.py `read_request`): at
most MAX_OPEN_INPUTS open at once and MAX_ROUNDS in all per call; past them, or malformed, the server gets
an error answer and nothing is stored. The wait ends ANSWER_MARGIN_S before the end of the call's time
(its grant's `timeout_s`), so the server hears `cancel` while it can still answer the call; the request,
unanswered, ends with the call (`input_provided`, reason `call_settled`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import mcp.types as mt
from mcp.client.session import ClientRequestContext
from mcp.types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST

from broker.errors import Conflict
from broker.services.inputs import MAX_OPEN_INPUTS, Inputs
from common.addresses import ProviderAddresses
from workers.config import McpGrant
from workers.mcp import asking
from workers.mcp.budget import Budget
from workers.mcp.connection import Connection, McpUnavailable, describe
from workers.mcp.mapped import Mapped, failed
from workers.mcp.wire import OnChallenge

# Time left to the server, after a question runs out, to answer the call with what `cancel` gives.
ANSWER_MARGIN_S = 2.0
# How often an open question's entry is read for its answer: quickly at first, then at most this seldom.
FIRST_LOOK_S = 0.1
LOOK_EVERY_S = 1.0


def _refused(code: int, why: str) -> mt.ErrorData:
    return mt.ErrorData(code=code, message=why[:500])


class Asker:
    """Answers the `elicitation/create` requests of one call's server (a connection's callback)."""

    def __init__(self, inputs: Inputs, session_id: str, call_id: str, grant: str, deadline: float) -> None:
        self._inputs = inputs
        self._session_id = session_id
        self._call_id = call_id
        self._grant = grant
        # The end of the call's time (loop time).
        self._deadline = deadline
        self.open = 0
        self.asked = 0
        # Questions whose wait ran out (the call's result then says why it was cancelled).
        self.unanswered = 0

    async def __call__(
        self, context: ClientRequestContext, params: mt.ElicitRequestParams
    ) -> mt.ElicitResult | mt.ErrorData:
        if self.open >= MAX_OPEN_INPUTS:
            return _refused(INVALID_REQUEST, f"a call may hold at most {MAX_OPEN_INPUTS} questions open at once")
        if self.asked >= asking.MAX_ROUNDS:
            return _refused(INVALID_REQUEST, f"a call may ask at most {asking.MAX_ROUNDS} questions")
        until = self._deadline - ANSWER_MARGIN_S
        if asyncio.get_running_loop().time() >= until:
            return _refused(INVALID_REQUEST, "the call has no time left for a question")
        key = str(context.request_id)[: asking.MAX_KEY_CHARS]
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        found = asking.read_request(key, {"method": "elicitation/create", "params": wire})
        if isinstance(found, str):
            return _refused(INVALID_PARAMS, found)
        self.asked += 1
        self.open += 1
        try:
            try:
                if not await self._inputs.ask_grant_live(self._session_id, self._call_id, self._grant, found):
                    return mt.ElicitResult(action="cancel")
            except Conflict as full:
                return _refused(INVALID_REQUEST, f"the question was not kept: {full.message}")
            return await self._answer(found.request_id, until)
        finally:
            self.open -= 1

    async def _answer(self, request_id: str, until: float) -> mt.ElicitResult:
        loop = asyncio.get_running_loop()
        pause = FIRST_LOOK_S
        while True:
            (entry,) = await self._inputs.answers(self._session_id, [request_id])
            if entry is not None and entry.get("state") == "answered":
                # The answer route checked the action and, for a form, the content against its schema.
                action = entry.get("action")
                content = entry.get("content")
                if action == "accept":
                    return mt.ElicitResult(action="accept", content=content if isinstance(content, dict) else None)
                return mt.ElicitResult(action="decline" if action == "decline" else "cancel")
            left = until - loop.time()
            if left <= 0 or entry is None:
                self.unanswered += entry is not None
                return mt.ElicitResult(action="cancel")
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, LOOK_EVERY_S)


async def open_alone(
    grant: McpGrant,
    parts: tuple[ProviderAddresses, Budget, Callable[[], None], OnChallenge],
    *,
    sse: bool,
    deadline: float,
    connect_s: float,
    late: str,
    asker: Asker,
) -> Connection | Mapped:
    """A connection of one call to an older server (`parts`: what the hub's connections share), which
    declares elicitation and answers its questions with `asker`; opened by `deadline` (loop time) over the
    transport (`sse`) the grant's shared connection found, within `connect_s` (the read timeout of its short
    exchanges too). Else the call's error result (`late` its text when the deadline came first)."""
    addresses, budget, on_dropped, on_challenge = parts
    alone = Connection(
        grant.url,
        grant.headers,
        addresses,
        budget,
        timeout_s=connect_s,
        on_list_changed=lambda: None,
        on_dropped=on_dropped,
        on_challenge=on_challenge,
        elicit=asker,
    )
    try:
        async with asyncio.timeout_at(deadline):
            await alone.open(min(deadline, asyncio.get_running_loop().time() + connect_s), sse=sse)
    except (TimeoutError, McpUnavailable) as error:
        await alone.close()
        if isinstance(error, TimeoutError):
            return failed(late)
        return failed(f"the MCP server of {grant.name} could not be reached: {describe(error)}")
    except BaseException:
        await alone.close()
        raise
    return alone
