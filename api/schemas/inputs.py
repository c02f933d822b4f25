"""The bodies of input requests: a client asking the person during a call, and the person's answer."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from api.schemas.common import Strict

MAX_INPUT_MESSAGE = 2_000
MAX_INPUT_SCHEMA_BYTES = 16 * 1024
MAX_INPUT_URL = 2_048
# The name a request has within its call (MCP's `inputRequests` key).
INPUT_KEY_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"
# MCP's other requests of its caller, which only an MCP caller that declared the capability can answer.
InputMethod = Literal["sampling/createMessage", "roots/list"]


class AskInputBody(Strict):
    """One of: a form (`message` and `schema`), a page to visit (`message` and `url`), or one of MCP's other
    requests (`method` and `params`)."""

    message: Annotated[str | None, Field(max_length=MAX_INPUT_MESSAGE, description="What the person is asked")] = None
    # `schema` is a name pydantic's BaseModel keeps for itself.
    form: Annotated[
        dict[str, Any] | None,
        Field(
            alias="schema",
            description="MCP elicitation's `requestedSchema`: a flat object of string, number, integer, boolean "
            "and enum properties (16 KiB at most)",
        ),
    ] = None
    url: Annotated[
        str | None,
        Field(max_length=MAX_INPUT_URL, description="URL mode: the http(s) page the person is sent to"),
    ] = None
    method: Annotated[InputMethod | None, Field(description="One of MCP's other input requests")] = None
    params: Annotated[dict[str, Any] | None, Field(description="The MCP request's params")] = None
    key: Annotated[
        str | None,
        Field(pattern=INPUT_KEY_PATTERN, description="The request's name, unique within the call (default: its id)"),
    ] = None


class AskedInputBody(Strict):
    request_id: str
    key: str


class AnswerInputBody(Strict):
    action: Literal["accept", "decline", "cancel"]
    content: Annotated[
        dict[str, Any] | None, Field(description="The form's fields, with `accept` (checked against the schema)")
    ] = None


class InputRequestBody(Strict):
    request_id: str
    key: str
    call_id: str
    state: Literal["open", "answered", "cancelled"] = Field(
        description="`open` until answered (`answered`) or ended with its call (`cancelled`)"
    )
    action: Literal["accept", "decline", "cancel"] | None
    content: dict[str, Any] | None
