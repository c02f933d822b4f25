"""Connections that do not finish their request headers within SWITCHBOARD_HEADER_TIMEOUT_S are closed,
against a served API process (`switchboard api`) and the tests' in-process one alike; what comes after
the headers (a slow body, a long answer) is not under the deadline."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from switchboard.processes import Processes, server_env
from switchboard.settings import Settings
from tests.api_client import running_api

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

DEADLINE_S = 1.0
# Generous: the machine is shared, and a closed connection is seen on the next read.
CLOSED_WITHIN_S = DEADLINE_S + 1.5
DRIPPERS = 300


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[str]:
    env, _ = server_env(redis_url, header_timeout_s=str(DEADLINE_S), rate_limit_per_s="0")
    (tmp_path / "logs").mkdir()
    processes = Processes(env, tmp_path / "logs")
    try:
        _, url = processes.api()
        yield url
    finally:
        processes.stop_all()


@contextlib.asynccontextmanager
async def connection(url: str) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def drip(url: str, first: bytes = b"", every_s: float = 0.25, give_up_s: float = 10.0) -> float:
    """Send `first`, then a header line every `every_s`, never ending the headers: how long until the
    server closed the connection (`give_up_s` if it never did)."""
    loop = asyncio.get_running_loop()
    # Timed from before the connect: the server's deadline starts at its accept, which can come before
    # this loop, busy with 300 connects, gets back to a connection that is already open.
    started = loop.time()
    async with connection(url) as (reader, writer):
        writer.write(first + b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        line = 0
        while loop.time() - started < give_up_s:
            try:
                await writer.drain()
                if await asyncio.wait_for(reader.read(65_536), every_s) == b"":
                    return loop.time() - started
            except TimeoutError:
                line += 1
                writer.write(b"X-Slow-%d: %d\r\n" % (line, line))
            except OSError:
                return loop.time() - started
        return give_up_s


async def test_connections_that_drip_their_headers_are_closed_and_others_are_served(served: str) -> None:
    drippers = [asyncio.create_task(drip(served)) for _ in range(DRIPPERS)]
    await asyncio.sleep(DEADLINE_S / 2)
    # Served meanwhile, and at once.
    async with httpx.AsyncClient(base_url=served, timeout=5) as http:
        assert (await http.get("/healthz")).status_code == 200
    held = await asyncio.gather(*drippers)
    assert max(held) < CLOSED_WITHIN_S, sorted(held)[-5:]
    assert min(held) >= DEADLINE_S * 0.9


async def test_a_connection_that_sends_nothing_is_closed(served: str) -> None:
    loop = asyncio.get_running_loop()
    async with connection(served) as (reader, _):
        started = loop.time()
        assert await asyncio.wait_for(reader.read(), 10) == b""
        assert loop.time() - started < CLOSED_WITHIN_S


async def test_each_request_on_a_kept_alive_connection_has_the_deadline(served: str) -> None:
    async with connection(served) as (reader, writer):
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        # The second request starts at once, then drips.
        loop = asyncio.get_running_loop()
        started = loop.time()
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        closed = False
        while loop.time() - started < 10:
            try:
                await writer.drain()
                if await asyncio.wait_for(reader.read(65_536), 0.25) == b"":
                    closed = True
                    break
            except TimeoutError:
                writer.write(b"X-Slow: 1\r\n")
            except OSError:
                closed = True
                break
        assert closed
        assert loop.time() - started < CLOSED_WITHIN_S


async def test_a_slow_body_after_prompt_headers_is_not_cut_off(served: str) -> None:
    body = b'{"name": "slow"}'
    async with connection(served) as (reader, writer):
        writer.write(
            b"POST /v1/agents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer nobody\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        await writer.drain()
        await asyncio.sleep(DEADLINE_S * 1.5)
        writer.write(body)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    # Answered (401: the credential is no key), not closed.
    assert head.startswith(b"HTTP/1.1 401")


async def test_the_in_process_api_has_the_same_deadline(settings: Settings, redis_url: str, api_key: str) -> None:
    update: dict[str, object] = {"header_timeout_s": DEADLINE_S}
    async with running_api(settings, redis_url, api_key, update, worker=False) as api:
        held = await asyncio.gather(*(drip(api.stack.url) for _ in range(5)))
    assert max(held) < CLOSED_WITHIN_S
