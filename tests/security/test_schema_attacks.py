"""Tool schemas as a session token sends them, and the words their failures reach clients in (issue 10).

Every `$ref` resolves within the schema at registration, `PUT .../tools`, per-turn `client_tools` and a
front door's frontend tools, or the request is 400 naming the field and the pointer; a tool's name is
used once per set; `parameters` describes an object. No message a client reads names an exception's class.
Request bodies that are not JSON are test_json_bodies.py's.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import mcp.types as mt
import pytest
from referencing import Registry

from common.codec import uuid7
from common.schema.accept import accept
from common.schema.budget import Budgeted, OverBudget
from common.schema.checks import INLINE_STEPS
from tests.api_client import Api, Session, of_type, run_over
from workers.mcp.hub import offered

# What an exception's class, repr or module shows as; none of it may reach a client.
INTERNAL = re.compile(
    r"_Wrapped|<class|Traceback|\b[A-Z][A-Za-z]*(Error|Exception)\b|"
    r"\b(jsonschema|referencing|pydantic|pydantic_core|httpx|httpx2|anyio|mcp|builtins)\.[A-Za-z_]"
)


def clean(text: str) -> str:
    assert not INTERNAL.search(text), text
    return text


def tool(parameters: Any, name: str = "t") -> dict[str, Any]:
    return {"name": name, "description": "a tool", "parameters": parameters}


# (case, parameters, the pointer where the reference is, the reference as the message quotes it)
DANGLING: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "a pointer to nothing",
        {"type": "object", "properties": {"a": {"$ref": "#/defs/nope"}}},
        "/properties/a",
        "'#/defs/nope'",
    ),
    ("an anchor never set", {"type": "object", "properties": {"a": {"$ref": "#nope"}}}, "/properties/a", "'#nope'"),
    (
        "a pointer that stops part way",
        {"type": "object", "$defs": {"a": {"type": "object"}}, "items": {"$ref": "#/$defs/a/properties/b"}},
        "/items",
        "'#/$defs/a/properties/b'",
    ),
    ("the top level's own", {"$ref": "#/$defs/Args"}, "", "'#/$defs/Args'"),
    (
        "a dynamic reference to no anchor",
        {"type": "object", "properties": {"kids": {"items": {"$dynamicRef": "#node"}}}},
        "/properties/kids/items",
        "'#node'",
    ),
    (
        "into the schema by its own $id",
        {
            "$id": "https://example.com/args",
            "type": "object",
            "properties": {"a": {"$ref": "https://example.com/args#/nope"}},
        },
        "/properties/a",
        "'https://example.com/args#/nope'",
    ),
    (
        "in a definition nothing uses",
        {"type": "object", "$defs": {"unused": {"$ref": "#/$defs/gone"}}},
        "/$defs/unused",
        "'#/$defs/gone'",
    ),
]

# Schemas people write, references and all: each registers and is applied.
RESOLVING: list[tuple[str, dict[str, Any]]] = [
    (
        "into $defs",
        {"type": "object", "$defs": {"Row": {"type": "string"}}, "properties": {"row_id": {"$ref": "#/$defs/Row"}}},
    ),
    (
        "recursive, as pydantic writes a tree",
        {
            "$defs": {"Node": {"type": "object", "properties": {"kids": {"items": {"$ref": "#/$defs/Node"}}}}},
            "$ref": "#/$defs/Node",
        },
    ),
    (
        "an anchor",
        {
            "type": "object",
            "$defs": {"r": {"$anchor": "row", "type": "string"}},
            "properties": {"row_id": {"$ref": "#row"}},
        },
    ),
    (
        "a part with its own $id",
        {
            "$id": "https://example.com/root",
            "type": "object",
            "$defs": {"r": {"$id": "row", "type": "string"}},
            "properties": {"row_id": {"$ref": "row"}},
        },
    ),
    (
        "a dynamic anchor",
        {"$dynamicAnchor": "node", "type": "object", "properties": {"kids": {"items": {"$dynamicRef": "#node"}}}},
    ),
    (
        "draft-07 definitions",
        {
            "definitions": {"r": {"type": "string"}},
            "type": "object",
            "properties": {"row_id": {"$ref": "#/definitions/r"}},
        },
    ),
    ("any object", {}),
    ("an object or null", {"type": ["object", "null"], "properties": {"row_id": {"type": "string"}}}),
]

# (case, parameters, what the refusal says)
NOT_AN_OBJECT: list[tuple[str, Any, str]] = [
    ("a string schema", {"type": "string"}, "type is 'string'"),
    ("types without object", {"type": ["array", "null"]}, "type is ['array', 'null']"),
    ("an array of tools' worth", [{"type": "object"}], "must be a JSON object"),
    ("the boolean schema true", True, "not true"),
    ("the boolean schema false", False, "not false"),
    (
        "a top-level reference to a string schema",
        {"$ref": "#/$defs/s", "$defs": {"s": {"type": "string"}}},
        "type is 'string' (give",
    ),
]


Post = Callable[[Api, Session, list[dict[str, Any]]], Awaitable[httpx.Response]]


async def _register(api: Api, session: Session, tools: list[dict[str, Any]]) -> httpx.Response:
    async with api.as_session(session) as client:
        body = {"name": "web", "lifetime": {"type": "never"}, "tools": tools}
        return await client.post(f"/v1/sessions/{session.id}/clients", json=body)


async def _put_tools(api: Api, session: Session, tools: list[dict[str, Any]]) -> httpx.Response:
    registered = await api.register(session, ttl=None, tools=[tool({"type": "object"}, "before")])
    async with api.as_session(session) as client:
        return await client.put(f"/v1/sessions/{session.id}/clients/{registered['id']}/tools", json={"tools": tools})


async def _client_tools(api: Api, session: Session, tools: list[dict[str, Any]]) -> httpx.Response:
    async with api.as_session(session) as client:
        body = {"type": "input", "text": "hi", "client_tools": tools}
        return await client.post(f"/v1/sessions/{session.id}/events", json=body)


async def _ag_ui(api: Api, session: Session, tools: list[dict[str, Any]]) -> httpx.Response:
    body = {"threadId": "t", "runId": "r", "messages": [{"id": "u1", "role": "user", "content": "hi"}], "tools": tools}
    async with api.as_session(session) as client:
        return await client.post(f"/v1/sessions/{session.id}/ag-ui", json=body)


async def _ai_sdk(api: Api, session: Session, tools: list[dict[str, Any]]) -> httpx.Response:
    user = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    body = {"id": "c", "messages": [user], "trigger": "submit-message", "tools": tools}
    async with api.as_session(session) as client:
        return await client.post(f"/v1/sessions/{session.id}/ai-sdk/chat", json=body)


# Each way tools arrive, with the field its refusal names the tools by.
DOORS: list[tuple[str, Post, str]] = [
    ("registration", _register, "tools[0].parameters"),
    ("PUT tools", _put_tools, "tools[0].parameters"),
    ("client_tools", _client_tools, "client_tools[0].parameters"),
    ("AG-UI", _ag_ui, "tools: 0.parameters"),
    ("AI SDK", _ai_sdk, "tools: 0.parameters"),
]


async def _refused(api: Api, session: Session, post: Post, tools: list[dict[str, Any]]) -> str:
    """The refusal's message; asserts 400 `invalid_request` and that nothing of the request was written."""
    before = await api.events(session)
    answer = await post(api, session, tools)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request"
    after = await api.events(session)
    # The PUT door registers its client first: only that registration may be new.
    assert [e["type"] for e in after[len(before) :]] in ([], ["client_registered"]), after[len(before) :]
    return clean(str(error["message"]))


@pytest.mark.parametrize(("door", "post", "field"), DOORS, ids=[d[0] for d in DOORS])
@pytest.mark.parametrize(("case", "parameters", "where", "reference"), DANGLING, ids=[d[0] for d in DANGLING])
async def test_a_reference_that_names_nothing_is_400_naming_the_field_and_the_pointer(
    api: Api, door: str, post: Post, field: str, case: str, parameters: dict[str, Any], where: str, reference: str
) -> None:
    session = await api.session()
    message = await _refused(api, session, post, [tool(parameters)])
    assert message.startswith(field), message
    assert f"{reference} points at nothing in the schema" in message
    assert f"(at {where}/$" in message


@pytest.mark.parametrize(("door", "post", "field"), DOORS, ids=[d[0] for d in DOORS])
async def test_two_tools_of_one_name_are_400_naming_the_name_and_both_places(
    api: Api, door: str, post: Post, field: str
) -> None:
    session = await api.session()
    tools = [tool({"type": "object"}, "a"), tool({"type": "object"}, "b"), tool({}, "a")]
    message = await _refused(api, session, post, tools)
    assert "items 0 and 2 are both named 'a'" in message
    assert message.startswith(field.split("[")[0].split(":")[0]), message


@pytest.mark.parametrize(("door", "post", "field"), DOORS, ids=[d[0] for d in DOORS])
@pytest.mark.parametrize(("case", "parameters", "words"), NOT_AN_OBJECT, ids=[n[0] for n in NOT_AN_OBJECT])
async def test_parameters_that_do_not_describe_an_object_are_400(
    api: Api, door: str, post: Post, field: str, case: str, parameters: Any, words: str
) -> None:
    if door in ("AG-UI", "AI SDK") and parameters is False:
        pytest.skip("a frontend tool's parameters that are empty or false are its default: any object")
    session = await api.session()
    message = await _refused(api, session, post, [tool(parameters)])
    assert message.startswith(field), message
    assert words in message


@pytest.mark.parametrize(("case", "parameters"), RESOLVING, ids=[r[0] for r in RESOLVING])
async def test_schemas_whose_references_resolve_register_and_check_calls(
    api: Api, case: str, parameters: dict[str, Any]
) -> None:
    session = await api.session()
    await api.register(session, tools=[tool(parameters)])
    await api.send(session, '/call client__web__t {"row_id": 7, "kids": [5]}')
    events = await api.wait_for(session, lambda es: run_over(es) or bool(of_type(es, "client_tool_dispatched")))
    results = of_type(events, "tool_result")
    if results:
        # Refused by the schema's own rules (an integer where a string or an object goes), in words.
        [result] = results
        assert result["is_error"]
        assert "rule: type" in clean(result["content"][0]["data"]["text"])
    else:
        # Any object: the call goes to the client.
        [dispatched] = of_type(events, "client_tool_dispatched")
        assert dispatched["arguments"] == {"row_id": 7, "kids": [5]}


async def test_a_schema_stored_before_references_were_resolved_fails_its_calls_in_words(api: Api) -> None:
    # The case: registered with 201 by the release before this one; its calls failed naming
    # `_WrappedReferencingError: PointerToNowhere`.
    session = await api.session()
    stored = tool({"type": "object", "properties": {"a": {"$ref": "#/defs/nope"}}})
    await api.stack.broker.clients.register(session.id, uuid7(), "web", None, [stored])
    await api.send(session, '/call client__web__t {"a": 1}')
    events = await api.wait_for(session, run_over)
    [result] = of_type(events, "tool_result")
    assert result["is_error"]
    text = clean(result["content"][0]["data"]["text"])
    assert "its reference #/defs/nope names nothing in it" in text
    assert not of_type(events, "client_tool_dispatched")


async def test_a_nested_keyword_of_the_wrong_kind_fails_its_calls_saying_where(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[tool({"type": "object", "properties": {"a": {"type": 5}}})])
    await api.send(session, '/call client__web__t {"a": 1}')
    events = await api.wait_for(session, run_over, timeout=15)
    [result] = of_type(events, "tool_result")
    text = clean(result["content"][0]["data"]["text"])
    assert "not valid JSON Schema at /properties/a/type" in text
    assert of_type(events, "run_completed")


async def test_a_schema_of_many_anchors_registers_and_is_indexed_once(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2,000 references to anchors took 30 s to accept on the API's loop: each lookup crawled the whole
    # schema again. Counted here rather than timed: the schema is crawled once per acceptance.
    anchors = {f"p{i}": {"$anchor": f"a{i}", "type": "string"} for i in range(2_000)}
    refs = {f"r{i}": {"$ref": f"#a{i}"} for i in range(2_000)}
    schema = {"type": "object", "properties": {**anchors, **refs}}
    crawls = _count_crawls(monkeypatch)
    accept(schema)
    assert crawls == [1]
    session = await api.session()
    await api.register(session, tools=[tool(schema)])


def _count_crawls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    crawls = [0]
    crawl = Registry.crawl

    def counted(self: Registry[Any]) -> Registry[Any]:
        crawls[0] += 1
        return crawl(self)

    monkeypatch.setattr(Registry, "crawl", counted)
    return crawls


def test_checking_arguments_against_anchors_does_not_index_the_schema_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # 6,000 anchors and 18 arguments each applying one held the loop 0.7 s within the loop's 200 steps.
    budgeted = Budgeted()
    schema = {"type": "object", "$defs": {f"p{i}": {"$anchor": f"a{i}"} for i in range(6_000)}}
    validator = budgeted.compile({**schema, "additionalProperties": {"$ref": "#a0"}})
    crawls = _count_crawls(monkeypatch)
    assert budgeted.problem(validator, {f"x{i}": "s" for i in range(18)}, INLINE_STEPS) == ""
    assert crawls == [0]


def test_a_long_pointer_is_charged_for_its_segments() -> None:
    # Each lookup walks the pointer's segments (and may cost their square): charged at 8 steps a
    # reference, fifteen such references fit in the loop's 200 steps.
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(30):
        deep = {"not": deep}
    budgeted = Budgeted()
    validator = budgeted.compile({"$defs": {"d": deep}, "additionalProperties": {"$ref": "#/$defs/d" + "/not" * 30}})
    with pytest.raises(OverBudget):
        budgeted.problem(validator, {f"x{i}": "s" for i in range(15)}, INLINE_STEPS)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/defs/nope"}}},
        {"type": "string"},
        {"type": "object", "items": {"items": 5}},
    ],
)
def test_an_mcp_grants_tool_whose_schema_a_registration_refuses_is_left_out(schema: dict[str, Any]) -> None:
    assert offered(mt.Tool(name="t", input_schema=schema), "https://mcp.example") is None
    assert offered(mt.Tool(name="t", input_schema={"type": "object"}), "https://mcp.example") is not None
