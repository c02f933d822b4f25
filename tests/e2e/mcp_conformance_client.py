"""The client the official MCP conformance suite runs in client mode (`conformance client --command ...`):
Switchboard itself, reached over its HTTP API, as an agent's `mcp` grant to the suite's scenario server.

    python tests/e2e/mcp_conformance_client.py <scenario server URL>

The suite appends the URL and sets MCP_CONFORMANCE_SCENARIO and MCP_CONFORMANCE_CONTEXT (JSON: the tool
calls some scenarios want made, the client credentials a pre-registration hands out). The running
Switchboard is named by SWITCHBOARD_CONFORMANCE_API (its URL) and SWITCHBOARD_CONFORMANCE_KEY (an API key
that makes agents and sessions). The command makes an agent of the scripted model whose one grant, `suite`,
points at the URL (an OAuth grant for an `auth/*` scenario), opens a session, and sends the `/call` lines
of the scenario's tools (json-schema-2020-12-preservation's agent has a local model that reads the tools it
is handed instead: `Reader`). It plays the person: it opens each `mcp_authorization_required` link as a browser
would, following the authorization server's redirects to Switchboard's callback, and answers the grant's
input requests (a form filled with a plain value of each field's type). After a sign-in, a run that ended
without the tool's result is asked again (a step that goes on without the grant's tools, as one that
parks until the callback, both end in the result). Exit 0 once every call's result came back without an
error; 1 otherwise, saying why on stderr."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

GRANT = "suite"
# Rounds of input: the first, and again after each sign-in (a scenario may ask more than once).
ROUNDS = 3
# One run, a sign-in within it included. The suite's time for a whole scenario (SCENARIO_TIMEOUT_MS in the
# test) is the bound that matters; this one only says which run it was that did not end. A loaded machine
# (two cores, forty scenarios side by side) has taken 30 s for one.
RUN_TIMEOUT_S = 80.0
ENDS = ("run_completed", "run_failed", "run_cancelled")

# The tools each scenario's server offers and the arguments a call of them needs, where the suite's
# context does not name them (http-custom-headers does: its `toolCalls`). An `auth/*` scenario's server
# offers `test-tool`; request-metadata's offers none (its checks are on the requests of any step).
CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "tools_call": [("add_numbers", {"a": 2, "b": 3})],
    "request-metadata": [],
    "http-standard-headers": [("test_headers", {}), ("my-hyphenated-tool", {})],
    "http-invalid-tool-headers": [("valid_tool", {"region": "us-east1"})],
    "json-schema-ref-no-deref": [("lookup_user", {"id": "user-1"})],
    "sep-2322-client-request-state": [
        ("test_mrtr_echo_state", {}),
        ("test_mrtr_no_state", {}),
        ("test_mrtr_unrelated", {}),
        ("test_mrtr_no_result_type", {}),
    ],
}
AUTH_CALLS: list[tuple[str, dict[str, Any]]] = [("test-tool", {})]


# Scenarios whose call is made of what the model was handed: the tool to call with the `schema` of the other
# tool as its argument (json-schema-2020-12-preservation checks what of a tool's inputSchema reached the
# model). A model that reads its request does that (`Reader`); the scripted one never sees a schema.
ECHOES = {"json-schema-2020-12-preservation": ("json_schema_echo", "json_schema_2020_12_tool")}


class Reader:
    """An Anthropic Messages model that calls `echo` with the input schema it was handed for `focal`, then
    answers in words once the result is in."""

    def __init__(self, echo: str, focal: str) -> None:
        self.echo = f"mcp__{GRANT}__{echo}"
        self.focal = f"mcp__{GRANT}__{focal}"

    async def answer(self, request: Request) -> Response:
        from tests.fakes import Reply, anthropic_stream, event_stream

        sent = await request.json()
        tools = {tool["name"]: tool for tool in sent.get("tools", [])}
        answered = any(
            isinstance(message.get("content"), list)
            and any(block.get("type") == "tool_result" for block in message["content"])
            for message in sent.get("messages", [])
        )
        if answered or self.focal not in tools:
            return event_stream(Reply(frames=anthropic_stream({"type": "text", "text": "done"})))
        call = {
            "type": "tool_use",
            "id": "toolu_1",
            "name": self.echo,
            "input": {"schema": tools[self.focal]["input_schema"]},
        }
        return event_stream(Reply(frames=anthropic_stream(call, stop="tool_use")))


@contextlib.asynccontextmanager
async def model(api: httpx.AsyncClient, scenario: str) -> AsyncIterator[tuple[dict[str, Any], list[str]]]:
    """The agent version's provider and model for `scenario`, and the tools its run must get results of."""
    if scenario not in ECHOES:
        providers = (await api.get("/v1/model-providers")).json()["items"]
        scripted = next(p["id"] for p in providers if p["display_name"] == "Scripted")
        config = {"format": "openai_responses", "model": "scripted", "max_tokens": 1024, "context_window": 8192}
        yield {"model_provider_id": scripted, "model": config}, []
        return
    # Imported only here: the stack's modules would add a second to every scenario's start.
    from starlette.applications import Starlette
    from starlette.routing import Route

    from tests.stack import serve_asgi

    reader = Reader(*ECHOES[scenario])
    async with serve_asgi(Starlette(routes=[Route("/v1/messages", reader.answer, methods=["POST"])])) as served:
        body = {"api_key": "unused", "base_url": served, "display_name": "reader", "format": "anthropic"}
        provider = await api.post("/v1/model-providers", json=body)
        provider.raise_for_status()
        config = {"format": "anthropic", "model": "reader", "max_tokens": 1024}
        yield {"model_provider_id": provider.json()["id"], "model": config}, [reader.echo]


def say(message: str) -> None:
    sys.stderr.write(f"mcp_conformance_client: {message}\n")
    sys.stderr.flush()


def planned(scenario: str, context: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    named = context.get("toolCalls")
    if isinstance(named, list):
        # A null argument is left out, as a model leaves out what it has no value for: the step holds a
        # call's arguments to the tool's schema, where null is no boolean (and the suite's check is of a
        # parameter "null or not provided" alike).
        return [
            (str(call["name"]), {k: v for k, v in (call.get("arguments") or {}).items() if v is not None})
            for call in named
        ]
    if scenario.startswith("auth/"):
        return AUTH_CALLS
    return CALLS.get(scenario, [])


def grant(url: str, scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"name": GRANT, "url": url, "default_policy": "allow", "timeout_s": 20}
    if scenario.startswith("auth/"):
        auth: dict[str, Any] = {"type": "oauth"}
        for field in ("client_id", "client_secret"):
            if isinstance(context.get(field), str):
                auth[field] = context[field]
        body["auth"] = auth
    return body


def filled(schema: dict[str, Any]) -> dict[str, Any]:
    """A form answered as a person who accepts would: a plain value of each field's type."""
    content: dict[str, Any] = {}
    for name, field in (schema.get("properties") or {}).items():
        kind = field.get("type")
        if "enum" in field:
            content[name] = field["enum"][0]
        elif kind == "boolean":
            content[name] = True
        elif kind in ("number", "integer"):
            content[name] = 1
        else:
            content[name] = "yes"
    return content


class Person:
    """The session as its person follows it: the events since the last look, links opened, forms filled."""

    def __init__(self, api: httpx.AsyncClient, session_id: str, token: str) -> None:
        self.api = api
        self.session_id = session_id
        self.token = token
        self.after: int | None = None
        self.signed_in = 0

    async def events(self) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"order": "asc", "limit": 200, "include": "extensions"}
        if self.after is not None:
            params["after_seq"] = self.after
        page = await self.api.get(f"/v1/sessions/{self.session_id}/events", params=params)
        page.raise_for_status()
        items: list[dict[str, Any]] = page.json()["items"]
        if items:
            self.after = items[-1]["seq"]
        return items

    async def sign_in(self, url: str) -> None:
        # The authorization server signs the person in at once and redirects to Switchboard's callback.
        async with httpx.AsyncClient(follow_redirects=True, timeout=15) as browser:
            page = await browser.get(url)
        say(f"the sign-in ended at {page.url.path} with {page.status_code}")
        self.signed_in += 1

    async def answer(self, asked: dict[str, Any]) -> None:
        path = f"/v1/sessions/{self.session_id}/input-requests/{asked['request_id']}"
        body: dict[str, Any] = {"action": "accept"}
        if "schema" in asked:
            body["content"] = filled(asked["schema"])
        headers = {"Authorization": f"Bearer {self.token}"}
        answered = await self.api.post(path, json=body, headers=headers)
        say(f"answered the input request {asked.get('key')!r}: {answered.status_code}")

    async def run(self, text: str) -> list[dict[str, Any]]:
        """Send `text` and follow the session until its run ends: that run's events."""
        headers = {"Authorization": f"Bearer {self.token}"}
        sent = await self.api.post(
            f"/v1/sessions/{self.session_id}/events", json={"type": "input", "text": text}, headers=headers
        )
        sent.raise_for_status()
        run_id = sent.json()["run_id"]
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(RUN_TIMEOUT_S):
            while True:
                for event in await self.events():
                    seen.append(event)
                    if event["type"] == "mcp_authorization_required":
                        await self.sign_in(event["authorization_url"])
                    elif event["type"] == "input_requested" and event.get("source") == "mcp":
                        await self.answer(event)
                    elif event["type"] in ENDS and event.get("run_id") == run_id:
                        return [e for e in seen if e.get("run_id") in (run_id, None)]
                await asyncio.sleep(0.05)


def results(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each call's result, by the model-visible tool name."""
    names = {e["call_id"]: e["name"] for e in events if e["type"] == "tool_call"}
    return {names[e["call_id"]]: e for e in events if e["type"] == "tool_result" and e["call_id"] in names}


async def main(url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    key = os.environ["SWITCHBOARD_CONFORMANCE_KEY"]
    base = os.environ["SWITCHBOARD_CONFORMANCE_API"]
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(base_url=base, headers=headers, timeout=15) as api,
        model(api, scenario) as (version, read),
    ):
        return await drive(api, url, scenario, context, version, read)


async def drive(
    api: httpx.AsyncClient,
    url: str,
    scenario: str,
    context: dict[str, Any],
    version: dict[str, Any],
    read: list[str],
) -> int:
    """An agent of `version` with the grant, a session of it, and its runs until the calls' results are in
    (those the input asks for, and those the model makes of what it `read`)."""
    agent = await api.post("/v1/agents", json={"name": f"conformance {scenario}"[:100]})
    agent.raise_for_status()
    published = await api.post(
        f"/v1/agents/{agent.json()['id']}/versions", json={**version, "mcp": [grant(url, scenario, context)]}
    )
    if published.status_code != 201:
        say(f"the agent was refused: {published.text}")
        return 1
    created = await api.post("/v1/sessions", json={"agent_id": agent.json()["id"]})
    created.raise_for_status()
    person = Person(api, created.json()["id"], created.json()["session_token"])
    calls = planned(scenario, context)
    visible = [f"mcp__{GRANT}__{name}" for name, _ in calls]
    text = "\n".join(f"/call {name} {json.dumps(args)}" for name, (_, args) in zip(visible, calls, strict=True))
    for _ in range(ROUNDS):
        signed_in = person.signed_in
        events = await person.run(text or "hello")
        got = results(events)
        missing = [name for name in visible + read if name not in got or got[name]["is_error"]]
        if not missing:
            say(f"every call answered: {sorted(got)}")
            return 0
        why = {name: got[name]["content"] for name in missing if name in got}
        say(f"no good result of {missing}: {json.dumps(why)[:2000]}")
        if person.signed_in == signed_in:
            return 1
    return 1


if __name__ == "__main__":
    # The repository's packages (tests.fakes, for a model that reads its request) from its root.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    if len(sys.argv) != 2:
        say("usage: mcp_conformance_client.py <server URL>")
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1])))
