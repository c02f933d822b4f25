"""An agent version's `mcp` grants: the worker connects to each server (the official `mcp` package on
both sides), offers its tools as `mcp__<grant>__<tool>`, and runs their calls as server calls."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from broker.transport.embedded import free_port
from switchboard.settings import Settings
from tests.api.test_ag_ui import _drive as ag_ui_drive
from tests.api.test_ag_ui import _user as ag_ui_user
from tests.api_client import Api, Event, Session, of_type, run_over, running_api, whole_log
from tests.helpers import SCRIPTED_CONFIG
from tests.mcp_servers import PDF, PIXEL, WAV, Seen, Transport, odd_app, serving
from tests.stack import serve_asgi
from workers.mcp import hub


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
async def kit_url(seen: Seen) -> AsyncIterator[str]:
    async with serving("http", seen) as url:
        yield url


@pytest.fixture
async def sse_url() -> AsyncIterator[str]:
    async with serving("sse") as url:
        yield url


@pytest.fixture
def settings(settings: Settings, kit_url: str, sse_url: str) -> Settings:
    # The test servers listen on 127.0.0.1, a loopback address: allowed here only. The kit comes first so
    # that it stops last: the worker, stopping, ends its MCP sessions, and the kit has none left to wait
    # for (it waited 10 s for the worker's open stream at every teardown).
    return settings.model_copy(update={"provider_allow_private": True})


def grant(url: str, name: str = "kit", policy: str = "allow", **extra: Any) -> dict[str, Any]:
    return {"name": name, "url": url, "default_policy": policy, **extra}


async def results(api: Api, session: Session, include: str = "") -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    extra = {"include": include} if include else {}
    return of_type(await whole_log(lambda params: api.key.get(path, params={**params, **extra})), "tool_result")


def in_call_order(events: list[Event]) -> list[Event]:
    """The tool results in the order of their calls (server calls run at once and end in any order)."""
    order = [e["call_id"] for e in of_type(events, "tool_call")]
    return sorted(of_type(events, "tool_result"), key=lambda r: order.index(r["call_id"]))


def texts(result: Event) -> list[str]:
    return [block["data"]["text"] for block in result["content"] if block["type"] == "text"]


async def answer(api: Api, session: Session, text: str, timeout: float = 15) -> list[Event]:
    """Send `text` and wait for its run to end: the events of that run."""
    run_id = (await api.send(session, text))["run_id"]
    events = await api.wait_for(
        session, lambda es: any(e.get("run_id") == run_id for e in es if run_over([e])), timeout
    )
    started = next(i for i, e in enumerate(events) if e.get("run_id") == run_id)
    return events[started:]


async def test_the_tools_are_offered_by_name_and_their_results_are_text_images_and_json(api: Api, kit_url: str) -> None:
    session = await api.session(mcp=[grant(kit_url)])
    events = await answer(api, session, '/call mcp__kit__add {"a": 2, "b": 3}\n/call mcp__kit__picture')
    assert of_type(events, "run_completed")
    add, picture = in_call_order(events)
    assert add["is_error"] is False
    assert texts(add) == ["5", '{"result":5}']
    assert texts(picture) == ["a red pixel", "[image/png, 1 KB]"]
    (full,) = [r for r in await results(api, session, "images") if r["call_id"] == picture["call_id"]]
    assert full["content"][1] == {"type": "image", "data": {"media_type": "image/png", "data": PIXEL}}
    (message,) = of_type(events, "message_assistant")[-1:]
    assert "mcp__kit__add: 5" in message["message"]["content"][0]["data"]["text"]


async def test_audio_resources_links_and_structured_content_come_through_a_grant(api: Api, kit_url: str) -> None:
    session = await api.session(mcp=[grant(kit_url)])
    events = await answer(api, session, "/call mcp__kit__rich")
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is False
    assert texts(result) == [
        "all kinds",
        "[audio: audio/wav, 1 KiB]",
        "[resource: mem://notes/1, text/plain]\nthe note",
        "[resource: file:///r.pdf, application/pdf, 1 KiB]",
        "[resource link: report <https://example.com/r>: It]",
        '{"kinds":5}',
    ]
    assert result["structured"] == {"kinds": 5}
    (full,) = [r for r in await results(api, session, "extensions") if r["call_id"] == result["call_id"]]
    assert [b["type"] for b in full["content"]] == ["text", "audio", "resource", "resource", "resource_link", "text"]
    assert full["content"][1]["data"] == {"media_type": "audio/wav", "data": WAV}
    assert full["content"][3]["data"] == {"uri": "file:///r.pdf", "media_type": "application/pdf", "blob": PDF}
    # The scripted model reads the result as a model does: what it cannot be shown named.
    (message,) = of_type(events, "message_assistant")[-1:]
    said = message["message"]["content"][0]["data"]["text"]
    assert "[audio: audio/wav, 1 KiB, not shown to this model]" in said
    assert "[resource: file:///r.pdf, application/pdf, 1 KiB, not shown to this model]" in said


async def test_the_ag_ui_door_shows_a_rich_result_as_the_text_naming_each_block(api: Api, kit_url: str) -> None:
    session = await api.session(mcp=[grant(kit_url)])
    (run,) = await ag_ui_drive(api, session, {"add": [ag_ui_user("/call mcp__kit__rich")]})
    assert run["error"] is None, run
    (result,) = [e for e in run["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"].splitlines() == [
        "all kinds",
        "[audio: audio/wav, 1 KiB]",
        "[resource: mem://notes/1, text/plain]",
        "the note",
        "[resource: file:///r.pdf, application/pdf, 1 KiB]",
        "[resource link: report <https://example.com/r>: It]",
        '{"kinds":5}',
    ]


async def test_a_failing_tool_is_an_error_result_and_the_run_goes_on(api: Api, kit_url: str) -> None:
    session = await api.session(mcp=[grant(kit_url)])
    events = await answer(api, session, "/call mcp__kit__fails")
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is True
    assert "the kit broke" in texts(result)[0]
    assert of_type(events, "run_completed")


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_both_transports(api: Api, transport: Transport, kit_url: str, sse_url: str) -> None:
    session = await api.session(mcp=[grant(kit_url if transport == "http" else sse_url)])
    events = await answer(api, session, '/call mcp__kit__add {"a": 1, "b": 1}')
    assert texts(of_type(events, "tool_result")[0])[0] == "2"


async def test_an_unreachable_server_leaves_its_tools_out_and_the_run_goes_on(api: Api, kit_url: str) -> None:
    down = f"http://127.0.0.1:{free_port()}/mcp"
    session = await api.session(mcp=[grant(down, "down"), grant(kit_url)])
    events = await answer(api, session, '/call mcp__down__add {"a": 1, "b": 1}\n/call mcp__kit__add {"a": 1, "b": 2}')
    missing, found = in_call_order(events)
    assert missing["is_error"] is True
    assert "no tool named mcp__down__add" in texts(missing)[0]
    assert texts(found)[0] == "3"
    assert of_type(events, "run_completed")
    assert not of_type(events, "run_failed")


async def test_policies_by_tool_then_the_grants_default(api: Api, kit_url: str, seen: Seen) -> None:
    rules = [{"name": "add", "policy": "allow"}, {"name": "fails", "policy": "deny"}]
    session = await api.session(mcp=[grant(kit_url, policy="require_approval", tools=rules)])
    await api.send(session, '/call mcp__kit__add {"a": 1, "b": 1}\n/call mcp__kit__fails\n/call mcp__kit__picture')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")), timeout=15)
    (asked,) = of_type(events, "approval_requested")
    assert (asked["server"], asked["tool"], asked["arguments"]) == ("kit", "picture", {})
    decided = await api.key.post(f"/v1/sessions/{session.id}/approvals/{asked['call_id']}", json={"decision": "allow"})
    assert decided.status_code == 200, decided.text
    events = await api.wait_for(session, run_over, timeout=15)
    added, denied, pictured = in_call_order(events)
    assert texts(added)[0] == "2"
    assert denied["is_error"] is True
    assert pictured["is_error"] is False
    assert "fails" not in seen.began


async def test_edited_arguments_are_held_to_the_tools_input_schema(api: Api, kit_url: str) -> None:
    session = await api.session(mcp=[grant(kit_url, policy="require_approval")])
    await api.send(session, '/call mcp__kit__add {"a": 1, "b": 1}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")), timeout=15)
    call_id = of_type(events, "approval_requested")[0]["call_id"]
    path = f"/v1/sessions/{session.id}/approvals/{call_id}"
    wrong = await api.key.post(path, json={"decision": "allow", "arguments": {"a": "one", "b": 1}})
    assert wrong.status_code == 400
    assert "do not match the schema of add" in wrong.json()["error"]["message"]
    right = await api.key.post(path, json={"decision": "allow", "arguments": {"a": 40, "b": 2}})
    assert right.status_code == 200, right.text
    events = await api.wait_for(session, run_over, timeout=15)
    assert texts(of_type(events, "tool_result")[0])[0] == "42"


async def test_progress_is_logged_for_readers_that_ask(api: Api, kit_url: str) -> None:
    session = await api.session(mcp=[grant(kit_url)])
    events = await answer(api, session, '/call mcp__kit__slow {"steps": 3}')
    assert texts(of_type(events, "tool_result")[0]) == ["3 steps done", '{"result":"3 steps done"}']
    assert not [e for e in events if e["type"] == "tool_progress"]
    path = f"/v1/sessions/{session.id}/events"
    logged = await whole_log(lambda params: api.key.get(path, params={**params, "include": "progress"}))
    progress = [e for e in logged if e["type"] == "tool_progress"]
    assert progress, [e["type"] for e in logged]
    assert {(e["server"], e["tool"]) for e in progress} == {("kit", "slow")}
    assert progress[0]["message"].startswith("step ")
    assert 0 < progress[0]["fraction"] <= 1


async def cancel_when(api: Api, session: Session, text: str, began: Callable[[], bool]) -> Event:
    """Send `text` (a call of a grant's tool that does not end), cancel the call once `began` says the
    server has it, and the call's result once the run is over."""
    await api.send(session, text)
    events = await api.wait_for(session, lambda es: bool(of_type(es, "tool_call")), timeout=15)
    call_id = of_type(events, "tool_call")[0]["call_id"]
    await settled_within(began)
    cancelled = await api.key.post(f"/v1/sessions/{session.id}/calls/{call_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    events = await api.wait_for(session, run_over, timeout=15)
    (result,) = of_type(events, "tool_result")
    return result


async def settled_within(done: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait up to `seconds` for `done` (the test's next assertion says whether it came)."""
    for _ in range(int(seconds / 0.05)):
        if done():
            return
        await asyncio.sleep(0.05)


async def test_a_cancelled_call_is_cancelled_at_the_server_too(api: Api, kit_url: str, seen: Seen) -> None:
    session = await api.session(mcp=[grant(kit_url)])
    result = await cancel_when(api, session, "/call mcp__kit__hangs", lambda: "hangs" in seen.began)
    assert result["is_error"] is True
    await settled_within(lambda: bool(seen.cancelled))
    assert seen.cancelled == ["hangs"]


async def test_a_grants_timeout_ends_a_call_that_hangs(api: Api, kit_url: str) -> None:
    session = await api.session(mcp=[grant(kit_url, timeout_s=1)])
    events = await answer(api, session, "/call mcp__kit__hangs")
    (result,) = of_type(events, "tool_result")
    assert result["is_error"] is True
    assert "did not finish within 1 s" in texts(result)[0]
    assert of_type(events, "run_completed")


async def test_a_changed_list_is_offered_at_the_next_step(api: Api, kit_url: str) -> None:
    session = await api.session(mcp=[grant(kit_url)])
    before = await answer(api, session, "/call mcp__kit__extra")
    assert "no tool named mcp__kit__extra" in texts(of_type(before, "tool_result")[0])[0]
    await answer(api, session, "/call mcp__kit__grow")
    after = await answer(api, session, "/call mcp__kit__extra")
    assert texts(of_type(after, "tool_result")[-1])[0] == "extra"


async def test_credentials_go_to_the_server_and_are_never_shown(api: Api, kit_url: str, seen: Seen) -> None:
    secret = grant(kit_url, bearer_token="tok-123", headers={"X-Team": "blue"})
    agent_id = await api.agent(mcp=[secret])
    session = await api.session(agent_id)
    await answer(api, session, '/call mcp__kit__add {"a": 1, "b": 1}')
    assert any(h.get("authorization") == "Bearer tok-123" and h.get("x-team") == "blue" for h in seen.headers)
    listed = (await api.key.get(f"/v1/agents/{agent_id}/versions")).json()["items"]
    (shown,) = listed[0]["config"]["mcp"]
    assert shown == {"name": "kit", "url": kit_url, "default_policy": "allow"}
    assert "tok-123" not in str(listed)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"url": "ftp://example.com/mcp"}, "mcp[0].url"),
        ({"url": "https://user:pw@example.com/mcp"}, "mcp[0].url"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": 2_592_001}, "mcp[0].timeout_s"),
        ({"headers": {"Host": "elsewhere"}}, "set by the MCP transport"),
        ({"headers": {"bad name": "x"}}, "not an HTTP header name"),
        ({"headers": {"X-A": "line\nbreak"}}, "no control character"),
        ({"headers": {f"X-{i}": "v" for i in range(17)}}, "at most 16 headers"),
        ({"bearer_token": "a b"}, "bearer_token"),
        ({"bearer_token": "t", "headers": {"Authorization": "Basic x"}}, "send one of the two"),
        ({"auth": {"type": "basic"}}, "mcp[0].auth.type"),
        ({"auth": {"type": "oauth", "scopes": ["a b"]}}, "mcp[0].auth.scopes[0]"),
        ({"auth": {"type": "oauth", "scopes": [f"s{i}" for i in range(33)]}}, "at most 32 items"),
        ({"auth": {"type": "oauth", "client_id": "x" * 513}}, "at most 512 characters"),
        ({"auth": {"type": "oauth", "client_secret": "s"}}, "client_secret without client_id"),
        ({"auth": {"type": "oauth", "client_id": "c", "client_secret": "x" * 4097}}, "at most 4096 characters"),
        ({"auth": {"type": "oauth", "extra": 1}}, "mcp[0].auth.extra"),
        ({"auth": {"type": "oauth"}, "bearer_token": "t"}, "the OAuth token is the authorization"),
        ({"auth": {"type": "oauth"}, "headers": {"authorization": "Basic x"}}, "the OAuth token is the authorization"),
    ],
)
async def test_bad_grants_are_refused_naming_the_field(api: Api, changes: dict[str, Any], named: str) -> None:
    agent = (await api.key.post("/v1/agents", json={"name": "bad"})).json()
    version = {"model_provider_id": await api.scripted_provider_id(), **SCRIPTED_CONFIG}
    version["mcp"] = [grant("https://mcp.example.com/mcp") | changes]
    refused = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)
    assert refused.status_code == 400, refused.text
    assert named in refused.text


OAUTH = {"type": "oauth", "scopes": ["read", "write"], "client_id": "switchboard-test", "client_secret": "cs-456"}


async def test_an_oauth_grant_is_refused_while_the_secret_key_is_unset(api: Api) -> None:
    agent = (await api.key.post("/v1/agents", json={"name": "oauth"})).json()
    version = {"model_provider_id": await api.scripted_provider_id(), **SCRIPTED_CONFIG}
    version["mcp"] = [grant("https://mcp.example.com/mcp", auth=OAUTH)]
    refused = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    assert message.startswith("mcp[0].auth: an OAuth grant needs SWITCHBOARD_SECRET_KEY set"), message


async def test_an_oauth_grants_client_secret_is_kept_and_never_shown(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    update: dict[str, object] = {"secret_key": SecretStr(secrets.token_urlsafe(32))}
    async with running_api(settings, redis_url, api_key, update, worker=False) as api:
        agent = (await api.key.post("/v1/agents", json={"name": "oauth"})).json()
        version = {"model_provider_id": await api.scripted_provider_id(), **SCRIPTED_CONFIG}
        version["mcp"] = [grant("https://mcp.example.com/mcp", auth=OAUTH)]
        published = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)
        assert published.status_code == 201, published.text
        listed = (await api.key.get(f"/v1/agents/{agent['id']}/versions")).json()["items"]
    (shown,) = listed[0]["config"]["mcp"]
    assert shown["auth"] == {"type": "oauth", "scopes": ["read", "write"], "client_id": "switchboard-test"}
    assert "cs-456" not in published.text + str(listed)


async def test_a_private_address_needs_the_setting(settings: Settings, redis_url: str, api_key: str) -> None:
    update: dict[str, object] = {"provider_allow_private": False}
    async with running_api(settings, redis_url, api_key, update, worker=False) as api:
        agent = (await api.key.post("/v1/agents", json={"name": "private"})).json()
        version = {"model_provider_id": await api.scripted_provider_id(), **SCRIPTED_CONFIG}
        version["mcp"] = [grant("http://10.0.0.7/mcp")]
        refused = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert message.startswith("mcp[0].url: 10.0.0.7, a private address; an MCP server on"), message
    assert "SWITCHBOARD_PROVIDER_ALLOW_PRIVATE=true" in message


async def test_tools_a_model_may_not_be_given_as_they_are_are_left_out_or_cut(api: Api) -> None:
    async with serve_asgi(odd_app()) as url:
        session = await api.session(mcp=[grant(f"{url}/mcp", "odd")])
        events = await answer(
            api,
            session,
            "/call mcp__odd__plain\n/call mcp__odd__fetches\n/call mcp__odd__too_big\n/call mcp__odd__wordy",
        )
    plain, fetches, too_big, wordy = in_call_order(events)
    assert texts(plain) == ["plain"]
    # A schema that refers to a URL is never fetched: the tool is not offered.
    assert "no tool named mcp__odd__fetches" in texts(fetches)[0]
    # An answer past what a worker reads is an error result, and the worker goes on.
    assert too_big["is_error"] is True
    assert texts(wordy) == ["wordy"]
    assert of_type(events, "run_completed")


async def _not_mcp(request: Request) -> Response:
    return PlainTextResponse("hello, this is not MCP")


async def _silent(request: Request) -> Response:
    # Past the connect timeout the test sets (1 s), and short enough for the server to stop after.
    await asyncio.sleep(3)
    return PlainTextResponse("too late")


@pytest.mark.parametrize("endpoint", [_not_mcp, _silent], ids=["garbage", "silent"])
async def test_a_server_that_answers_garbage_or_nothing_leaves_its_tools_out(
    api: Api, kit_url: str, endpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub, "CONNECT_TIMEOUT_S", 1.0)
    app = Starlette(routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])])
    async with serve_asgi(app) as url:
        session = await api.session(mcp=[grant(f"{url}/mcp", "odd"), grant(kit_url)])
        events = await answer(
            api, session, '/call mcp__odd__add {"a": 1, "b": 1}\n/call mcp__kit__add {"a": 1, "b": 1}'
        )
    missing, found = in_call_order(events)
    assert "no tool named mcp__odd__add" in texts(missing)[0]
    assert texts(found)[0] == "2"
    assert of_type(events, "run_completed")
