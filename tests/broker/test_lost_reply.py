"""A script whose reply is lost (the connection drops after Redis ran it) is never sent again: the caller
gets an error, and the effect happened once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from broker import Broker
from broker.errors import BrokerUnavailable
from broker.services.clients import Receipt
from common.codec import uuid7
from switchboard.settings import Settings
from tests.helpers import HIGHLIGHT, call, commit, make_session, start_run, types
from tests.stack import opened_broker

WEB = "0190f2a0-0000-7000-8000-00000000000a"


class ReplyDropper:
    """A TCP proxy in front of Redis that, once armed, drops the next reply coming back from Redis and
    closes the client's connection: the command ran, its caller never hears so."""

    def __init__(self, port: int) -> None:
        self._port = port
        self.armed = False
        self.dropped = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for handler in self._handlers:
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        handler = asyncio.current_task()
        assert handler is not None
        self._handlers.add(handler)
        server_in, server_out = await asyncio.open_connection("127.0.0.1", self._port)
        try:
            await self._pipe(client_in, client_out, server_in, server_out)
        finally:
            for writer in (client_out, server_out):
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            self._handlers.discard(handler)

    async def _pipe(
        self,
        client_in: asyncio.StreamReader,
        client_out: asyncio.StreamWriter,
        server_in: asyncio.StreamReader,
        server_out: asyncio.StreamWriter,
    ) -> None:
        async def upstream() -> None:
            while data := await client_in.read(65536):
                server_out.write(data)
                await server_out.drain()

        async def downstream() -> None:
            while data := await server_in.read(65536):
                if self.armed:
                    self.armed = False
                    self.dropped += 1
                    return
                client_out.write(data)
                await client_out.drain()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
async def proxied(settings: Settings, redis_url: str) -> AsyncIterator[tuple[Broker, ReplyDropper, Broker]]:
    """A broker through the proxy, the proxy, and a broker straight to Redis to look with."""
    proxy = ReplyDropper(int(redis_url.rsplit(":", 1)[1].split("/")[0]))
    port = await proxy.start()
    try:
        async with (
            opened_broker(settings, f"redis://127.0.0.1:{port}/0") as through,
            opened_broker(settings, redis_url) as direct,
        ):
            yield through, proxy, direct
    finally:
        await proxy.stop()


async def test_input_whose_reply_was_lost_is_appended_once(proxied: tuple[Broker, ReplyDropper, Broker]) -> None:
    through, proxy, direct = proxied
    session_id = await make_session(through)
    proxy.armed = True
    with pytest.raises(BrokerUnavailable):
        await through.runs.submit(session_id, uuid7(), uuid7(), "hello", "client")
    assert proxy.dropped == 1
    assert (await types(direct, session_id)).count("message_user") == 1
    # The connection that lost its reply is not handed out again: the next call works (and steers the
    # run the first one started).
    assert (await through.runs.submit(session_id, uuid7(), uuid7(), "again", "client")).outcome == "steered"


async def test_a_result_whose_reply_was_lost_is_recorded_once_and_its_retry_replays(
    proxied: tuple[Broker, ReplyDropper, Broker],
) -> None:
    through, proxy, direct = proxied
    session_id = await make_session(direct)
    await direct.clients.register(session_id, WEB, "web", None, [HIGHLIGHT])
    run = await start_run(direct, session_id)
    pending = call("client__web__highlight_row")
    assert (await commit(direct, session_id, run, [pending])).outcome == "waiting"
    receipt = Receipt(direct.core.keys.session(session_id).idempotency("lost-reply"), "fingerprint", 60_000)
    proxy.armed = True
    with pytest.raises(BrokerUnavailable):
        await through.clients.answer(session_id, WEB, pending.call_id, "done", is_error=False, receipt=receipt)
    # The client retries with the same Idempotency-Key, as the SDKs do after a 5xx: the receipt answers.
    await through.clients.answer(session_id, WEB, pending.call_id, "done", is_error=False, receipt=receipt)
    assert (await types(direct, session_id)).count("tool_result") == 1
