"""Where an MCP caller's input requests hold beyond one process and one transport: a `requestState`
opens in any API process sharing `SWITCHBOARD_SECRET_KEY` (and in no other), and an older caller on a
transport with a way back is asked in band."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx2
import mcp.types as mt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import SecretStr, ValidationError
from starlette.types import Receive, Scope, Send

from api.mcp.context import SCOPE_KEY
from api.mcp.sealing import RequestStates, Sealed, arguments_digest
from api.mcp.tools import call_tool, list_tools
from api.metrics import Metrics
from api.settings import ApiSettings
from api.state import AppState
from api.stream_caps import StreamCaps
from broker import Broker
from common.settings import ProcessSettings
from switchboard.settings import Settings
from tests.api.test_input_requests import ask, read
from tests.api.test_mcp_inputs import CALLED, NAME_FORM, Person, Roots, acked, caller, first_round, until_answered
from tests.api.test_session_mcp import LOOKUP, text
from tests.api_client import Api, Session, running_api
from tests.stack import serve_asgi

pytestmark = pytest.mark.both_redis


def test_a_state_sealed_by_one_process_opens_in_another_with_the_same_secret_only() -> None:
    secret = SecretStr("s" * 40)
    sealed = Sealed("sess", "mcp_1", 7, CALLED, arguments_digest({"word": "w"}), ("r1", "r2"))
    token = RequestStates(secret).seal(sealed)
    assert RequestStates(secret).open(token) == sealed
    assert RequestStates(SecretStr("t" * 40)).open(token) is None
    # Unset, each process makes up its own key.
    assert RequestStates(None).open(RequestStates(None).seal(sealed)) is None


def test_a_short_secret_key_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValidationError) as refused:
        ProcessSettings(secret_key=SecretStr("short"))
    assert "secret_key" in str(refused.value)
    assert "at least 32 characters" in str(refused.value)


@contextlib.asynccontextmanager
async def with_a_way_back(api: Api, session: Session) -> AsyncIterator[str]:
    """The session's MCP server, its own handlers, on the package's stateful transport (one with a way back
    for the requests a server sends), on a port of its own and sharing only Redis with the stack: what an
    older caller needs to be asked in band. Its URL."""
    broker = cast("Broker[ApiSettings]", api.stack.broker)
    hub = broker.live_hub(keepalive_s=15)
    await hub.start()
    state = AppState(broker, hub, Metrics(), StreamCaps(0, 0), RequestStates(None))
    server: Server[Any] = Server("switchboard", on_list_tools=list_tools)
    # As api/mcp/server.py registers it (a tools/call may answer with a task's shape).
    server.add_request_handler("tools/call", mt.CallToolRequestParams, call_tool)
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    manager = StreamableHTTPSessionManager(server, stateless=False, security_settings=security)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        scope[SCOPE_KEY] = (state, session.id, session.token)
        await manager.handle_request(scope, receive, send)

    try:
        async with manager.run(), serve_asgi(app) as url:
            yield f"{url}/mcp"
    finally:
        await hub.stop()


async def test_an_older_caller_with_a_way_back_is_asked_in_band(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    person = Person(mt.ElicitResult(action="accept", content={"name": "Old"}), mt.ElicitResult(action="decline"))
    async with with_a_way_back(api, session) as url, httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(url, http_client=http)
        roots = Roots()
        async with Client(
            transport, cache=None, mode="legacy", elicitation_callback=person, list_roots_callback=roots
        ) as client:
            assert client.protocol_version != "2026-07-28"
            calling = asyncio.create_task(client.call_tool(CALLED, {"word": "old"}))
            call_id = await acked(api, session, web["id"])
            form = await ask(api, session, web["id"], call_id, {"message": "Name?", "schema": NAME_FORM})
            assert (await until_answered(api, session, form.json()["request_id"]))["content"] == {"name": "Old"}
            page = await ask(api, session, web["id"], call_id, {"message": "Sign in", "url": "https://a.example/"})
            request_id = page.json()["request_id"]
            assert (await until_answered(api, session, request_id))["action"] == "decline"
            listed = await ask(api, session, web["id"], call_id, {"method": "roots/list"})
            assert listed.status_code == 201, listed.text
            assert (await until_answered(api, session, listed.json()["request_id"]))["content"] == roots.listed
            await api.call(session, web["id"], call_id, "result", text="hello Old")
            result = await asyncio.wait_for(calling, 10)
    assert text(result) == "hello Old"
    assert isinstance(person.seen[0], mt.ElicitRequestFormParams)
    assert person.seen[0].requested_schema == NAME_FORM
    (seen_page,) = person.seen[1:]
    assert isinstance(seen_page, mt.ElicitRequestURLParams)
    # 2025-11-25 names a URL-mode elicitation: the request's id.
    assert (seen_page.url, seen_page.elicitation_id) == ("https://a.example/", request_id)


async def test_a_retry_verifies_in_another_api_process_sharing_the_secret(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    shared: dict[str, object] = {"secret_key": SecretStr("shared-" * 8)}
    async with (
        running_api(settings, redis_url, api_key, shared, worker=False) as first,
        running_api(settings, redis_url, api_key, shared, worker=False) as second,
        running_api(settings, redis_url, api_key, {"secret_key": SecretStr("other-" * 8)}, worker=False) as third,
    ):
        session = await first.session()
        web = await first.register(session, tools=[LOOKUP])
        async with caller(first, session, elicitation_callback=Person()) as client:
            call_id, request_id, required = await first_round(first, session, client, web)
        alice: mt.InputResponses = {"user": mt.ElicitResult(action="accept", content={"name": "Alice"})}
        assert required.request_state is not None
        async with caller(third, session) as elsewhere:
            with pytest.raises(MCPError):
                await elsewhere.session.call_tool(
                    CALLED, {"word": "w"}, input_responses=alice, request_state=required.request_state
                )
        assert (await read(first, session, request_id)).json()["state"] == "open"
        async with caller(second, session) as client:
            retrying = asyncio.create_task(
                client.session.call_tool(
                    CALLED, {"word": "w"}, input_responses=alice, request_state=required.request_state
                )
            )
            assert (await until_answered(second, session, request_id))["content"] == {"name": "Alice"}
            await first.call(session, web["id"], call_id, "result", text="hello Alice")
            done = await asyncio.wait_for(retrying, 10)
    assert isinstance(done, mt.CallToolResult)
    assert text(done) == "hello Alice"
