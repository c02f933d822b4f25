"""A running Switchboard inside the test's event loop: uvicorn serving the app, and an arq worker."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import os
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from starlette.types import ASGIApp

from api.app import create_app
from api.server import uvicorn_options
from broker import Broker
from broker.transport.aio import command
from broker.transport.commands import Commands
from broker.transport.embedded import EmbeddedRedis, free_port
from common.addresses import Resolver
from common.tracing import Tracing
from switchboard.settings import Settings
from tests.resolver import Names
from workers.worker import serve as serve_worker


@contextlib.contextmanager
def started_redis(data_dir: Path, *, notifications: bool = True, binary: str | None = None) -> Iterator[str]:
    """A private server (`binary`, else the one `switchboard up` would run) for the duration of the block;
    its URL."""
    server = EmbeddedRedis(data_dir, persistent=False, notifications=notifications, binary=binary)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@functools.cache
def _default_tls() -> ssl.SSLContext:
    # What httpx verifies with by default, made once: each client made its own, reading the CA bundle
    # (25 ms), and tests make hundreds.
    return httpx.create_ssl_context()


# Under uvicorn's keep-alive timeout (5 s, its default, which the API keeps).
KEEPALIVE_S = 2.0


@dataclass
class Stack:
    url: str
    api_key: str
    settings: Settings
    broker: Broker[Settings]

    def client(self, token: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {token or self.api_key}"}
        # A kept-alive connection is let go well before uvicorn closes it (5 s idle): at httpx's own 5 s the
        # two race, and a request sent as the server closes fails with a ReadError (seen under CI's load).
        limits = httpx.Limits(keepalive_expiry=KEEPALIVE_S)
        return httpx.AsyncClient(base_url=self.url, headers=headers, timeout=10, verify=_default_tls(), limits=limits)


@contextlib.asynccontextmanager
async def serve_api(
    settings: Settings, redis_url: str, resolver: Resolver | None = None, tracing: Tracing | None = None
) -> AsyncIterator[str]:
    # The options `switchboard api` serves with: the same header deadline and the same proxies believed.
    app = create_app(settings, redis_url, resolver=resolver or Names(), tracing=tracing)
    async with serve_asgi(app, **uvicorn_options(settings)) as url:
        yield url


class _InLoopServer(uvicorn.Server):
    """uvicorn for a server inside a test's loop, stopped as soon as it is told. uvicorn's main loop looks
    at `should_exit` every 0.1 s and its shutdown sleeps 0.1 s for connections to notice theirs; with an API
    (and often a fake provider) started per test, that was 0.2 s of every such test and about a tenth of
    CI. The same steps, in uvicorn's order, polled finely: stop listening, ask each connection to close,
    wait for connections and their tasks (as long as uvicorn would), then the lifespan's shutdown."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._told = asyncio.Event()

    def stop(self) -> None:
        self.should_exit = True
        self._told.set()

    async def main_loop(self) -> None:
        await self._told.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        grace = self.config.timeout_graceful_shutdown
        try:
            async with asyncio.timeout(grace):
                while (self.server_state.connections or self.server_state.tasks) and not self.force_exit:
                    await asyncio.sleep(0.002)
                for server in self.servers:
                    await server.wait_closed()
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
            # A connection whose handler never answered is left open by the cancel (uvicorn closes a
            # connection only once its response is complete): closed here, or its socket would be
            # collected in a later test as an unclosed transport (a ResourceWarning, an error there).
            for connection in list(self.server_state.connections):
                connection.transport.close()
        if not self.force_exit:
            await self.lifespan.shutdown()


@contextlib.asynccontextmanager
async def serve_asgi(app: ASGIApp, port: int | None = None, **options: Any) -> AsyncIterator[str]:
    """Any ASGI app on a free local port (or `port`, for an app that must know its address before it
    listens), in this loop, for the length of the block (`options`: more uvicorn settings)."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **options)
    server = _InLoopServer(config)
    # uvicorn installs signal handlers only for its own process; under the test runner it must not.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        await task


@contextlib.asynccontextmanager
async def run_worker(
    settings: Settings, redis_url: str, resolver: Resolver | None = None, tracing: Tracing | None = None
) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve_worker(settings, redis_url, stop=stop, resolver=resolver or Names(), tracing=tracing)
    )
    await asyncio.sleep(0)
    try:
        yield
    finally:
        stop.set()
        await task


# Under the per-test timeout (60 s): a test still running then had something wait forever, and the
# timeout's thread dump shows only the event loop's select. The tasks' own stacks say what waited.
HANG_REPORT_S = 45.0


@contextlib.contextmanager
def hang_report(delay_s: float = HANG_REPORT_S) -> Iterator[None]:
    """Print every task's stack to the real stderr (output capture dies with a timed-out run) if the
    block is still running after `delay_s`."""
    loop = asyncio.get_running_loop()

    def report() -> None:
        text = io.StringIO()
        print(f"\n--- still running after {delay_s:g} s; the event loop's tasks:", file=text)
        for task in asyncio.all_tasks(loop):
            task.print_stack(file=text)
        # Under pytest-xdist a worker's stderr goes nowhere: SWITCHBOARD_HANG_LOG names a file too.
        named = os.environ.get("SWITCHBOARD_HANG_LOG")
        if named:
            with open(named, "a", encoding="utf-8") as log:
                log.write(text.getvalue())
        if sys.__stderr__ is not None:
            sys.__stderr__.write(text.getvalue())
            sys.__stderr__.flush()

    handle = loop.call_later(delay_s, report)
    try:
        yield
    finally:
        handle.cancel()


@contextlib.asynccontextmanager
async def running_stack(
    settings: Settings,
    redis_url: str,
    *,
    worker: bool = True,
    resolver: Resolver | None = None,
    tracing: tuple[Tracing, Tracing] | None = None,
) -> AsyncIterator[Stack]:
    """The API and (unless `worker` is False) a worker; provider host names are resolved by `resolver`,
    by default a table of the tests' own (tests/resolver.py), never by a DNS server. `tracing`: the API's
    and the worker's (else as the environment says)."""
    api_tracing, worker_tracing = tracing or (None, None)
    assert settings.bootstrap_api_key is not None
    key = settings.bootstrap_api_key.get_secret_value()
    with hang_report():
        async with (
            opened_broker(settings, redis_url) as broker,
            serve_api(settings, redis_url, resolver, api_tracing) as url,
        ):
            if worker:
                async with run_worker(settings, redis_url, resolver, worker_tracing):
                    yield Stack(url, key, settings, broker)
            else:
                yield Stack(url, key, settings, broker)


@contextlib.asynccontextmanager
async def opened_broker(settings: Settings, redis_url: str) -> AsyncIterator[Broker[Settings]]:
    """A broker for the test's own pokes at Redis; the test's keys go with it."""
    broker = await Broker.connect(settings, redis_url)
    try:
        yield broker
    finally:
        await drop_prefix(broker, settings.key_prefix)
        await broker.close()


async def drop_prefix(broker: Broker, prefix: str) -> None:
    """Remove one test's keys, on every master of a Cluster (SCAN is fine here: this is teardown, not a
    request path)."""
    one_slot = broker.core.slots is None
    for client in broker.core.connected.masters():
        try:
            await _drop_on(client, broker.core.redis, prefix, one_slot=one_slot)
        except RedisConnectionError:
            # A node a fault test killed: its keys went with it.
            if one_slot:
                raise


async def _drop_on(node: Redis, routed: Commands, prefix: str, *, one_slot: bool) -> None:
    cursor = 0
    while True:
        cursor, keys = await command(node, "SCAN", cursor, "MATCH", f"{prefix}:*", "COUNT", 1000)
        if keys and one_slot:
            await command(node, "UNLINK", *keys)
        elif keys:
            # The keys a Cluster node holds sit in many slots (some maybe moved since): one UNLINK each,
            # routed by key.
            async with routed.pipeline() as pipe:
                for key in keys:
                    pipe.unlink(key.decode())
                await pipe.execute()
        if int(cursor) == 0:
            return
