"""The console's input requests (api/static/input-form.js), run in Node: a form drawn from each kind of
property of an MCP elicitation schema, what a person typed made the answer's `content` (or the problem
naming the field), the answer posted to the route, a URL-mode request as a link, and an ended request's
state; the panel keeps an open card's node while other events come."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.console_node import needs_node, run_node

pytestmark = needs_node

# A stand-in for the console's boxes.
FAKE_DOM = """
const box = () => ({ children: [], textContent: "", classes: new Set(),
  replaceChildren(...nodes) { this.children = nodes; },
  classList: { toggle(name, on) { box.last = [name, on]; } } });
"""

SCHEMA = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "title": "Amount", "minimum": 0, "maximum": 1000},
        "count": {"type": "integer"},
        "account": {"type": "string", "enum": ["checking", "savings"], "enumNames": ["Checking", "Savings"]},
        "tier": {"type": "string", "oneOf": [{"const": "gold", "title": "Gold"}, {"const": "basic"}]},
        "confirm": {"type": "boolean", "default": True},
        "email": {"type": "string", "format": "email", "description": "for the receipt"},
    },
    "required": ["amount", "account"],
}
ASKED = {
    "type": "input_requested",
    "request_id": "r1",
    "call_id": "c1",
    "client_id": "web",
    "tool": "transfer",
    "key": "r1",
    "message": "How much?",
    "source": "client",
    "schema": SCHEMA,
}


def node(script: str) -> Any:
    return run_node({"form": "input-form.js"}, script, FAKE_DOM)


def test_each_kind_of_property_is_a_field() -> None:
    fields = node(f"console.log(JSON.stringify(form.fieldsOf({json.dumps(SCHEMA)})));")
    shown = {f["name"]: (f["kind"], f["title"], f["required"], f["options"]) for f in fields}
    assert shown == {
        "amount": ("number", "Amount", True, None),
        "count": ("integer", "count", False, None),
        "account": (
            "enum",
            "account",
            True,
            [{"value": "checking", "title": "Checking"}, {"value": "savings", "title": "Savings"}],
        ),
        "tier": ("enum", "tier", False, [{"value": "gold", "title": "Gold"}, {"value": "basic", "title": "basic"}]),
        "confirm": ("boolean", "confirm", False, None),
        "email": ("string", "email", False, None),
    }
    assert [f["name"] for f in fields] == list(SCHEMA["properties"])


def test_what_a_person_typed_is_the_content_or_the_problem_naming_the_field() -> None:
    made = node(
        f"""
        const fields = form.fieldsOf({json.dumps(SCHEMA)});
        const typed = {{ amount: "12.5", count: "", account: "savings", tier: "", confirm: false, email: "a@b.co" }};
        console.log(JSON.stringify([
          form.contentOf(fields, typed),
          form.contentOf(fields, {{ ...typed, amount: " " }}),
          form.contentOf(fields, {{ ...typed, amount: "lots" }}),
          form.contentOf(fields, {{ ...typed, count: "2.5" }}),
          form.contentOf(fields, {{ ...typed, count: "3", confirm: true }}),
        ]));
        """
    )
    assert made == [
        {"content": {"amount": 12.5, "account": "savings", "confirm": False, "email": "a@b.co"}},
        {"problem": "amount: required"},
        {"problem": "amount: must be a number"},
        {"problem": "count: must be a whole number"},
        {"content": {"amount": 12.5, "count": 3, "account": "savings", "confirm": True, "email": "a@b.co"}},
    ]


def test_an_open_form_has_a_control_per_field_and_posts_each_answer() -> None:
    seen = node(
        f"""
        const posted = [];
        const api = async (method, path, body) => {{ posted.push([method, path, body]); return {{}}; }};
        const answers = [];
        const card = form.inputCard({{ asked: {json.dumps(ASKED)}, ended: null }},
          {{ el, answer: async (action, content) => answers.push([action, content ?? null]) }});
        const inputs = all(card, "input").map((i) => [i.props.name, i.props.type, i.props.checked ?? null,
          i.props.required ?? null]);
        const selects = all(card, "select").map((s) => [s.props.name, all(s, "option").map((o) => o.props.value)]);
        const [formNode] = all(card, "form");
        // The Accept button submits the form: its handler reads the form's elements.
        const elements = {{ amount: {{ value: "5" }}, count: {{ value: "" }}, account: {{ value: "checking" }},
          tier: {{ value: "gold" }}, confirm: {{ checked: true }}, email: {{ value: "" }} }};
        formNode.props.onsubmit({{ preventDefault() {{}}, target: {{ elements }} }});
        await button(card, "Decline").props.onclick();
        await button(card, "Cancel").props.onclick();
        await form.answerInput(api, "s1", "r/1", "accept", {{ amount: 1 }});
        await form.answerInput(api, "s1", "r1", "decline");
        console.log(JSON.stringify({{ card: card.props, message: text(card), inputs, selects,
          buttons: all(card, "button").map(text), answers, posted }}));
        """
    )
    assert seen["card"] == {"class": "input open", "data-request": "r1"}
    assert "How much?" in seen["message"]
    assert seen["inputs"] == [
        ["amount", "number", None, True],
        ["count", "number", None, None],
        # A flag that is off is no attribute at all (the console's `el` sets every prop it is given).
        ["confirm", "checkbox", True, None],
        ["email", "email", None, None],
    ]
    assert seen["selects"] == [["account", ["checking", "savings"]], ["tier", ["", "gold", "basic"]]]
    assert seen["buttons"] == ["Accept", "Decline", "Cancel"]
    assert seen["answers"] == [
        ["accept", {"amount": 5, "account": "checking", "tier": "gold", "confirm": True}],
        ["decline", None],
        ["cancel", None],
    ]
    assert seen["posted"] == [
        ["POST", "/v1/sessions/s1/input-requests/r%2F1", {"action": "accept", "content": {"amount": 1}}],
        ["POST", "/v1/sessions/s1/input-requests/r1", {"action": "decline"}],
    ]


def test_a_url_request_is_a_link_and_an_ended_one_shows_its_state() -> None:
    asked = {key: value for key, value in ASKED.items() if key != "schema"} | {"url": "https://pay.example/sign"}
    seen = node(
        f"""
        const asked = {json.dumps(asked)};
        const answers = [];
        const answer = async (action, content) => answers.push([action, content ?? null]);
        const page = form.inputCard({{ asked, ended: null }}, {{ el, answer }});
        await button(page, "Done").props.onclick();
        const ended = (provided, byHere = false) => {{
          const card = form.inputCard({{ asked, ended: provided, byHere }}, {{ el, answer }});
          return [card.props.class, text(all(card, "div").find((d) => d.props.class === "state note")),
            all(card, "button").length];
        }};
        console.log(JSON.stringify({{
          link: all(page, "a").map((a) => [a.props.href, a.props.target, a.props.rel]),
          buttons: all(page, "button").map(text), forms: all(page, "form").length, answers,
          ended: [
            ended({{ action: "accept", content: {{ amount: 5 }} }}, true),
            ended({{ action: "decline", content: null }}),
            ended({{ action: "cancel", content: null, reason: "call_settled" }}),
            ended({{ action: "cancel", content: null, reason: "call_waiting" }}),
          ],
        }}));
        """
    )
    assert seen["link"] == [["https://pay.example/sign", "_blank", "noopener noreferrer"]]
    assert (seen["buttons"], seen["forms"], seen["answers"]) == (["Done", "Decline", "Cancel"], 0, [["accept", None]])
    assert seen["ended"] == [
        ["input answered", 'accepted by you: {"amount":5}', 0],
        ["input answered", "declined", 0],
        ["input cancelled", "cancelled: its call ended first", 0],
        ["input cancelled", "cancelled: its client left and the call waits for the next one", 0],
    ]


def test_the_panel_keeps_an_open_cards_node_and_shows_how_each_ended() -> None:
    seen = node(
        f"""
        const boxes = {{ inputs: box(), "inputs-panel": box(), "input-count": box() }};
        const $ = (id) => boxes[id];
        const posted = [];
        const api = async (method, path, body) => {{ posted.push([path, body]); return {{}}; }};
        const panel = form.mountInputs({{ $, el, api, sessionId: () => "s1" }});
        const asked = {json.dumps(ASKED)};
        panel.see(asked);
        panel.see({{ ...asked, request_id: "r2", url: "https://pay.example", schema: undefined }});
        panel.see({{ type: "message_user" }});
        const [first, second] = boxes.inputs.children;
        panel.see({{ type: "input_provided", request_id: "r2", call_id: "c1", client_id: "web", action: "decline",
          content: null }});
        const after = boxes.inputs.children;
        const count = boxes["input-count"].textContent;
        await button(after[1], "Decline").props.onclick();
        panel.reset();
        console.log(JSON.stringify({{ kept: after[1] === first, rebuilt: after[0] !== second,
          order: after.map((c) => c.props["data-request"]), states: after.map((c) => c.props.class), count,
          posted, none: text(boxes.inputs.children[0]) }}));
        """
    )
    # The ended one comes first (a card of its own now), the open one after, still the same node (what was
    # typed in it stays).
    assert seen["kept"]
    assert seen["rebuilt"]
    assert seen["order"] == ["r2", "r1"]
    assert seen["states"] == ["input answered", "input open"]
    assert seen["count"] == "1"
    assert seen["posted"] == [["/v1/sessions/s1/input-requests/r1", {"action": "decline"}]]
    assert seen["none"] == "None."


@pytest.mark.parametrize("url", ["javascript:alert(1)", "data:text/html,<b>x</b>", "/relative", "vbscript:x"])
def test_a_url_request_that_is_not_http_is_never_a_link(url: str) -> None:
    asked = {key: value for key, value in ASKED.items() if key != "schema"} | {"url": url}
    seen = node(
        f"""
        const page = form.inputCard({{ asked: {json.dumps(asked)}, ended: null }}, {{ el, answer: async () => {{}} }});
        console.log(JSON.stringify({{ links: all(page, "a").length, shown: text(page).includes({json.dumps(url)}) }}));
        """
    )
    assert seen == {"links": 0, "shown": True}
