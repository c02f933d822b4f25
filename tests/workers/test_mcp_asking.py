"""A grant's server's InputRequiredResult read as the session's input requests, or refused saying why (a
server's answer is as hostile as any input), and the person's answers as the retry's inputResponses."""

from __future__ import annotations

from typing import Any

import pytest

from workers.mcp import asking

FORM = {"type": "object", "properties": {"name": {"type": "string"}}}


def _asks(**requests: Any) -> dict[str, Any]:
    return {"resultType": "input_required", "inputRequests": requests, "requestState": "s"}


def _form(message: str = "Name?", schema: Any = FORM) -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": schema}}


def _page(url: str) -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": url}}


def test_forms_and_pages_are_read_with_the_servers_keys_and_state() -> None:
    page = {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "Sign in", "url": "https://a.example/x"},
    }
    read = asking.read_round(_asks(name=_form(), login=page), 0)
    assert isinstance(read, asking.Round)
    assert read.state == "s"
    form, link = read.asked
    assert (form.key, form.message, form.schema, form.url) == ("name", "Name?", FORM, None)
    assert (link.key, link.schema, link.url) == ("login", None, "https://a.example/x")
    assert form.request_id != link.request_id


def test_state_alone_is_a_round_with_nothing_to_ask() -> None:
    read = asking.read_round({"resultType": "input_required", "requestState": "again"}, 0)
    assert read == asking.Round([], "again")


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (_asks(**{f"q{n}": _form() for n in range(5)}), "asked 5 questions at once, past the 4"),
        ({"resultType": "input_required"}, "neither inputRequests nor requestState"),
        ({"resultType": "input_required", "inputRequests": []}, "inputRequests must be an object"),
        ({"resultType": "input_required", "requestState": 5}, "requestState must be text"),
        ({"resultType": "input_required", "requestState": "x" * 20_000}, "at most 16,384 bytes"),
        (_asks(**{"k" * 65: _form()}), "keys must be 1 to 64 characters"),
        (_asks(q={"method": "sampling/createMessage", "params": {}}), "'sampling/createMessage' is a request a grant"),
        (_asks(q={"method": "roots/list"}), "'roots/list'"),
        (_asks(q="junk"), "only elicitation/create"),
        (_asks(q={"method": "elicitation/create", "params": 3}), "inputRequests.q.params: must be an object"),
        (_asks(q=_form(message="")), "inputRequests.q.params.message: must be text of 1 to 2,000"),
        (_asks(q=_form(message="m" * 2001)), "params.message"),
        (_asks(q=_form(schema={"type": "array"})), "inputRequests.q.params.requestedSchema"),
        (_asks(q=_form(schema={"type": "object", "properties": {"p": {"type": "object"}}})), "requestedSchema"),
        (_asks(q=_form(schema={"type": "object", "properties": {"p" * 17_000: {"type": "string"}}})), "16,384 bytes"),
        (
            _asks(q=_page("file:///etc")),
            "params.url: must be an absolute http(s) URL",
        ),
        (
            _asks(
                q={
                    "method": "elicitation/create",
                    "params": {"mode": "url", "message": "m", "url": "https://a/" + "x" * 3000},
                }
            ),
            "at most 2,048 characters",
        ),
    ],
)
def test_what_a_grant_cannot_ask_fails_the_call_saying_why(body: dict[str, Any], why: str) -> None:
    read = asking.read_round(body, 0)
    assert isinstance(read, str)
    assert why in read


def test_rounds_are_bounded() -> None:
    read = asking.read_round(_asks(q=_form()), asking.MAX_ROUNDS)
    assert read == f"it asked for input more than {asking.MAX_ROUNDS} times in one call"


def test_answers_become_elicit_results_keyed_as_asked() -> None:
    entries: list[dict[str, Any] | None] = [
        {"action": "accept", "content": {"name": "Ada"}},
        {"action": "decline", "content": None},
        None,
        {"action": "accept"},
    ]
    assert asking.responses(["a", "b", "c", "d"], entries) == {
        "a": {"action": "accept", "content": {"name": "Ada"}},
        "b": {"action": "decline"},
        "c": {"action": "cancel"},
        "d": {"action": "accept"},
    }
