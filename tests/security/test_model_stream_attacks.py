"""A hostile model server (a compromised provider endpoint, a self-hosted one) streams far more than any
bound: each bound, in each provider format, ends the run with run_failed naming the limit and its
setting, without a retry, and the worker hangs up long before the server is done sending
(docs/security.md, "A model's stream is bounded")."""

from __future__ import annotations

import asyncio
import importlib
import tracemalloc
from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest
from pydantic import SecretStr

from bench.hostile_model_server import (
    FORMATS,
    MODELS,
    STREAMS,
    Attack,
    Format,
    HostileServer,
    Sent,
    ended_with,
    held_lines,
    hostile_server,
    junk,
    one_endless_event,
)
from broker.services.providers import OPENAI_PROVIDER_ID
from switchboard.settings import Settings
from tests.api.test_providers import provider_session, text_of
from tests.api_client import Api, Event, Session, of_type, run_over, running_api
from tests.fakes import FakeProvider, Reply, fake_provider, openai_message_as_sent
from workers.models.base import StreamLimits
from workers.models.bounds import size_text

# The fake listens on 127.0.0.1, a loopback address: allowed here only.
pytestmark = pytest.mark.private_providers

# Small bounds, so each attack passes one within a few hundred kilobytes of a stream of tens of megabytes.
LIMITS = StreamLimits(text_bytes=65_536, argument_bytes=16_384, fragments=500, calls=8)
BOUNDED = {
    "model_max_text_bytes": LIMITS.text_bytes,
    "model_max_argument_bytes": LIMITS.argument_bytes,
    "model_max_fragments": LIMITS.fragments,
    "model_max_calls": LIMITS.calls,
}
TEXT = "the model's stream passed 64 KiB of text and reasoning in one step (SWITCHBOARD_MODEL_MAX_TEXT_BYTES)"
ARGUMENTS = "the model's stream passed 16 KiB of arguments in one tool call (SWITCHBOARD_MODEL_MAX_ARGUMENT_BYTES)"
FRAGMENTS = "the model's stream passed 500 fragments in one step (SWITCHBOARD_MODEL_MAX_FRAGMENTS)"
CALLS = "the model's stream passed 8 tool calls in one step (SWITCHBOARD_MODEL_MAX_CALLS)"
KIB_PIECE = "a" * 1_024


@pytest.fixture
async def server() -> AsyncIterator[HostileServer]:
    async with hostile_server() as hostile:
        yield hostile


# The tests' one-second step lease, on a machine loaded enough, can lapse while the attack is read, and
# the step is then taken over and tried afresh: a retry these tests would see. Nothing here needs it short.
LEASE = {"step_lease_s": 10.0}


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with fake_provider() as provider:
        yield provider


@pytest.fixture
async def bounded(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    async with running_api(settings, redis_url, api_key, {**BOUNDED, **LEASE}) as api:
        yield api


@pytest.fixture
async def defaults(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    async with running_api(settings, redis_url, api_key, dict(LEASE)) as api:
        yield api


async def hostile_session(api: Api, server: HostileServer, provider_format: Format) -> Session:
    body = {"api_key": "test-key", "base_url": server.base_url(provider_format), "display_name": "hostile"}
    created = await api.key.post("/v1/model-providers", json={**body, "format": provider_format})
    assert created.status_code == 201, created.text
    return await agent_session(api, created.json()["id"], MODELS[provider_format])


async def agent_session(api: Api, provider_id: str, model: dict[str, Any]) -> Session:
    agent = (await api.key.post("/v1/agents", json={"name": "hostile"})).json()
    version = {"model_provider_id": provider_id, "model": model}
    answer = await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)
    assert answer.status_code == 201, answer.text
    session = await api.session(agent["id"])
    await api.register(session)
    return session


def size(events: Iterable[bytes]) -> int:
    return sum(len(event) for event in events)


async def hung_up(sent: Sent) -> Sent:
    """The answer once the server knows how it ended (it learns of a hang-up on its next write)."""
    async with asyncio.timeout(10):
        while not (sent.cut or sent.finished):
            await asyncio.sleep(0.02)
    return sent


async def failed_with(api: Api, session: Session, server: HostileServer) -> tuple[str, list[Event]]:
    await api.send(session, "go")
    events = await api.wait_for(session, run_over, timeout=30)
    (failed,) = of_type(events, "run_failed")
    return failed["error"], events


async def assert_cut_short(api: Api, session: Session, server: HostileServer, whole: int, error: str) -> None:
    """The run failed with `error`, kept nothing of the answer, was not tried again, and hung up before
    a quarter of the answer's `whole` bytes were sent (the rest of what went out sat in socket buffers)."""
    found, events = await failed_with(api, session, server)
    assert found == error
    assert not of_type(events, "message_assistant")
    assert not of_type(events, "tool_call")
    (sent,) = server.sent
    await hung_up(sent)
    assert sent.cut
    assert not sent.finished
    assert sent.bytes < whole / 4, (sent.bytes, whole)


# What each bound is passed by: the fragments' kind, the piece each carries, how many (Gemini sends a
# call whole, so its arguments bound is passed by one call of 40 pieces, and its calls bound by one chunk
# of 1,000 calls), and the message.
ATTACKS = {
    "text": ("text", KIB_PIECE, 50_000, TEXT),
    "reasoning": ("reasoning", KIB_PIECE, 50_000, TEXT),
    "arguments": ("arguments", KIB_PIECE, 50_000, ARGUMENTS),
    "fragments": ("arguments", "a", 200_000, FRAGMENTS),
    "calls": ("calls", "", 50_000, CALLS),
}


@pytest.mark.parametrize("bound", list(ATTACKS))
@pytest.mark.parametrize("provider_format", FORMATS)
async def test_each_bound_stops_the_run_naming_it_and_the_stream_is_not_read_past_it(
    bounded: Api, server: HostileServer, provider_format: Format, bound: str
) -> None:
    kind, piece, count, error = ATTACKS[bound]
    if provider_format == "gemini" and bound == "arguments":
        count = 40
    if provider_format == "gemini" and bound == "calls":
        count = 1_000
    if provider_format == "gemini" and bound == "fragments":
        kind = "text"
    stream = STREAMS[provider_format]
    server.attacks = [Attack(lambda: stream(kind, piece, count))]
    session = await hostile_session(bounded, server, provider_format)
    await assert_cut_short(bounded, session, server, size(stream(kind, piece, count)), error)


@pytest.mark.parametrize("provider_format", FORMATS)
async def test_one_endless_event_is_not_read_whole(
    bounded: Api, server: HostileServer, provider_format: Format
) -> None:
    whole = 50 * 2**20
    server.attacks = [Attack(lambda: one_endless_event(provider_format, whole))]
    session = await hostile_session(bounded, server, provider_format)
    error = (
        f"the model's stream sent an event of more than {size_text(LIMITS.event_bytes)} (twice"
        " SWITCHBOARD_MODEL_MAX_ARGUMENT_BYTES, and 64 KiB)"
    )
    assert error.startswith("the model's stream sent an event of more than 96 KiB")
    await assert_cut_short(bounded, session, server, whole, error + SENT_BACK.get(provider_format, ""))


# The Responses API sends back the request's tools and instructions and what it streamed: its bounds are
# widened by those (and say so), never by what the server chooses.
SENT_BACK = {
    "openai_responses": ", beyond what the server sends back of the request's tools and instructions and of"
    " the step's stream"
}


@pytest.mark.parametrize("end", [b"\n\r\n", b"\r\r\n", b"\n\r"])
async def test_line_ends_one_sdk_reads_as_no_end_of_an_event_are_no_end_to_the_bound(
    bounded: Api, server: HostileServer, end: bytes
) -> None:
    # Anthropic's SDK ends an event only where what it holds ends with LF LF, CR CR or CRLF CRLF: with
    # events of 1 KiB ended by `end` it reads on and holds the whole stream, copying it at every line
    # (8 MB of them took it 26 s of CPU). Those bytes are one event to the bound too.
    whole = size(ended_with(STREAMS["anthropic"]("text", KIB_PIECE, 50_000), end))
    server.attacks = [Attack(lambda: ended_with(STREAMS["anthropic"]("text", KIB_PIECE, 50_000), end))]
    session = await hostile_session(bounded, server, "anthropic")
    error = (
        f"the model's stream sent an event of more than {size_text(LIMITS.event_bytes)} (twice"
        " SWITCHBOARD_MODEL_MAX_ARGUMENT_BYTES, and 64 KiB)"
    )
    await assert_cut_short(bounded, session, server, whole, error)


async def test_lines_the_gemini_sdk_holds_across_events_are_bounded_at_what_holding_them_costs(
    bounded: Api, server: HostileServer
) -> None:
    # google-genai holds a line that is neither blank nor `data: ` until its braces balance, across blank
    # lines: `{a` and a blank line, repeated, are 4-byte events to the event bound and one buffer there,
    # each line a str of its own.
    whole = 50 * 2**20
    server.attacks = [Attack(lambda: held_lines(whole))]
    session = await hostile_session(bounded, server, "gemini")
    error = (
        f"the model's stream sent more than {size_text(LIMITS.event_bytes)} of lines outside its events, which"
        " the SDK holds across them (the event bound: twice SWITCHBOARD_MODEL_MAX_ARGUMENT_BYTES, and 64 KiB)"
    )
    # The worker imports google-genai at its first Gemini step (tens of megabytes): imported first, so the
    # peak below is the attack's.
    importlib.import_module("workers.models.gemini")
    tracemalloc.start()
    try:
        await assert_cut_short(bounded, session, server, whole, error)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The peak of all this process allocated meanwhile (the API, the worker, this test, the server). Were
    # only the wire bound to stop them, the SDK would hold many times what it lets through (this test saw
    # 19.6 MB without the bound); it holds the event bound of them at most, beside the chunk it splits.
    assert peak < 4 * LIMITS.response_bytes, peak


@pytest.mark.parametrize("provider_format", FORMATS)
async def test_events_that_carry_nothing_are_bounded_on_the_wire(
    bounded: Api, server: HostileServer, provider_format: Format
) -> None:
    # 10 KiB events (under the event bound) with no text and no call, 100 MB of them: the Anthropic SDK
    # drops events with no name before the adapter sees them; the others are fragments, but the wire
    # bound comes first.
    server.attacks = [Attack(lambda: junk(provider_format, 10_240, 10_000))]
    session = await hostile_session(bounded, server, provider_format)
    error = (
        f"the model's stream passed {size_text(LIMITS.response_bytes)} on the wire in one step (four times"
        " SWITCHBOARD_MODEL_MAX_TEXT_BYTES and the event bound, and 1 KiB for each of"
        " SWITCHBOARD_MODEL_MAX_FRAGMENTS)"
    )
    assert error.startswith("the model's stream passed 1.1 MiB on the wire")
    error += SENT_BACK.get(provider_format, "")
    await assert_cut_short(bounded, session, server, size(junk(provider_format, 10_240, 10_000)), error)


@pytest.mark.parametrize("provider_format", FORMATS)
async def test_a_compressed_answer_is_refused_before_it_is_inflated(
    bounded: Api, server: HostileServer, provider_format: Format
) -> None:
    stream = STREAMS[provider_format]
    server.attacks = [Attack(lambda: stream("text", KIB_PIECE, 20_000), gzipped=True)]
    session = await hostile_session(bounded, server, provider_format)
    error, _ = await failed_with(bounded, session, server)
    assert error == (
        "the model provider compressed its answer (gzip) though the worker asked for none: a compressed"
        " stream cannot be bounded as it arrives"
    )
    assert server.headers[0]["accept-encoding"] == "identity"
    assert len(server.sent) == 1


async def test_the_platform_providers_stream_is_bounded_too(
    settings: Settings, redis_url: str, api_key: str, server: HostileServer
) -> None:
    # The deployment's own provider is reached without the address check, through the SDK's own kind of
    # client: its responses are counted all the same.
    update = {
        **BOUNDED,
        **LEASE,
        "provider_allow_private": False,
        "bootstrap_api_key": SecretStr(api_key),
        "openai_api_key": SecretStr("sk-platform"),
        "openai_base_url": server.base_url("openai_responses"),
    }
    whole = 50 * 2**20
    server.attacks = [Attack(lambda: one_endless_event("openai_responses", whole))]
    async with running_api(settings, redis_url, api_key, update) as api:
        async with asyncio.timeout(10):
            while OPENAI_PROVIDER_ID not in {
                p["id"] for p in (await api.key.get("/v1/model-providers")).json()["items"]
            }:
                await asyncio.sleep(0.05)
        session = await agent_session(api, OPENAI_PROVIDER_ID, MODELS["openai_responses"])
        error = f"the model's stream sent an event of more than {size_text(LIMITS.event_bytes)}"
        found, _ = await failed_with(api, session, server)
        assert found.startswith(error)
    assert server.sent[0].cut


async def test_at_the_default_bounds_a_200_mb_text_stream_stops_at_8_mib(defaults: Api, server: HostileServer) -> None:
    pieces = 51_200
    server.attacks = [Attack(lambda: STREAMS["openai_chat"]("text", "a" * 4_096, pieces))]
    session = await hostile_session(defaults, server, "openai_chat")
    error = "the model's stream passed 8 MiB of text and reasoning in one step (SWITCHBOARD_MODEL_MAX_TEXT_BYTES)"
    whole = size(STREAMS["openai_chat"]("text", "a" * 4_096, pieces))
    await assert_cut_short(defaults, session, server, whole, error)


async def test_at_the_default_bounds_one_chunk_of_thousands_of_calls_stops_at_128(
    defaults: Api, server: HostileServer
) -> None:
    # Gemini sends each call whole, and one chunk (within the event bound) may carry tens of thousands
    # of them, each a few bytes toward the step's arguments: every one would have been a call record,
    # a dispatch and an event, written by one script while Redis waits.
    calls = 25_000
    server.attacks = [Attack(lambda: STREAMS["gemini"]("calls", "", calls))]
    session = await hostile_session(defaults, server, "gemini")
    error = "the model's stream passed 128 tool calls in one step (SWITCHBOARD_MODEL_MAX_CALLS)"
    assert StreamLimits().calls == 128
    await assert_cut_short(defaults, session, server, size(STREAMS["gemini"]("calls", "", calls)), error)


def catalogue(count: int, size: int) -> list[dict[str, Any]]:
    """`count` tools of about `size` bytes each: a description, and a schema whose parameter holds the rest."""
    words = "Find the rows whose value lies within the range given, in the order <asked> & sorted. " * (size // 90)
    return [
        {
            "name": f"tool_{number}",
            "description": words[:4_000],
            "parameters": {"type": "object", "properties": {"value": {"type": "string", "description": words[4_000:]}}},
        }
        for number in range(count)
    ]


async def echoed_answer(api: Api, fake: FakeProvider, tools: list[dict[str, Any]], system: str, text: str) -> Event:
    """A Responses step whose server sends back its `tools` and `system` prompt in three events and its
    `text` again in four (as OpenAI's does), to its end."""
    session = await provider_session(api, fake, MODELS["openai_responses"], system_prompt=system)
    for start in range(0, len(tools), 60):
        await api.register(session, name=f"c{start}", tools=tools[start : start + 60])
    fake.replies = [Reply(frames=openai_message_as_sent(text), echo=True)]
    await api.send(session, "go")
    events = await api.wait_for(session, run_over, timeout=30)
    assert not of_type(events, "run_failed"), [failed["error"] for failed in of_type(events, "run_failed")]
    (answer,) = of_type(events, "message_assistant")
    (sent,) = fake.requests
    assert len(sent.get("tools", [])) == len(tools)
    return answer


async def test_a_tool_catalogue_and_instructions_the_responses_api_sends_back_are_not_refused(
    bounded: Api, fake: FakeProvider
) -> None:
    # 20 tools of 8 KB and 40 KB of instructions: response.created, .in_progress and .completed each
    # hold 200 KB, twice the event bound of these limits (96 KiB).
    answer = await echoed_answer(bounded, fake, catalogue(20, 8_000), "Be brief. " * 4_000, "fine")
    assert text_of(answer) == "fine"


async def test_an_answer_the_responses_api_sends_again_whole_is_not_refused(bounded: Api, fake: FakeProvider) -> None:
    # 60 KiB of text, under the text bound (64 KiB), written again whole in four events, each character
    # escaped (a quote, a line end): each event 120 KiB, past the event bound of these limits (96 KiB).
    text = '"\n' * 30_720
    answer = await echoed_answer(bounded, fake, [], "", text)
    assert text_of(answer) == text


async def test_at_the_default_bounds_a_catalogue_of_300_tools_of_8_kb_is_not_refused(
    defaults: Api, fake: FakeProvider
) -> None:
    # What the review found refused: response.created of 2.4 MB, its tools sent back.
    answer = await echoed_answer(defaults, fake, catalogue(300, 8_000), "", "fine")
    assert text_of(answer) == "fine"


async def test_a_hostile_server_with_a_large_catalogue_is_still_cut_at_what_the_request_sent(
    bounded: Api, server: HostileServer
) -> None:
    # The widened bound is the request's own tools, not what the server says: an endless event is cut
    # past them, long before its end.
    whole = 50 * 2**20
    server.attacks = [Attack(lambda: one_endless_event("openai_responses", whole))]
    session = await hostile_session(bounded, server, "openai_responses")
    await bounded.register(session, name="big", tools=catalogue(20, 8_000))
    error = f"the model's stream sent an event of more than {size_text(LIMITS.event_bytes)}"
    found, _ = await failed_with(bounded, session, server)
    assert found.startswith(error)
    assert found.endswith(SENT_BACK["openai_responses"])
    (sent,) = server.sent
    await hung_up(sent)
    assert sent.cut
    assert sent.bytes < 2 * 2**20, sent.bytes
