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
import uuid
from dataclasses import dataclass

import httpx

from switchboard.tool_log import ToolLogFormat, visible_names
from switchboard.tool_member import Target
from switchboard.typed_tools import TypedTool

logger = logging.getLogger("switchboard.tools")
TOKEN_ENV = "SWITCHBOARD_SESSION_TOKEN"  # noqa: S105 (the variable's name, not a secret)
_RESTART_DELAY_S = 1.0
# As `switchboard up`: a closed terminal stops it as Ctrl-C does.
_STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
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


class ServeError(Exception):
    """The server could not start: the message says why (a refused registration, a bad token, ...)."""


@dataclass(frozen=True)
class _Registration:
    id: str
    name: str
    tools: list[str]


@dataclass
class _Running:
    """A member process, its slot (1..N) and the pipe it reports on as it exits."""

    process: asyncio.subprocess.Process
    index: int
    report: int


def _plural(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else words or word + 's'}"


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


async def _register(http: httpx.AsyncClient, options: ServeOptions, tools: list[TypedTool]) -> _Registration:
    lifetime = {"type": "never"} if options.ttl_s is None else {"type": "ttl", "data": {"seconds": options.ttl_s}}
    body = {"name": options.name, "lifetime": lifetime, "tools": [tool.declaration() for tool in tools]}
    answer = await http.post(f"/v1/sessions/{options.session_id}/clients", json=body)
    if answer.status_code != 201:
        raise ServeError(f"registration refused ({answer.status_code}): {answer.text}")
    registered = answer.json()
    ttl = "no ttl" if options.ttl_s is None else f"ttl {options.ttl_s} s, pinged every {options.ttl_s / 2:g} s"
    facts = {"event": "registered", "client_id": registered["id"], "client_name": registered["name"]}
    logger.info(
        'registered as "%s" (client %s) on session %s, %s',
        registered["name"],
        registered["id"],
        options.session_id,
        ttl,
        extra=facts | {"session_id": options.session_id},
    )
    return _Registration(str(registered["id"]), str(registered["name"]), [tool.name for tool in tools])


async def _join(
    http: httpx.AsyncClient, options: ServeOptions, client_id: str, tools: list[TypedTool]
) -> _Registration:
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
    return _Registration(client_id, str(found["name"]), offered)


def _say_names(registration: _Registration) -> None:
    for name in visible_names(registration.name, registration.tools):
        facts = {"event": "tool", "tool": name.tool, "offered": name.offered, "model_name": name.model_name}
        logger.info("%s", name.line(), extra=facts)


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
        logger.info(
            "%s: stopping; the calls in hand finish first (up to %g s)",
            why,
            self._options.drain_s,
            extra={"event": "stopping", "signal": why},
        )

    async def run(self) -> None:
        options = self._options
        headers = {"Authorization": f"Bearer {options.token}"}
        async with httpx.AsyncClient(base_url=options.url, headers=headers, timeout=30.0) as http:
            owned = options.client_id is None
            try:
                if options.client_id is None:
                    registration = await _register(http, options, self._tools)
                else:
                    registration = await _join(http, options, options.client_id, self._tools)
            except httpx.TransportError as error:
                raise ServeError(f"cannot reach the API at {options.url}: {error or type(error).__name__}") from None
            _say_names(registration)
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
                    _say_names(registration)
            finally:
                # `_serve` has drained the members by now, however it ended.
                if owned:
                    left = await self._leave(http, registration.id)
            self._say_stopped(registration.id, left)

    def _say_serving(self) -> None:
        options = self._options
        logger.info(
            "%s, %s at a time each; Ctrl-C or SIGTERM stops",
            _plural(options.processes, "member process", "member processes"),
            _plural(options.concurrency, "call"),
            extra={"event": "serving", "processes": options.processes, "concurrency": options.concurrency},
        )

    async def _leave(self, http: httpx.AsyncClient, client_id: str) -> bool:
        try:
            answer = await http.delete(f"/v1/sessions/{self._options.session_id}/clients/{client_id}")
        except httpx.HTTPError as error:
            logger.warning("could not leave the registration %s: %s", client_id, error)
            return False
        if answer.status_code not in (204, 404):
            logger.warning("could not leave the registration %s (%s): %s", client_id, answer.status_code, answer.text)
            return False
        return True

    def _say_stopped(self, client_id: str, left: bool | None) -> None:
        what = [f"drained {_plural(self._drained, 'call')}"]
        if self._killed:
            what.append(f"killed {_plural(self._killed, 'member')} still running after {self._options.drain_s:g} s")
        if left is None:
            what.append(f"kept the registration {client_id} (joined with --client-id)")
        else:
            what.append(f"{'left' if left else 'could not leave'} the registration {client_id}")
        facts = {
            "event": "stopped",
            "drained": self._drained,
            "killed": self._killed,
            "left": left,
            "client_id": client_id,
        }
        logger.info("stopped: %s", ", ".join(what), extra=facts)

    async def _serve(self, http: httpx.AsyncClient, target: Target, *, renew: bool) -> bool:
        """Run the members until stopped (False) or until the registration lapsed (True)."""
        watchers = [asyncio.create_task(self._keep_member(target, i)) for i in range(1, self._options.processes + 1)]
        pinging = asyncio.create_task(self._ping(http, target) if renew else self._stopping.wait())
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
    for sig in _STOPPING:
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
