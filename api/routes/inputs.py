"""Input requests (an extension): the client that acked a call asks the person during it, as MCP
elicitation does (a form, or a page to visit); anyone holding the session's token answers, the first
answer winning; either reads the request back."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ValidationError

from api.deps import Authenticated, ManagedSession, ReadSession, canonical_id
from api.keyed import Answer, Keyed, keyed, respond
from api.schemas.common import ErrorBody
from api.schemas.inputs import (
    MAX_INPUT_SCHEMA_BYTES,
    AnswerInputBody,
    AskedInputBody,
    AskInputBody,
    InputRequestBody,
)
from api.schemas.session_events import InputProvided
from api.state import State
from broker.errors import Conflict, InvalidRequest
from common.codec import dumps, uuid7
from common.elicitation import content_problem, schema_problem
from common.runtime import imported

router = APIRouter(prefix="/v1/sessions/{session_id}", tags=["input requests"], responses={400: {"model": ErrorBody}})

# MCP's missing-capability error, as its SDKs word it, for each request only an MCP caller can answer.
_CAPABILITY = {"sampling/createMessage": "sampling", "roots/list": "listing roots"}
# What an MCP caller declares to be asked each of them (as dispatch keeps it on the call's record).
_NEEDS = {"sampling/createMessage": "sampling", "roots/list": "roots"}
# The `mcp` model of each one's params (by name: the package is imported in a thread on first use, as the
# session MCP server is, and never at the API's start).
_PARAMS = {"sampling/createMessage": "CreateMessageRequestParams", "roots/list": "RequestParams"}


def _checked(body: AskInputBody) -> None:
    """400 naming the field for a body that is not exactly one kind of request, or whose form or page is not
    one a host can show."""
    kinds = [name for name, given in (("schema", body.form), ("url", body.url), ("method", body.method)) if given]
    if len(kinds) != 1:
        raise InvalidRequest("schema, url, method: exactly one of them (a form, a page to visit, or an MCP request)")
    if body.method is None and body.params is not None:
        raise InvalidRequest("params: only with method")
    if body.method is not None:
        if body.message is not None:
            raise InvalidRequest("message: not with method (its params say what is asked)")
        return
    if not body.message:
        raise InvalidRequest("message: required with schema or url (what the person is asked)")
    problem = _form_problem(body.form) if body.form is not None else _page_problem(body.url or "")
    if problem:
        raise InvalidRequest(problem)


def _form_problem(form: dict[str, Any]) -> str | None:
    size = len(dumps(form).encode())
    if size > MAX_INPUT_SCHEMA_BYTES:
        return f"schema: {size} bytes of JSON, past the limit of {MAX_INPUT_SCHEMA_BYTES}"
    return schema_problem(form)


async def _params_problem(method: str, params: dict[str, Any]) -> str | None:
    size = len(dumps(params).encode())
    if size > MAX_INPUT_SCHEMA_BYTES:
        return f"params: {size} bytes of JSON, past the limit of {MAX_INPUT_SCHEMA_BYTES}"
    model: type[BaseModel] = getattr(await imported("mcp.types"), _PARAMS[method])
    try:
        model.model_validate(params, by_name=False)
    except ValidationError as invalid:
        error = invalid.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"params{'.' if where else ''}{where}: {error['msg']} (the params of MCP's {method})"
    return None


def _page_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "url: must be an absolute http(s) URL"
    return None


@router.post("/clients/{client_id}/calls/{call_id:path}/input-requests", status_code=201, response_model=AskedInputBody)
async def ask_input(
    session_id: str,
    client_id: str,
    call_id: str,
    body: AskInputBody,
    canonical: ManagedSession,
    request: Request,
    caller: Authenticated,
    state: State,
) -> Response:
    """Ask the person during a call this client acked: `input_requested` (shown with
    `?include=extensions`) and an inbox item; the call's result deadline and heartbeat wait until every
    request is answered (its tool's `timeout_s` does not). 409 before the ack, on another client's call or
    a settled one, and for a key the call already used; 429 with 4 requests of the call open. MCP's
    `sampling/createMessage` and `roots/list` go only to the MCP caller that made the call and declared
    it answers them; anywhere else they are 409 at once, with MCP's missing-capability error."""
    _checked(body)
    cid = canonical_id(client_id, "client")
    message = body.message or ""
    if body.method is not None:
        if _NEEDS[body.method] not in (await state.broker.inputs.pending(canonical, call_id)).asks:
            # Noted on an MCP caller's call, so that caller hears what it lacked should the client then fail
            # the call (api/mcp/outcome.py), rather than the client's error.
            await state.broker.inputs.note_missing(canonical, cid, call_id, _NEEDS[body.method])
            raise Conflict(f"Client does not support {_CAPABILITY[body.method]} (required for {body.method})")
        # Checked only for a caller that would be asked: anywhere else the refusal above comes first.
        problem = await _params_problem(body.method, body.params or {})
        if problem:
            raise InvalidRequest(problem)
        message = f"{body.method}, asked of the MCP caller"

    async def act(attempt: Keyed) -> Answer:
        asked = await state.broker.inputs.ask(
            canonical,
            cid,
            call_id,
            attempt.seed["request_id"],
            message,
            schema=body.form,
            url=body.url,
            key=body.key,
            method=body.method,
            params=body.params or {} if body.method is not None else None,
        )
        return Answer(201, AskedInputBody(request_id=asked.request_id, key=asked.key).model_dump_json().encode())

    return await keyed(request, caller, act, seed={"request_id": uuid7()}, session_id=canonical)


@router.post("/input-requests/{request_id}", response_model=InputProvided)
async def answer_input(
    session_id: str,
    request_id: str,
    body: AnswerInputBody,
    canonical: ManagedSession,
    request: Request,
    caller: Authenticated,
    state: State,
) -> Response:
    """Answer an input request: `accept` with the form's `content` (checked against its schema: 400 naming
    the field), `decline` or `cancel`; answers with the `input_provided` event, which reaches the asking
    client. The first answer wins; a later one is 409, as is one for a request that ended with its call."""
    rid = canonical_id(request_id, "input request")
    if body.content is not None and body.action != "accept":
        raise InvalidRequest("content: only with action accept")

    async def act(_: Keyed) -> Answer:
        # Read and checked within the attempt, so a repeat of an Idempotency-Key replays its first answer
        # rather than meeting the request it answered. An answered or ended request is the script's 409.
        asked = await state.broker.inputs.get(canonical, rid)
        if asked.method is not None and body.action == "accept":
            # Its answer is MCP's result, which only the MCP caller it was relayed to gives.
            raise InvalidRequest(
                f"action: a {asked.method} request is accepted by its MCP caller; decline or cancel it"
            )
        content = body.content
        if body.action == "accept" and asked.schema is not None:
            content = content or {}
            problem = content_problem(asked.schema, content)
            if problem:
                raise InvalidRequest(problem)
        elif content is not None and asked.state == "open":
            raise InvalidRequest("content: a URL-mode request is accepted with no content")
        return Answer(200, (await state.broker.inputs.answer(canonical, asked, body.action, content)).encode())

    return await keyed(request, caller, act, seed={}, session_id=canonical)


@router.get("/input-requests/{request_id}", response_model=InputRequestBody)
async def read_input(session_id: str, request_id: str, canonical: ReadSession, state: State) -> Response:
    """An input request as it stands: `open`, `answered` (with the `action` and `content`), or `cancelled`
    (its call settled or went back to waiting for its client first)."""
    asked = await state.broker.inputs.get(canonical, canonical_id(request_id, "input request"))
    answer = InputRequestBody(
        request_id=asked.request_id,
        key=asked.key,
        call_id=asked.call_id,
        state=asked.state,
        action=asked.action,
        content=asked.content,
    )
    return respond(200, answer.model_dump_json())
