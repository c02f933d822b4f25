"""A frontend's answers to input requests (a client of a call asking the person, shown by a door as an
AG-UI interrupt or an AI SDK data part): each read and checked as the input-request route checks its body
(`read_input_answer`, which writes nothing), and recorded with the request's other answers
(api/doors/answers.py `record_answers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from api.schemas.inputs import AnswerInputBody
from api.state import AppState
from broker.errors import InvalidRequest, NotFound
from broker.services.inputs import InputRequest
from common.elicitation import content_problem

_ANSWER: TypeAdapter[AnswerInputBody] = TypeAdapter(AnswerInputBody)
_ACTIONS = ["accept", "decline", "cancel"]


def answer_schema(form: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON Schema of an answer to a request (the input-request route's body): `action`, and for a
    form the `content` it asks for."""
    properties: dict[str, Any] = {"action": {"type": "string", "enum": _ACTIONS}}
    if form is not None:
        properties["content"] = form
    return {"type": "object", "properties": properties, "required": ["action"], "additionalProperties": False}


@dataclass(frozen=True, slots=True)
class FrontendAnswer:
    """A frontend's answer to an input request of the session, checked."""

    request: InputRequest
    # The run and step of the request's call (where the run stands), as its record says.
    run_id: str
    step: int
    action: Any
    content: dict[str, Any] | None

    @property
    def settled(self) -> bool:
        """Answered or ended already: a resent conversation answers nothing twice."""
        return self.request.state != "open"


async def read_input_answer(
    state: AppState, session_id: str, interrupt_id: str, payload: Any, cancelled: bool, field: str
) -> FrontendAnswer | None:
    """`payload` as the answer to input request `interrupt_id` (`cancelled`: the frontend cancelled it;
    no payload: accepted, as a page visited); None when the session has no such request (the id is a
    call's). 400 naming `field` for a payload that is not the route's body or content the form refuses."""
    try:
        request = await state.broker.inputs.get(session_id, interrupt_id)
    except NotFound:
        return None
    if cancelled:
        body = AnswerInputBody(action="cancel")
    else:
        try:
            body = _ANSWER.validate_python(payload if payload is not None else {"action": "accept"})
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            raise InvalidRequest(f"{field}: {where}: {problem['msg']}") from None
    content = body.content
    if content is not None and body.action != "accept":
        raise InvalidRequest(f"{field}: content: only with action accept")
    if request.state == "open" and body.action == "accept":
        if request.schema is not None:
            content = content or {}
            problem_text = content_problem(request.schema, content)
            if problem_text:
                raise InvalidRequest(f"{field}: {problem_text}")
        elif content is not None:
            raise InvalidRequest(f"{field}: content: a URL-mode request is accepted with no content")
    record = await state.broker.calls.record(session_id, request.call_id)
    run_id, step = (record.run_id, record.step) if record is not None else ("", 0)
    return FrontendAnswer(request, run_id, step, body.action, content)
