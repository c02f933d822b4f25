"""The console's run timeline (api/static/timeline.js, timeline-view.js), run in Node: a run's steps, calls
and the waits within them folded from its events with their durations, the step a run is on while it lasts,
the trace link built only from a checked id and the deployment's template, and event text drawn as text."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.unit.console_node import needs_node, run_node

pytestmark = needs_node


BASE = datetime(2026, 12, 6, 15, 0, 0, tzinfo=UTC)
RUN = "01a24bed-fed6-7002-b87f-41a4355cf9c0"
CALL = "call_1"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TEMPLATE = "http://jaeger:16686/trace/{trace_id}"


def stamp(us: int) -> str:
    """The log's `created_at` of the instant `us` microseconds after BASE."""
    return (BASE + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def at(us: int, type_: str, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "created_at": stamp(us), **fields}


def node(script: str) -> Any:
    return run_node({"tl": "timeline.js", "view": "timeline-view.js"}, script)


def drawn(events: list[dict[str, Any]], now_us: int | None = None) -> Any:
    """The layout of the last run of `events` at `now_us` after BASE (what the waterfall draws)."""
    now = "null" if now_us is None else str(int(BASE.timestamp() * 1_000_000) + now_us)
    return node(
        f"""
        const timeline = new tl.Timeline();
        for (const event of {json.dumps(events)}) timeline.add(event);
        const run = timeline.runs().at(-1);
        const now = {now} ?? run.end;
        console.log(JSON.stringify(tl.layout(run, now, timeline.modelSince(run.runId), timeline.nextStep(run.runId))));
        """
    )


def step(us: int, number: int, step_ms: int, attempt: int = 0, **usage: int) -> dict[str, Any]:
    payload = {"scope": "step", "run_id": RUN, "step": number, "attempt": attempt, "step_ms": step_ms}
    return at(us, "custom", kind="timing", payload=payload | {"started_at_us": 1} | ({"usage": usage} if usage else {}))


# A run whose call waits for an approval, then for its client's ack, then on the client for an input request.
# Instants in microseconds after BASE.
Q, S, COMMIT, ALLOW, ACK = 0, 1_500, 41_500, 2_041_500, 2_043_000
ASKED, ANSWERED, RESULT, END = 2_100_000, 9_100_000, 9_200_000, 9_230_000
CALLED = [
    at(0, "client_registered", client_id="c-web", name="web", lifetime={"type": "never"}, tools=[]),
    at(Q, "run_queued", run_id=RUN),
    at(S, "run_started", run_id=RUN, trace_id=TRACE),
    at(COMMIT, "message_assistant", message={"role": "assistant", "content": []}),
    at(COMMIT, "tool_call", call_id=CALL, name="client__web__highlight_row", arguments={"row_id": "7"}),
    at(COMMIT, "approval_requested", call_id=CALL, server="client:web", tool="highlight_row", arguments={}),
    step(COMMIT, 0, 40),
    at(ALLOW, "approval_resolved", call_id=CALL, decision="allow", deny_message=None, resolved_by="k"),
    at(ALLOW, "client_tool_dispatched", client_id="c-web", call_id=CALL, tool="highlight_row", arguments={}),
    at(ACK, "client_tool_acked", client_id="c-web", call_id=CALL),
    at(
        ASKED,
        "input_requested",
        request_id="r1",
        call_id=CALL,
        client_id="c-web",
        tool="highlight_row",
        key="r1",
        message="How much?",
        source="client",
    ),
    at(ANSWERED, "input_provided", request_id="r1", call_id=CALL, client_id="c-web", action="accept", content={}),
    at(RESULT, "tool_result", call_id=CALL, content=[], is_error=False),
]
COMPLETED = [
    *CALLED,
    at(END, "message_assistant", message={"role": "assistant", "content": []}),
    step(END, 1, 25, attempt=1, input_tokens=1200, output_tokens=3, cached_input_tokens=1000),
    at(END, "run_completed", run_id=RUN, usage={"input_tokens": 10, "output_tokens": 3}),
]


def rows(layout: Any) -> list[tuple[int, str, str, str, int | None]]:
    return [(r["depth"], r["kind"], r["label"], r["state"], r["duration"]) for r in layout["rows"]]


def test_a_runs_steps_calls_and_waits_have_their_durations() -> None:
    layout = drawn(COMPLETED)
    assert (layout["start"], layout["end"], layout["open"]) == (
        int(BASE.timestamp() * 1_000_000) + Q,
        int(BASE.timestamp() * 1_000_000) + END,
        False,
    )
    assert layout["duration"] == END - Q
    assert rows(layout) == [
        (0, "queue", "queued for a worker", "started", S - Q),
        (0, "step", "model step 0", "done", 40_000),
        (0, "client", "client__web__highlight_row", "done", RESULT - COMMIT),
        (1, "approval", "approval", "allowed", ALLOW - COMMIT),
        (1, "ack", "waits for the ack", "acked", ACK - ALLOW),
        (1, "client", "runs on the client", "ended", RESULT - ACK),
        (1, "input", "input: a form", "accept", ANSWERED - ASKED),
        (0, "step", "model step 1 (retry 1)", "done", 25_000),
    ]
    by_label = {r["label"]: r for r in layout["rows"]}
    # A step is placed by its commit on the log's clock, less its step_ms (not by the worker's clock).
    assert by_label["model step 0"]["offset"] == pytest.approx((COMMIT - 40_000 - Q) / (END - Q))
    assert by_label["client__web__highlight_row"]["width"] == pytest.approx((RESULT - COMMIT) / (END - Q))
    assert by_label["waits for the ack"]["detail"] == "web"
    assert by_label["model step 1 (retry 1)"]["detail"] == "1,200 tokens in (1,000 cached), 3 out"
    assert by_label["model step 0"]["detail"] == ""
    assert by_label["input: a form"]["detail"] == "How much?"


def test_an_open_run_shows_the_step_its_model_is_on_and_what_its_call_waits_for() -> None:
    # The call's client has acked; the call is still running: its bar reaches now.
    now = RESULT - 1_000
    waiting = drawn(CALLED[:-3], now_us=now)
    assert waiting["open"]
    assert waiting["end"] == int(BASE.timestamp() * 1_000_000) + now
    assert rows(waiting)[2:] == [
        (0, "client", "client__web__highlight_row", "acked", now - COMMIT),
        (1, "approval", "approval", "allowed", ALLOW - COMMIT),
        (1, "ack", "waits for the ack", "acked", ACK - ALLOW),
        (1, "client", "runs on the client", "waiting", now - ACK),
    ]
    assert [r["open"] for r in waiting["rows"]][2:] == [True, False, False, True]
    # Its result came: the model is on the next step since then.
    later = RESULT + 5_000_000
    thinking = drawn(CALLED, now_us=later)
    assert rows(thinking)[-1] == (0, "step", "model step 1", "running", later - RESULT)


def test_a_failed_step_a_client_that_left_and_a_failed_call_are_shown() -> None:
    events = [
        at(Q, "run_queued", run_id=RUN),
        at(S, "run_started", run_id=RUN),
        at(COMMIT, "tool_call", call_id=CALL, name="client__web__highlight_row", arguments={}),
        step(COMMIT, 0, 40),
        at(COMMIT, "client_tool_dispatched", client_id="c-web", call_id=CALL, tool="highlight_row", arguments={}),
        at(
            ACK,
            "client_tool_waiting",
            call_id=CALL,
            tool="highlight_row",
            client_name="web",
            since=stamp(ACK - 500),
            deadline=stamp(10**9),
            run_id=RUN,
        ),
        at(ASKED, "client_tool_failed", client_id="c-web", call_id=CALL, reason="client_gone"),
        at(ASKED, "tool_result", call_id=CALL, content=[], is_error=True),
        at(RESULT, "run_failed", run_id=RUN, error="the model answered 500"),
    ]
    layout = drawn(events)
    assert rows(layout)[2:] == [
        (0, "client", "client__web__highlight_row", "failed: client_gone", ASKED - COMMIT),
        (1, "ack", "waits for the ack", "its client left", ACK - COMMIT),
        (1, "client_wait", "waits for a client web", "failed: client_gone", ASKED - (ACK - 500)),
        # The next step never committed: it took from the failed result to the run's end.
        (0, "step", "model step 1", "failed", RESULT - ASKED),
    ]


def test_server_and_mcp_calls_and_calls_no_run_made() -> None:
    events = [
        at(S, "run_started", run_id=RUN),
        at(COMMIT, "tool_call", call_id="s1", name="get_time", arguments={}),
        at(COMMIT, "tool_call", call_id="m1", name="mcp__docs__search", arguments={}),
        # An MCP client's own call of the session is no run's.
        at(COMMIT, "client_tool_dispatched", client_id="c", call_id="x1", tool="t", arguments={}, **{"from": "mcp"}),
        at(ACK, "tool_result", call_id="s1", content=[], is_error=False),
        at(ASKED, "tool_result", call_id="m1", content=[], is_error=True),
        at(END, "run_cancelled", run_id=RUN),
    ]
    assert rows(drawn(events)) == [
        (0, "server", "get_time", "done", ACK - COMMIT),
        (0, "mcp", "mcp__docs__search", "error", ASKED - COMMIT),
        (0, "step", "model step 0", "cancelled", END - ASKED),
    ]


def test_times_parse_to_the_microsecond_and_read_as_durations() -> None:
    seen = node(
        """
        console.log(JSON.stringify({
          parsed: [tl.parseTime("2026-12-06T15:16:58.140480Z"), tl.parseTime("2026-12-06T15:16:58Z"),
            tl.parseTime("2026-12-06T15:16:58.1Z"), tl.parseTime("yesterday"), tl.parseTime(42), tl.parseTime(null)],
          durations: [400, 12_400, 1_250_000, 125_000_000, 3 * 3600e6 + 120e6, 2 * 86400e6 + 3 * 3600e6, -5]
            .map(tl.durationText),
        }));
        """
    )
    second = int(datetime(2026, 12, 6, 15, 16, 58, tzinfo=UTC).timestamp()) * 1_000_000
    assert seen["parsed"] == [second + 140_480, second, second + 100_000, None, None, None]
    assert seen["durations"] == ["0.4 ms", "12 ms", "1.25 s", "2 min 5 s", "3 h 2 min", "2 d 3 h", "0 ms"]


BAD_IDS = [
    TRACE.upper(),
    TRACE[:-1],
    TRACE + "0",
    "0" * 32,
    "4bf92f3577b34da6a3ce929d0e0e473g",
    '"><img src=x onerror=alert(1)>',
    "../../admin",
    4,
    None,
]


def test_a_trace_link_needs_a_checked_id_and_an_http_template() -> None:
    links = node(
        f"""
        const bad = {json.dumps(BAD_IDS)}.map((id) => tl.traceLink({json.dumps(TEMPLATE)}, id));
        const templates = [null, "", "http://jaeger/search", "javascript:alert('{{trace_id}}')",
          "data:text/html,{{trace_id}}", "https://tempo.example/explore?trace={{trace_id}}&x={{trace_id}}"]
          .map((template) => tl.traceLink(template, {json.dumps(TRACE)}));
        const good = tl.traceLink({json.dumps(TEMPLATE)}, {json.dumps(TRACE)});
        console.log(JSON.stringify({{ good, bad, templates }}));
        """
    )
    assert links["good"] == TEMPLATE.replace("{trace_id}", TRACE)
    assert links["bad"] == [None] * len(BAD_IDS)
    assert links["templates"] == [
        None,
        None,
        None,
        None,
        None,
        f"https://tempo.example/explore?trace={TRACE}&x={TRACE}",
    ]


def test_the_run_takes_the_first_valid_trace_id_of_its_events() -> None:
    events = [
        at(Q, "run_queued", run_id=RUN, trace_id="not-an-id"),
        at(S, "run_started", run_id=RUN, trace_id=TRACE),
        at(END, "run_completed", run_id=RUN, trace_id="f" * 32),
    ]
    assert node(f"console.log(JSON.stringify(tl.runsOf({json.dumps(events)})[0].traceId));") == TRACE
    assert node(f"console.log(JSON.stringify(tl.runsOf({json.dumps(events[:1])})[0].traceId));") is None


def test_the_waterfall_draws_event_text_as_text_and_links_the_trace() -> None:
    hostile = '<img src=x onerror="alert(1)">'
    events = [
        *CALLED[:10],
        at(
            ASKED,
            "input_requested",
            request_id="r1",
            call_id=CALL,
            client_id="c-web",
            tool="highlight_row",
            key="r1",
            message=hostile,
            source="client",
        ),
        at(END, "run_failed", run_id=RUN, error=hostile),
    ]
    seen = node(
        f"""
        const [run] = tl.runsOf({json.dumps(events)});
        const draw = (template) => view.waterfall(run, {{ el, now: run.end, template }});
        const linked = draw({json.dumps(TEMPLATE)});
        const bare = draw(null);
        // Every child is an element made by `el` or a string (a text node in the page): no markup is parsed.
        const strings = (node) => typeof node === "string" ? [node] : node.children.flatMap(strings);
        const kinds = (node) => typeof node === "string" ? [] : [node.tag, ...node.children.flatMap(kinds)];
        console.log(JSON.stringify({{
          links: all(linked, "a").map((a) => [a.props.href, a.props.target, a.props.rel, text(a)]),
          none: all(bare, "a").length, strings: strings(linked), tags: [...new Set(kinds(linked))].sort(),
          bars: all(linked, "span").filter((s) => s.props.class === "tl-bar").map((s) => s.props.style),
          rows: all(linked, "div").filter((d) => d.props["data-kind"]).map((d) => d.props["data-kind"]),
        }}));
        """
    )
    assert seen["links"] == [[TEMPLATE.replace("{trace_id}", TRACE), "_blank", "noopener noreferrer", "trace"]]
    assert seen["none"] == 0
    assert hostile in seen["strings"]
    assert f" {hostile}" in seen["strings"]  # the input request's message beside its row's label
    assert seen["tags"] == ["a", "b", "code", "div", "span"]
    assert seen["rows"] == ["queue", "step", "client", "approval", "ack", "client", "input"]
    assert all(style.startswith("left: ") and "; width: " in style for style in seen["bars"])


def test_the_panel_follows_the_newest_run_keeps_a_chosen_one_and_forgets_on_reset() -> None:
    other = "01a24bed-ffff-7002-b87f-41a4355cf9c0"
    events = [*COMPLETED, at(END + 10, "run_queued", run_id=other), at(END + 20, "run_started", run_id=other)]
    seen = node(
        f"""
        const boxes = {{ timeline: {{ children: [], replaceChildren(...nodes) {{ this.children = nodes; }} }} }};
        const $ = (id) => boxes[id];
        const frames = [];
        const ticks = [];
        const panel = view.mountTimeline({{ $, el, template: () => null, schedule: (draw) => frames.push(draw),
          now: () => {int(BASE.timestamp() * 1_000_000) + END + 1_000}, every: (tick) => ticks.push(tick) }});
        const draw = () => {{ while (frames.length) frames.shift()(); }};
        const shown = () => all(boxes.timeline.children[1], "div").find((d) => d.props["data-run"])?.props["data-run"];
        const buttons = () => all(boxes.timeline.children[0], "button");
        for (const event of {json.dumps(events)}) panel.see(event);
        const coalesced = frames.length;
        draw();
        const first = [shown(), buttons().map((b) => [b.props["data-run"], text(b), b.props.class])];
        // The open run shown is drawn again as time passes, a frame at a time; an ended one is not.
        ticks[0](); ticks[0]();
        const ticking = frames.length;
        draw();
        buttons()[1].props.onclick();
        const chosen = shown();
        const head = text(all(boxes.timeline.children[1], "div").find((d) => d.props.class === "tl-head"));
        ticks[0]();
        const again = frames.length;
        panel.reset();
        draw();
        const empty = text(boxes.timeline.children[0]);
        console.log(JSON.stringify({{ coalesced, first, ticking, chosen, head, again, empty }}));
        """
    )
    assert seen["coalesced"] == 1
    assert seen["first"] == [
        other,
        [[other, f"…{other[-6:]} running", "plain chosen"], [RUN, f"…{RUN[-6:]} completed", "plain"]],
    ]
    assert seen["ticking"] == 1
    assert seen["chosen"] == RUN
    assert seen["head"].endswith("completed 9.23 s · 10 tokens in, 3 out")
    assert seen["again"] == 0
    assert seen["empty"] == "No runs yet."


def test_an_event_handed_again_is_folded_once_and_an_open_row_reaches_the_latest_event() -> None:
    numbered = [{**event, "seq": seq} for seq, event in enumerate(CALLED[:-3], start=1)]
    # A reconnected stream hands the call's events again; the page's clock lags the log's by a minute.
    events = [*numbered, *numbered[4:]]
    lagging = int(BASE.timestamp() * 1_000_000) + ACK - 60_000_000
    seen = node(
        f"""
        const boxes = {{ timeline: {{ children: [], replaceChildren(...nodes) {{ this.children = nodes; }} }} }};
        const panel = view.mountTimeline({{ $: (id) => boxes[id], el, template: () => null, schedule: (draw) => draw(),
          now: () => {lagging}, every: () => {{}} }});
        for (const event of {json.dumps(events)}) panel.see(event);
        const rows = all(boxes.timeline.children[1], "div").filter((d) => d.props["data-kind"]);
        console.log(JSON.stringify({{ kinds: rows.map((r) => r.props["data-kind"]),
          times: rows.map((r) => text(all(r, "span").find((s) => s.props.class === "tl-time"))) }}));
        """
    )
    assert seen["kinds"] == ["queue", "step", "client", "approval", "ack", "client"]
    # The open call and its run on the client are drawn to the ack, the latest event, not to the page's clock.
    assert seen["times"][2] == node(f"console.log(JSON.stringify(tl.durationText({ACK - COMMIT})))") + "…"
    assert seen["times"][5] == "0 ms…"
