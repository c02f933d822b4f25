"""`switchboard tools serve MODULE:OBJECT`: a Python tool server for trusted backends.

The supervisor registers one client (or joins an existing registration with `--client-id`), keeps a ttl
registration alive with pings at ttl/2, and runs N member processes (`switchboard tools member`), each a
member of the registration's pool (`switchboard.tool_member`). A member that dies is started again. On
SIGTERM or Ctrl-C the members drain (calls they acked are finished, calls they held unacked go to other
members), and a registration this server made is left.

It says so as it goes (`switchboard.tool_log`): the registration and the names the model sees at start,
one line per call from the member that ran it, and what it did when it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass

import httpx2

from switchboard.tool_log import ToolLogFormat
from switchboard.tool_member import Target
from switchboard.tool_registration import (
    STOPPING,
    TOKEN_ENV,
    Registration,
    ServeError,
    api_client,
    leave,
    ping_until_lapsed,
    plural,
    register,
    say_names,
    say_stopped,
    say_stopping,
)
from switchboard.typed_tools import TypedTool

logger = logging.getLogger("switchboard.tools")
_RESTART_DELAY_S = 1.0
# How often a member looks whether its supervisor is still there.
_ORPHAN_CHECK_S = 1.0


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
    log_format: ToolLogFormat = "plain"


@dataclass
class _Running:
    """A member process, its slot (1..N) and the pipe it reports on as it exits."""

    process: asyncio.subprocess.Process
    index: int
    report: int


def _exit(code: int) -> str:
    return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"


def _drained_of(report: int) -> int:
    """What a member wrote on its pipe as it exited (nothing, if it was killed); the pipe is closed."""
    try:
        written = os.read(report, 4096)
    except BlockingIOError:
        written = b""
    finally:
        os.close(report)
    try:
        return int(json.loads(written)["drained"])
    except (ValueError, KeyError, TypeError):
        return 0


async def _register(http: httpx2.AsyncClient, options: ServeOptions, tools: list[TypedTool]) -> Registration:
    declared = [tool.declaration() for tool in tools]
    return await register(http, options.session_id, options.name, options.ttl_s, declared)


async def _join(
    http: httpx2.AsyncClient, options: ServeOptions, client_id: str, tools: list[TypedTool]
) -> Registration:
    """The registration `--client-id` names, read back for its name and the tools it offers."""
    answer = await http.get(f"/v1/sessions/{options.session_id}/clients")
    if answer.status_code != 200:
        raise ServeError(f"cannot read the session's registrations ({answer.status_code}): {answer.text}")
    found = next((c for c in answer.json()["items"] if str(c["id"]).lower() == client_id.lower()), None)
    if found is None:
        raise ServeError(f"no active registration {client_id} on session {options.session_id}")
    offered = [str(tool["name"]) for tool in found["tools"]]
    facts = {"event": "joined", "client_id": client_id, "client_name": found["name"], "session_id": options.session_id}
    logger.info(
        'joined "%s" (client %s) on session %s; it is not left on stop',
        found["name"],
        client_id,
        options.session_id,
        extra=facts,
    )
    missing = sorted(set(offered) - {tool.name for tool in tools})
    if missing:
        logger.warning("the registration offers %s, which %s does not define", ", ".join(missing), options.spec)
    return Registration(client_id, str(found["name"]), offered)


class Supervisor:
    def __init__(self, options: ServeOptions, tools: list[TypedTool]) -> None:
        self._options = options
        self._tools = tools
        self._members: list[_Running] = []
        self._stopping = asyncio.Event()
        self._drained = 0
        self._killed = 0

    def stop(self, why: str = "asked") -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        say_stopping(why, self._options.drain_s)

    async def run(self) -> None:
        options = self._options
        async with api_client(options.url, options.token) as http:
            owned = options.client_id is None
            try:
                if options.client_id is None:
                    registration = await _register(http, options, self._tools)
                else:
                    registration = await _join(http, options, options.client_id, self._tools)
            except httpx2.TransportError as error:
                raise ServeError(f"cannot reach the API at {options.url}: {error or type(error).__name__}") from None
            say_names(registration)
            self._say_serving()
            left: bool | None = None
            try:
                while not self._stopping.is_set():
                    target = Target(options.url, options.session_id, options.token, registration.id)
                    lapsed = await self._serve(http, target, renew=owned and options.ttl_s is not None)
                    if not lapsed:
                        break
                    logger.warning("the registration lapsed; registering again")
                    registration = await _register(http, options, self._tools)
                    say_names(registration)
            finally:
                # `_serve` has drained the members by now, however it ended.
                if owned:
                    left = await leave(http, options.session_id, registration.id)
            say_stopped(registration.id, left, self._drained, self._killed, options.drain_s)

    def _say_serving(self) -> None:
        options = self._options
        logger.info(
            "%s, %s at a time each; Ctrl-C or SIGTERM stops",
            plural(options.processes, "member process", "member processes"),
            plural(options.concurrency, "call"),
            extra={"event": "serving", "processes": options.processes, "concurrency": options.concurrency},
        )

    async def _serve(self, http: httpx2.AsyncClient, target: Target, *, renew: bool) -> bool:
        """Run the members until stopped (False) or until the registration lapsed (True)."""
        watchers = [asyncio.create_task(self._keep_member(target, i)) for i in range(1, self._options.processes + 1)]
        ttl_s = self._options.ttl_s
        lapsing = ping_until_lapsed(http, target.path, ttl_s) if renew and ttl_s is not None else None
        pinging = asyncio.create_task(lapsing or self._stopping.wait())
        stopping = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait([pinging, stopping], return_when=asyncio.FIRST_COMPLETED)
            # Without renewal `pinging` is the stop itself: its True means stopped, not lapsed (a stopped
            # joiner or ttl-0 server used to register again here, and keep or leak that registration).
            if not renew or self._stopping.is_set():
                return False
            return pinging.done() and not pinging.cancelled() and pinging.result() is True
        finally:
            for task in (*watchers, pinging, stopping):
                task.cancel()
            await asyncio.gather(*watchers, pinging, stopping, return_exceptions=True)
            await self._drain()

    async def _spawn(self, target: Target, index: int) -> _Running:
        options = self._options
        command = ["-m", "switchboard", "tools", "member", options.spec, "--url", target.url]
        command += ["--session", target.session_id, "--client-id", target.client_id]
        command += ["--concurrency", str(options.concurrency), "--log-format", options.log_format]
        # One member needs no name in its lines; in a pool, the slot says which one ran a call.
        command += ["--member", str(index)] if options.processes > 1 else []
        # Named, not read from getppid() in the member: the supervisor may die before the member looks.
        command += ["--supervisor", str(os.getpid())]
        report, reported = os.pipe()
        os.set_blocking(report, False)
        try:
            command += ["--report-fd", str(reported)]
            env = {**os.environ, TOKEN_ENV: target.token}
            # A session of its own: a terminal's Ctrl-C is the supervisor's alone, which drains the pool in
            # order (a member still importing would die of it with a traceback); `member` watches for the
            # supervisor's death instead.
            process = await asyncio.create_subprocess_exec(
                sys.executable, *command, env=env, pass_fds=(reported,), start_new_session=True
            )
        except BaseException:
            os.close(report)
            raise
        finally:
            os.close(reported)
        return _Running(process, index, report)

    async def _keep_member(self, target: Target, index: int) -> None:
        while not self._stopping.is_set():
            running = await self._spawn(target, index)
            self._members.append(running)
            code = await running.process.wait()
            self._members.remove(running)
            os.close(running.report)
            if self._stopping.is_set():
                return
            logger.warning("member %d exited (%s); starting it again", index, _exit(code))
            await asyncio.sleep(_RESTART_DELAY_S)

    async def _drain(self) -> None:
        """SIGTERM every member, wait up to the drain time for them to finish, then kill the rest."""
        members = list(self._members)
        self._members.clear()
        for running in members:
            with contextlib.suppress(ProcessLookupError):
                running.process.send_signal(signal.SIGTERM)
        waiting = [asyncio.create_task(running.process.wait()) for running in members]
        if waiting:
            _, late = await asyncio.wait(waiting, timeout=self._options.drain_s)
            for running in members:
                if running.process.returncode is None:
                    self._killed += 1
                    drain_s = self._options.drain_s
                    logger.warning("member %d did not drain in %g s; killing it", running.index, drain_s)
                    with contextlib.suppress(ProcessLookupError):
                        running.process.kill()
            await asyncio.gather(*waiting, *late, return_exceptions=True)
        for running in members:
            drained = _drained_of(running.report)
            if self._stopping.is_set():
                self._drained += drained


async def serve(options: ServeOptions, tools: list[TypedTool]) -> None:
    supervisor = Supervisor(options, tools)
    loop = asyncio.get_running_loop()
    for sig in STOPPING:
        loop.add_signal_handler(sig, supervisor.stop, sig.name)
    await supervisor.run()


async def member(
    target: Target, tools: list[TypedTool], concurrency: int, report: int | None = None, supervisor: int | None = None
) -> None:
    """A member process: serve until SIGTERM or until its supervisor (the parent unless named) is gone,
    then drain; the calls it drained go to the supervisor on the `report` pipe. Ctrl-C is the
    supervisor's to handle."""
    from switchboard.tool_member import Member

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watching = asyncio.create_task(_orphaned(supervisor or os.getppid(), stop))
    serving = Member(target, {tool.name: tool for tool in tools}, concurrency)
    try:
        await serving.serve(stop)
    finally:
        watching.cancel()
    if report is not None:
        with contextlib.suppress(OSError):
            os.write(report, json.dumps({"drained": serving.drained}).encode())
            os.close(report)


async def _orphaned(supervisor: int, stop: asyncio.Event) -> None:
    """Set `stop` once the supervisor has died (however it died: a SIGKILL sends no SIGTERM on)."""
    # Polled: nothing wakes a process when its parent dies but a PR_SET_PDEATHSIG armed in a preexec_fn,
    # which is unsafe in a parent with threads (the resolver's).
    while True:
        if os.getppid() != supervisor:
            break
        await asyncio.sleep(_ORPHAN_CHECK_S)
    logger.warning("the supervisor (pid %d) is gone; this member drains and stops", supervisor)
    stop.set()
