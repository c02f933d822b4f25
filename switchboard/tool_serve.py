"""`switchboard tools serve MODULE:OBJECT`: a Python tool server for trusted backends.

The supervisor registers one client (or joins an existing registration with `--client-id`), keeps a ttl
registration alive with pings at ttl/2, and runs N member processes (`switchboard tools member`), each a
member of the registration's pool (`switchboard.tool_member`). A member that dies is started again. On
SIGTERM or Ctrl-C the members drain (calls they acked are finished, calls they held unacked go to other
members), and a registration this server made is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import uuid
from dataclasses import dataclass

import httpx

from switchboard.tool_member import Target
from switchboard.typed_tools import TypedTool

logger = logging.getLogger("switchboard.tools")
TOKEN_ENV = "SWITCHBOARD_SESSION_TOKEN"  # noqa: S105 (the variable's name, not a secret)
_RESTART_DELAY_S = 1.0


@dataclass(frozen=True)
class ServeOptions:
    spec: str
    url: str
    session_id: str
    token: str
    name: str
    ttl_s: int | None
    client_id: str | None
    processes: int
    concurrency: int
    drain_s: float


class ServeError(Exception):
    """The server could not start: the message says why (a refused registration, a bad token, ...)."""


def _declarations(tools: list[TypedTool]) -> list[dict[str, object]]:
    return [tool.declaration() for tool in tools]


async def _register(http: httpx.AsyncClient, options: ServeOptions, tools: list[TypedTool]) -> str:
    lifetime = {"type": "never"} if options.ttl_s is None else {"type": "ttl", "data": {"seconds": options.ttl_s}}
    body = {"name": options.name, "lifetime": lifetime, "tools": _declarations(tools)}
    answer = await http.post(f"/v1/sessions/{options.session_id}/clients", json=body)
    if answer.status_code != 201:
        raise ServeError(f"registration refused ({answer.status_code}): {answer.text}")
    registered = answer.json()
    logger.info("registered as %s (%s)", registered["name"], registered["id"])
    return str(registered["id"])


class Supervisor:
    def __init__(self, options: ServeOptions, tools: list[TypedTool]) -> None:
        self._options = options
        self._tools = tools
        self._members: list[asyncio.subprocess.Process] = []
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        options = self._options
        headers = {"Authorization": f"Bearer {options.token}"}
        async with httpx.AsyncClient(base_url=options.url, headers=headers, timeout=30.0) as http:
            owned = options.client_id is None
            client_id = options.client_id or await _register(http, options, self._tools)
            try:
                while not self._stopping.is_set():
                    target = Target(options.url, options.session_id, options.token, client_id)
                    lapsed = await self._serve(http, target, renew=owned and options.ttl_s is not None)
                    if not lapsed:
                        break
                    logger.warning("the registration lapsed; registering again")
                    client_id = await _register(http, options, self._tools)
            finally:
                # `_serve` has drained the members by now, however it ended.
                if owned:
                    with contextlib.suppress(httpx.HTTPError):
                        await http.delete(f"/v1/sessions/{options.session_id}/clients/{client_id}")

    async def _serve(self, http: httpx.AsyncClient, target: Target, *, renew: bool) -> bool:
        """Run the members until stopped (False) or until the registration lapsed (True)."""
        watchers = [asyncio.create_task(self._keep_member(target, i)) for i in range(self._options.processes)]
        pinging = asyncio.create_task(self._ping(http, target) if renew else self._stopping.wait())
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait([pinging, stopping], return_when=asyncio.FIRST_COMPLETED)
            return pinging.done() and not pinging.cancelled() and pinging.result() is True
        finally:
            for task in (*watchers, pinging, stopping):
                task.cancel()
            await asyncio.gather(*watchers, pinging, stopping, return_exceptions=True)
            await self._drain()

    async def _ping(self, http: httpx.AsyncClient, target: Target) -> bool:
        """Ping at ttl/2 with a fresh Idempotency-Key each; True once the registration has lapsed."""
        assert self._options.ttl_s is not None
        while True:
            await asyncio.sleep(self._options.ttl_s / 2)
            try:
                answer = await http.post(f"{target.path}/ping", headers={"Idempotency-Key": str(uuid.uuid4())})
            except httpx.TransportError as error:
                logger.warning("ping failed: %s", error)
                continue
            if answer.status_code == 404:
                return True

    async def _keep_member(self, target: Target, index: int) -> None:
        while not self._stopping.is_set():
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "switchboard",
                "tools",
                "member",
                self._options.spec,
                "--url",
                target.url,
                "--session",
                target.session_id,
                "--client-id",
                target.client_id,
                "--concurrency",
                str(self._options.concurrency),
                env={**os.environ, TOKEN_ENV: target.token},
            )
            self._members.append(process)
            code = await process.wait()
            self._members.remove(process)
            if self._stopping.is_set():
                return
            logger.warning("member %d exited with %s; starting it again", index, code)
            await asyncio.sleep(_RESTART_DELAY_S)

    async def _drain(self) -> None:
        """SIGTERM every member, wait up to the drain time for them to finish, then kill the rest."""
        members = list(self._members)
        for process in members:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        waiting = [asyncio.create_task(process.wait()) for process in members]
        if waiting:
            _, late = await asyncio.wait(waiting, timeout=self._options.drain_s)
            for process in members:
                if process.returncode is None:
                    logger.warning("member %s did not drain in %.0f s; killing it", process.pid, self._options.drain_s)
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
            await asyncio.gather(*waiting, *late, return_exceptions=True)


async def serve(options: ServeOptions, tools: list[TypedTool]) -> None:
    supervisor = Supervisor(options, tools)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, supervisor.stop)
    await supervisor.run()


async def member(target: Target, tools: list[TypedTool], concurrency: int) -> None:
    """A member process: serve until SIGTERM, then drain. Ctrl-C is the supervisor's to handle."""
    from switchboard.tool_member import Member

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    await Member(target, {tool.name: tool for tool in tools}, concurrency).serve(stop)
