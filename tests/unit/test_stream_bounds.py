"""The bounds of a model's stream on their own: the settings that set them, how the tally counts, and the
wire guard's reading of where an SSE event ends (docs/security.md, "A model's stream is bounded")."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterable, Iterator

import httpx2
import pytest
from pydantic import ValidationError

from common.addresses import ProviderAddresses
from workers.models.base import StreamLimits
from workers.models.bounds import StreamBoundPassed, StreamBounds, Tally, json_bytes, size_text
from workers.models.wire import WireGuard, model_client
from workers.settings import WorkerSettings

SMALL = StreamLimits(text_bytes=64, argument_bytes=16, fragments=3)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model_max_text_bytes", 0),
        ("model_max_text_bytes", -1),
        ("model_max_text_bytes", 2**40),
        ("model_max_argument_bytes", 0),
        ("model_max_argument_bytes", 2**30),
        ("model_max_fragments", 0),
        ("model_max_fragments", 10**9),
        ("model_max_fragments", "many"),
        ("model_max_calls", 0),
        ("model_max_calls", 1_025),
    ],
)
def test_a_bound_that_is_not_positive_and_sane_stops_the_worker_naming_it(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as refused:
        WorkerSettings(**{field: value})  # type: ignore[arg-type]
    assert field in str(refused.value)


def test_the_defaults_are_the_documented_ones_and_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert StreamLimits.of(WorkerSettings()) == StreamLimits(8 * 2**20, 2**20, 20_000) == StreamLimits()
    monkeypatch.setenv("SWITCHBOARD_MODEL_MAX_FRAGMENTS", "500")
    assert StreamLimits.of(WorkerSettings()).fragments == 500
    assert StreamLimits().calls == 128
    monkeypatch.setenv("SWITCHBOARD_MODEL_MAX_CALLS", "16")
    assert StreamLimits.of(WorkerSettings()).calls == 16


def test_text_is_counted_in_utf8_bytes_and_reasoning_with_it() -> None:
    tally = Tally(SMALL)
    tally.text("é" * 20)  # 40 bytes
    tally.text("ü" * 12)  # 64 in all: at the bound, not past it
    with pytest.raises(StreamBoundPassed, match=r"passed 64 bytes of text and reasoning in one step"):
        tally.text("a")


def test_each_calls_arguments_and_all_of_them_together_are_bounded() -> None:
    tally = Tally(SMALL)
    with pytest.raises(StreamBoundPassed, match=r"passed 16 bytes of arguments in one tool call"):
        tally.arguments(0, "x" * 17)
    tally = Tally(SMALL)
    for place in range(4):
        tally.arguments(place, "x" * 16)
    with pytest.raises(StreamBoundPassed, match=r"passed 64 bytes of tool-call arguments in one step"):
        tally.arguments(4, "x")


def test_each_call_is_counted_as_it_appears_whatever_it_carries() -> None:
    tally = Tally(StreamLimits(text_bytes=64, argument_bytes=16, fragments=3, calls=2))
    tally.arguments(0, "")
    tally.arguments(0, "x")
    tally.arguments(1, "")
    tally.arguments(1, "y")
    with pytest.raises(StreamBoundPassed, match=r"passed 2 tool calls in one step \(SWITCHBOARD_MODEL_MAX_CALLS\)"):
        tally.arguments(2, "")


def test_fragments_of_any_kind_are_counted() -> None:
    tally = Tally(SMALL)
    assert [tally.fragment() for _ in range(3)] == [1, 2, 3]
    with pytest.raises(StreamBoundPassed, match=r"passed 3 fragments in one step \(SWITCHBOARD_MODEL_MAX_FRAGMENTS\)"):
        tally.fragment()


def test_what_a_server_sends_back_widens_the_wire_bounds_by_what_the_worker_holds() -> None:
    plain = Tally(WIRE)
    plain.text("x" * 1_000)
    assert plain.event_bytes == WIRE.event_bytes
    echoing = Tally(WIRE, echoed=5_000, repeats=True)
    assert echoing.event_bytes == WIRE.event_bytes + 5_000
    echoing.text("x" * 1_000)
    echoing.arguments(0, "y" * 500)
    assert echoing.event_bytes == WIRE.event_bytes + 5_000 + 3_000
    echoing.event(echoing.event_bytes)
    with pytest.raises(StreamBoundPassed, match=r"an event of more than 66 KiB .*, beyond what the server sends back"):
        echoing.event(echoing.event_bytes + 1)
    echoing.received(WIRE.response_bytes + 4 * 5_000 + 8 * 1_500)
    with pytest.raises(StreamBoundPassed, match=r"passed 380 KiB on the wire .*, beyond what the server sends back"):
        echoing.received(1)


@pytest.mark.parametrize("value", ["plain", "é ü ß", "日本語", "🙂", "<b>&amp;</b>", '\x01\t"', [{"a": "é<"}, 1]])
def test_json_bytes_is_at_least_any_servers_writing(value: object) -> None:
    ascii_only = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    go_style = ascii_only.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    assert json_bytes(value) >= max(len(ascii_only), len(go_style), len(json.dumps(value, ensure_ascii=False).encode()))


def test_sizes_read_as_a_person_writes_them() -> None:
    assert [size_text(n) for n in (8 * 2**20, 3 * 2**19, 98_304, 1_000)] == [
        "8 MiB",
        "1.5 MiB",
        "96 KiB",
        "1,000 bytes",
    ]


# On the wire: events of at most 66 KiB, 380 KiB in all.
WIRE = StreamLimits(text_bytes=4_096, argument_bytes=1_024, fragments=100)


def served(chunks: Iterable[bytes], headers: dict[str, str] | None = None) -> httpx2.AsyncClient:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream", **(headers or {})}, content=body())

    return httpx2.AsyncClient(transport=WireGuard(httpx2.MockTransport(answer)))


async def read(client: httpx2.AsyncClient) -> int:
    """What a model attempt at the WIRE limits reads of the client's one answer."""
    received = 0
    endpoint = "http://model.test/v1/chat/completions"
    async with StreamBounds(WIRE), client, client.stream("POST", endpoint) as response:
        async for chunk in response.aiter_bytes():
            received += len(chunk)
    return received


@pytest.mark.parametrize("end", [b"\n\n", b"\r\n\r\n", b"\r\r"])
async def test_many_events_each_under_the_bound_pass_however_the_chunks_cut_them(end: bytes) -> None:
    # Each event all but at the bound, five of them (far past it together), in chunks a little shorter
    # than an event, so the blank lines fall cut in two and anywhere in a chunk: no event is past it.
    near = WIRE.event_bytes - len(b"data: ") - len(end)
    event = b"data: " + b"x" * near + end
    stream = event * 5
    size = len(event) - len(end) // 2 - 1
    chunks = [stream[start : start + size] for start in range(0, len(stream), size)]
    assert await read(served(chunks)) == len(stream)
    with pytest.raises(StreamBoundPassed, match=r"an event of more than 66 KiB"):
        await read(served([b"data: " + b"x" * (near + 1) + end]))


async def test_one_endless_event_is_not_read_on() -> None:
    fed: list[int] = []

    def chunks() -> Iterator[bytes]:
        yield b"data: {"
        for number in range(1_000):
            fed.append(number)
            yield b"a" * 4_096

    with pytest.raises(StreamBoundPassed, match=r"an event of more than 66 KiB"):
        await read(served(chunks()))
    assert len(fed) < 20


async def test_answers_are_bounded_in_all_and_bedrocks_binary_framing_there_only() -> None:
    framing = {"content-type": "application/vnd.amazon.eventstream"}
    under = [b"\x00" * 4_096] * (WIRE.response_bytes // 4_096)
    assert await read(served(under, framing)) == sum(map(len, under))
    with pytest.raises(StreamBoundPassed, match=r"passed 380 KiB on the wire in one step"):
        await read(served([*under, b"\x00" * 4_096], framing))
    small = [b"data: x\n\n" * 512] * (WIRE.response_bytes // 4_608 + 1)
    with pytest.raises(StreamBoundPassed, match=r"passed 380 KiB on the wire in one step"):
        await read(served(small))


@contextlib.asynccontextmanager
async def answering(answer: bytes) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A server on 127.0.0.1 that answers every request with `answer` and keeps each request's head."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(answer)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", heads


EVENTS = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 9\r\n\r\ndata: x\n\n"
PINNED = ProviderAddresses(allow_private=True, timeout_s=5)


@pytest.mark.parametrize("addresses", [None, PINNED], ids=["platform", "pinned"])
async def test_what_the_worker_asks_for_and_a_compressed_answer(addresses: ProviderAddresses | None) -> None:
    brotli = b"HTTP/1.1 200 OK\r\ncontent-encoding: br\r\ncontent-length: 3\r\n\r\n..."
    async with answering(brotli) as (url, heads):
        client = model_client(url, addresses, 5)
        with pytest.raises(StreamBoundPassed, match=r"compressed its answer \(br\) though the worker asked for none"):
            async with StreamBounds(WIRE), client, client.stream("POST", f"{url}/v1/chat/completions"):
                pass
    assert [b"accept-encoding: identity" in head.lower() for head in heads] == [True]


@pytest.mark.parametrize("addresses", [None, PINNED], ids=["platform", "pinned"])
async def test_a_counted_answer_is_closed_with_the_attempt_and_keeps_what_httpx_says_of_it(
    addresses: ProviderAddresses | None,
) -> None:
    async with answering(EVENTS) as (url, _):
        async with model_client(url, addresses, 5) as client, StreamBounds(WIRE):
            response = await client.send(client.build_request("POST", f"{url}/v1/responses"), stream=True)
        # The attempt closed it on its way out, whatever its reader did.
        assert response.is_closed
        assert response.elapsed.total_seconds() > 0
        async with model_client(url, addresses, 5) as client:
            answer = await client.post(f"{url}/v1/responses")
        assert answer.content == b"data: x\n\n"
        assert answer.elapsed.total_seconds() > 0


async def test_the_platforms_client_goes_through_the_environments_proxy_for_its_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the SDKs' own clients did (a client given its transport reads no proxy of the environment).
    async with answering(EVENTS) as (proxy, heads):
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("NO_PROXY", "elsewhere.test")
        async with model_client("http://model.test/v1", None, 5) as client:
            assert (await client.post("http://model.test/v1/responses")).content == b"data: x\n\n"
        assert heads[0].startswith(b"POST http://model.test/v1/responses HTTP/1.1")
        monkeypatch.setenv("NO_PROXY", "model.test")
        async with model_client("http://model.test/v1", None, 5) as client:
            with pytest.raises(httpx2.ConnectError):
                await client.post("http://model.test/v1/responses")
        assert len(heads) == 1
