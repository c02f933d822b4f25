"""The console's Inbox page script (api/static/inbox.js), run in Node: it asks GET /v1/inbox with the
filters the page names and the cursor of the page before, and renders what comes back."""

from __future__ import annotations

from typing import Any

from tests.unit.console_node import needs_node, run_node

pytestmark = needs_node


def node(script: str) -> Any:
    return run_node({"inbox": "inbox.js"}, script)


def test_the_page_asks_the_inbox_with_its_filters_and_cursor() -> None:
    asked = node(
        """
        const calls = [];
        const api = async (method, path) => { calls.push([method, path]); return { items: [], next_cursor: null }; };
        const filters = inbox.filtersOf("inbox&kind=call&agent_id=&subject=user%2042&other=x");
        await inbox.inboxPage(api, filters);
        await inbox.inboxPage(api, {}, "abc_-");
        console.log(JSON.stringify({ filters, calls, hash: inbox.hashOf(filters), bare: inbox.hashOf({}) }));
        """
    )
    assert asked == {
        "filters": {"kind": "call", "subject": "user 42"},
        "calls": [["GET", "/v1/inbox?limit=50&kind=call&subject=user+42"], ["GET", "/v1/inbox?limit=50&after=abc_-"]],
        "hash": "inbox&kind=call&subject=user+42",
        "bare": "inbox",
    }


def test_the_rows_show_each_kind_and_link_to_the_session() -> None:
    rows = node(
        """
        const items = [
          { kind: "approval", session_id: "0190f2a0-0000-7000-8000-00000000aaaa", call_id: "c1", tool: "sign",
            client_name: null, subject: null, since: "2026-01-01T00:00:00Z", deadline: null },
          { kind: "call", session_id: "0190f2a0-0000-7000-8000-00000000bbbb", call_id: "c2", tool: "scan",
            client_name: "phone", subject: "u-1", since: "2026-01-01T00:00:01Z", deadline: "2026-01-31T00:00:00Z" },
        ];
        const rendered = inbox.inboxRows(items, { el, when: (iso) => `at ${iso}` });
        const shown = rendered.map((row) => ({ call: row.props["data-call"], cells: row.children.map(text) }));
        console.log(JSON.stringify(shown));
        """
    )
    assert rows == [
        {"call": "c1", "cells": ["approval", "…00aaaa", "sign", "—", "at 2026-01-01T00:00:00Z", "none"]},
        {
            "call": "c2",
            "cells": [
                "call waiting for its client",
                "…00bbbb",
                "scan on phone",
                "u-1",
                "at 2026-01-01T00:00:01Z",
                "at 2026-01-31T00:00:00Z",
            ],
        },
    ]


def test_the_section_shows_a_page_then_the_next_on_more() -> None:
    seen = node(
        """
        const node = () => {
          const self = { children: [], hidden: true, style: {}, textContent: "", elements: {} };
          self.classList = {
            remove: (c) => { if (c === "hidden") self.hidden = false; },
            toggle: (c, on) => { if (c === "hidden") self.hidden = on; },
          };
          self.replaceChildren = (...nodes) => { self.children = nodes; };
          self.append = (...nodes) => { self.children.push(...nodes); };
          return self;
        };
        const nodes = {};
        const $ = (id) => (nodes[id] ??= node());
        for (const name of inbox.FILTERS) $("inbox-filters").elements[name] = { value: "" };
        const asked = [];
        const pages = [
          { items: [{ kind: "call", session_id: "s-000001", call_id: "c1", tool: "scan", client_name: "phone",
                      subject: null, since: "t1", deadline: null }], next_cursor: "Y3Vyc29y" },
          { items: [{ kind: "call", session_id: "s-000002", call_id: "c2", tool: "scan", client_name: "phone",
                      subject: null, since: "t2", deadline: null }], next_cursor: null },
        ];
        const api = async (method, path) => { asked.push(path); return pages[asked.length - 1]; };
        const show = inbox.mountInbox({ $, el, api, when: (iso) => iso });
        await show({ kind: "call" });
        const first = { shown: !$("inbox").hidden, rows: $("inbox-rows").children.length, more: !$("inbox-more").hidden,
                        kind: $("inbox-filters").elements.kind.value };
        await $("inbox-more").onclick();
        const calls = $("inbox-rows").children.map((row) => row.props["data-call"]);
        console.log(JSON.stringify({ asked, first, calls, more: !$("inbox-more").hidden }));
        """
    )
    assert seen == {
        "asked": ["/v1/inbox?limit=50&kind=call", "/v1/inbox?limit=50&kind=call&after=Y3Vyc29y"],
        "first": {"shown": True, "rows": 1, "more": True, "kind": "call"},
        "calls": ["c1", "c2"],
        "more": False,
    }


def test_a_sign_in_row_links_to_its_authorization_server_only_over_http() -> None:
    rows = node(
        """
        const item = (url) => ({ kind: "authorization", session_id: "0190f2a0-0000-7000-8000-00000000cccc",
          call_id: "", tool: "notes", client_name: null, subject: "u-1", since: "t1", deadline: "t2",
          authorization_id: "a1", authorization_url: url });
        const rendered = inbox.inboxRows(
          [item("https://auth.example/authorize?state=s"), item("javascript:alert(1)")], { el, when: (iso) => iso });
        let bubbled = false;
        const [link] = all(rendered[0], "a");
        link.props.onclick({ stopPropagation: () => { bubbled = true; } });
        console.log(JSON.stringify({
          cells: rendered.map((row) => row.children.map(text)),
          links: rendered.map((row) => all(row, "a").map((a) => [a.props.href, a.props.target, a.props.rel])),
          stopped: bubbled,
        }));
        """
    )
    assert rows == {
        "cells": [
            ["sign-in", "…00cccc", "notes sign in", "u-1", "t1", "t2"],
            ["sign-in", "…00cccc", "notes no http(s) link", "u-1", "t1", "t2"],
        ],
        "links": [[["https://auth.example/authorize?state=s", "_blank", "noopener noreferrer"]], []],
        "stopped": True,
    }
