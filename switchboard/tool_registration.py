"""A client registration as `switchboard tools serve` and `switchboard tools mcp` keep one: registered, pinged
at ttl/2 (a lapse is seen as the ping's 404), its tools replaced, left on stop; and the lines they say of
it (`switchboard.tool_log`)."""

from __future__ import annotations

import asyncio
import logging
import signal
import uuid
from dataclasses import dataclass
from typing import Any

import httpx2

from switchboard.tool_log import visible_names

logger = logging.getLogger("switchboard.tools")
TOKEN_ENV = "SWITCHBOARD_SESSION_TOKEN"  # noqa: S105 (the variable's name, not a secret)
# As `switchboard up`: a closed terminal stops it as Ctrl-C does.
STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class ServeError(Exception):
    """The server could not start: the message says why (a refused registration, a bad token, ...)."""


@dataclass(frozen=True)
class Registration:
    id: str
    name: str
    tools: list[str]


def plural(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else words or word + 's'}"


def api_client(url: str, token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30.0)


async def register(
    http: httpx2.AsyncClient, session_id: str, name: str, ttl_s: int | None, tools: list[dict[str, Any]]
) -> Registration:
    """Register `tools` (as the registration route takes them) under `name`; ServeError if refused."""
    lifetime = {"type": "never"} if ttl_s is None else {"type": "ttl", "data": {"seconds": ttl_s}}
    body = {"name": name, "lifetime": lifetime, "tools": tools}
    answer = await http.post(f"/v1/sessions/{session_id}/clients", json=body)
    if answer.status_code != 201:
        raise ServeError(f"registration refused ({answer.status_code}): {answer.text}")
    registered = answer.json()
    ttl = "no ttl" if ttl_s is None else f"ttl {ttl_s} s, pinged every {ttl_s / 2:g} s"
    facts = {"event": "registered", "client_id": registered["id"], "client_name": registered["name"]}
    logger.info(
        'registered as "%s" (client %s) on session %s, %s',
        registered["name"],
        registered["id"],
        session_id,
        ttl,
        extra=facts | {"session_id": session_id},
    )
    return Registration(str(registered["id"]), str(registered["name"]), [str(tool["name"]) for tool in tools])


async def replace_tools(http: httpx2.AsyncClient, path: str, tools: list[dict[str, Any]]) -> bool:
    """PUT the registration's whole tool set (`path` is the registration's); whether it went in."""
    try:
        answer = await http.put(f"{path}/tools", json={"tools": tools})
    except httpx2.TransportError as error:
        logger.warning("the new tool list was not sent: %s", error)
        return False
    if answer.status_code != 200:
        logger.warning("the new tool list was refused (%s): %s", answer.status_code, answer.text)
        return False
    return True


async def ping_until_lapsed(http: httpx2.AsyncClient, path: str, ttl_s: int) -> bool:
    """Ping at ttl/2 with a fresh Idempotency-Key each; True once the registration has lapsed."""
    while True:
        await asyncio.sleep(ttl_s / 2)
        try:
            answer = await http.post(f"{path}/ping", headers={"Idempotency-Key": str(uuid.uuid4())})
        except httpx2.TransportError as error:
            logger.warning("ping failed: %s", error)
            continue
        if answer.status_code == 404:
            return True


async def leave(http: httpx2.AsyncClient, session_id: str, client_id: str) -> bool:
    """DELETE the registration (one already gone counts as left); whether it is gone."""
    try:
        answer = await http.delete(f"/v1/sessions/{session_id}/clients/{client_id}")
    except httpx2.HTTPError as error:
        logger.warning("could not leave the registration %s: %s", client_id, error)
        return False
    if answer.status_code not in (204, 404):
        logger.warning("could not leave the registration %s (%s): %s", client_id, answer.status_code, answer.text)
        return False
    return True


def say_names(registration: Registration, tools: list[str] | None = None) -> None:
    """A line per tool (all the registration's, unless told which) with the name the model sees."""
    for name in visible_names(registration.name, registration.tools if tools is None else tools):
        facts = {"event": "tool", "tool": name.tool, "offered": name.offered, "model_name": name.model_name}
        logger.info("%s", name.line(), extra=facts)


def say_stopping(why: str, drain_s: float) -> None:
    logger.info(
        "%s: stopping; the calls in hand finish first (up to %g s)",
        why,
        drain_s,
        extra={"event": "stopping", "signal": why},
    )


def say_stopped(client_id: str, left: bool | None, drained: int, killed: int = 0, drain_s: float = 0) -> None:
    """The last line: the calls drained, members killed (a pool's), and whether the registration was left
    (None: it was joined, and is kept)."""
    what = [f"drained {plural(drained, 'call')}"]
    if killed:
        what.append(f"killed {plural(killed, 'member')} still running after {drain_s:g} s")
    if left is None:
        what.append(f"kept the registration {client_id} (joined with --client-id)")
    else:
        what.append(f"{'left' if left else 'could not leave'} the registration {client_id}")
    facts = {"event": "stopped", "drained": drained, "killed": killed, "left": left, "client_id": client_id}
    logger.info("stopped: %s", ", ".join(what), extra=facts)
