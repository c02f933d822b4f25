"""The console's sign-ins (api/static/sign-ins.js), run in Node: a waiting sign-in's card shows the grant,
the server, a "Sign in" link opening a new tab with no opener or referrer, and a Decline button posting to
the decline route; only an http(s) address is ever a link (a `javascript:` or `data:` one, or any other,
is not); what an event carries stays text; the card goes once the sign-in completes, is declined or runs
out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.console_node import needs_node, run_node

pytestmark = needs_node

# A stand-in for the console's `$`.
FAKE_DOM = """
const boxes = {};
const $ = (id) => (boxes[id] ??= { children: [], textContent: "", empty: null,
  replaceChildren(...nodes) { this.children = nodes; },
  classList: { toggle(name, on) { boxes[id].empty = on; } } });
"""

ASKED = {
    "type": "mcp_authorization_required",
    "seq": 7,
    "authorization_id": "a/1",
    "grant": "notes",
    "server_url": "https://mcp.example/mcp",
    "authorization_url": "https://auth.example/authorize?state=s&x=%22",
    "expires_at": "2099-01-01T00:00:00Z",
}
HOSTILE = [
    "javascript:alert(document.cookie)",
    " JavaScript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "//evil.example/x",
    "/v1/sessions",
    "file:///etc/passwd",
    "",
    None,
    42,
]


def node(script: str) -> Any:
    return run_node({"signIns": "sign-ins.js"}, script, FAKE_DOM)


def test_only_an_http_or_https_address_is_a_link() -> None:
    links = node(f"console.log(JSON.stringify({json.dumps(HOSTILE)}.map(signIns.safeLink)));")
    assert links == [None] * len(HOSTILE)
    kept = node(
        'console.log(JSON.stringify(["https://a.example/x?y=1", "http://127.0.0.1:9/a"].map(signIns.safeLink)));'
    )
    assert kept == ["https://a.example/x?y=1", "http://127.0.0.1:9/a"]


def test_a_card_links_to_the_sign_in_in_a_new_tab_and_declines_at_its_route() -> None:
    seen = node(
        f"""
        const posted = [];
        const api = async (method, path, body) => {{ posted.push([method, path, body]); return {{}}; }};
        const asked = {json.dumps(ASKED)};
        const card = signIns.signInCard(asked, {{ el, decline: () => signIns.declineSignIn(api, "s1", "a/1") }});
        await button(card, "Decline").props.onclick();
        const fail = async () => {{ throw new Error("ended already"); }};
        const refused = signIns.signInCard(asked, {{ el, decline: fail }});
        await button(refused, "Decline").props.onclick();
        console.log(JSON.stringify({{
          props: card.props, text: text(card),
          links: all(card, "a").map((a) => [a.props.href, a.props.target, a.props.rel, text(a)]),
          posted, problem: all(refused, "div").find((d) => d.props.class === "problem note").textContent,
        }}));
        """
    )
    assert seen["props"] == {"class": "sign-in", "data-authorization": "a/1"}
    assert "notes" in seen["text"]
    assert "https://mcp.example/mcp" in seen["text"]
    assert seen["links"] == [
        ["https://auth.example/authorize?state=s&x=%22", "_blank", "noopener noreferrer", "Sign in"]
    ]
    assert seen["posted"] == [["POST", "/v1/sessions/s1/mcp-authorizations/a%2F1/decline", {}]]
    assert "ended already" in seen["problem"]


@pytest.mark.parametrize("url", HOSTILE)
def test_a_hostile_link_is_never_rendered_and_markup_stays_text(url: object) -> None:
    asked = ASKED | {"authorization_url": url, "grant": "<img src=x onerror=alert(1)>"}
    seen = node(
        f"""
        const card = signIns.signInCard({json.dumps(asked)}, {{ el, decline: async () => {{}} }});
        const props = JSON.stringify(card, (key, value) => typeof value === "function" ? undefined : value);
        console.log(JSON.stringify({{ links: all(card, "a").length, imgs: all(card, "img").length,
          text: text(card), hrefs: props.includes("href") }}));
        """
    )
    assert (seen["links"], seen["imgs"], seen["hrefs"]) == (0, 0, False)
    assert "<img src=x onerror=alert(1)>" in seen["text"]
    assert "is not an http(s) address" in seen["text"]


def test_the_panel_shows_each_waiting_sign_in_until_it_ends() -> None:
    seen = node(
        f"""
        let clock = Date.parse("2030-01-01T00:00:00Z");
        const api = async () => ({{}});
        const panel = signIns.mountSignIns({{ $, el, api, sessionId: () => "s1", now: () => clock }});
        const shown = () => [boxes["mcp-signin-count"].textContent, boxes["mcp-signins-panel"].empty,
          boxes["mcp-signins"].children.map((c) => c.props?.["data-authorization"] ?? text(c))];
        const base = {json.dumps(ASKED)};
        const asked = (id, expires_at = "2030-01-01T01:00:00Z") => ({{ ...base, authorization_id: id, expires_at }});
        const states = [];
        panel.reset(); states.push(shown());
        panel.see(asked("a1")); panel.see(asked("a2")); panel.see(asked("a3")); states.push(shown());
        const node = boxes["mcp-signins"].children[0];
        panel.see({{ type: "run_started", run_id: "r1" }});
        panel.see({{ type: "mcp_authorization_completed", authorization_id: "elsewhere" }});
        const same = boxes["mcp-signins"].children[0] === node;
        panel.see({{ type: "mcp_authorization_completed", authorization_id: "a1" }}); states.push(shown());
        panel.see({{ type: "mcp_authorization_declined", authorization_id: "a2", reason: "declined" }});
        states.push(shown());
        clock = Date.parse("2030-01-01T02:00:00Z"); panel.tick(); states.push(shown());
        // One read back from a log long after its link ran out is not shown at all.
        panel.see(asked("old", "2029-12-31T00:00:00Z")); states.push(shown());
        panel.see(asked("a4", "2030-01-01T03:00:00Z")); panel.reset(); states.push(shown());
        console.log(JSON.stringify({{ states, same }}));
        """
    )
    none: list[Any] = ["", True, ["None."]]
    assert seen["states"] == [
        none,
        ["3", False, ["a1", "a2", "a3"]],
        ["2", False, ["a2", "a3"]],
        ["1", False, ["a3"]],
        none,
        none,
        none,
    ]
    # Events of other kinds, or of no sign-in shown, leave the cards as they are.
    assert seen["same"] is True
