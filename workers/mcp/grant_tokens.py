"""An OAuth grant's token on its requests: the access token the session's owner (its subject, else the
session) got by signing in (api/oauth_callback.py), sent as `Authorization: Bearer` to that grant's server
alone (the hub's pinned client sends a grant's headers only to its own origin). The grant, with the
token, is a connection of its own in the hub (its key digests the headers), so one person's token never
serves another's session.

A token past its `expires_at` (or within `_MARGIN_MS` of it) is not sent: the server would refuse it. One
with a refresh token is refreshed first (workers/mcp/refresh.py: one refresh per connection across
workers; a refused refresh forgets the tokens, so the person is asked again). Nor is one the grant's
server refused: a 401 with a Bearer challenge marks it ended, not to be refreshed, for every worker (the
person is asked again, the sign-in following the challenge); any 401 to the connection
(`refused`, the hub's) has this worker leave it out. A 403 `insufficient_scope` has the person asked
again for more scope (`_step_up`, bounded).

A grant with no usable token is asked for (`ask`): a sign-in is begun (workers/mcp/sign_in.py) and the
session gets `mcp_authorization_required` with its link, once per grant while that sign-in waits. The
step then waits for it, held by no worker (workers/steps.py, broker/services/mcp_authorizations.py
`wait`), and goes again once it completed (with the token), was declined or ran out (without the grant's
tools, the model told why: `note`). A declined sign-in is not asked for again in the session, one that
ran out not again in the run that waited on it."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import HttpUrl

from broker import Broker
from broker.errors import SwitchboardError
from broker.services.mcp_authorizations import LatestSignIn
from broker.services.mcp_challenges import Challenge
from broker.services.mcp_connections import McpConnection, owner_of
from broker.services.token_cipher import TokenCipher
from common.runtime import imported
from workers.config import McpGrant
from workers.mcp.challenges import Challenged, Challenges
from workers.mcp.hub import McpHub

logger = logging.getLogger(__name__)

# Step-ups (a new sign-in for more scope) one session may be asked for per grant within a sign-in's wait.
MAX_STEP_UPS = 2
# A token this close to its end is taken as ended: a call begun with it could outlive it.
_MARGIN_MS = 30_000
# A server whose sign-in could not be begun is not tried again for this long by this worker: discovery
# may take several fetches of 10 s each, and every step needing the grant would wait for them again.
RETRY_AFTER_S = 60.0
# Servers remembered as failed, at most (the oldest go first).
_MAX_FAILED = 256
_FAILED = "its sign-in could not be started"
_DECLINED = "the person declined to sign in to it"
_LAPSED = "the person did not sign in to it in time (the sign-in ran out)"


@dataclass(frozen=True, slots=True)
class Lacking:
    """What `GrantTokens.ask` found of a step's OAuth grants without a token: the sign-ins the step is to
    wait for (their ids), and why each grant that will not have its tools this step has none, by name."""

    waiting: tuple[str, ...] = ()
    why: dict[str, str] = dataclasses.field(default_factory=dict)


class GrantTokens:
    """Puts the session owner's stored token on each of its OAuth grants."""

    def __init__(
        self,
        broker: Broker,
        cipher: TokenCipher,
        public_url: HttpUrl | None,
        wait_s: int,
        refused: Callable[[McpGrant], bool] = lambda grant: False,
        challenges: Challenges | None = None,
    ) -> None:
        self._broker = broker
        # Whether the grant's server refused it, as it stands with its token (McpHub.refused).
        self._refused = refused
        self._cipher = cipher
        # None: no callback address, so no sign-in can be begun (only tokens kept before are used).
        self._public_url = public_url
        self._wait_s = wait_s
        # Server URL -> when (monotonic) a sign-in for it last failed to begin.
        self._failed: dict[str, float] = {}
        # What the worker's connections were challenged with (the hub's): None, none is followed.
        self._challenges = challenges

    async def authorized(self, session_id: str, grants: tuple[McpGrant, ...]) -> tuple[McpGrant, ...]:
        """`grants`, each OAuth one carrying its owner's token when there is a usable one (as it was
        otherwise: its server's refusal is what the model is told)."""
        if not any(grant.oauth is not None for grant in grants):
            return grants
        owner = owner_of((await self._broker.sessions.get(session_id)).subject, session_id)
        return tuple([await self._one(session_id, owner, grant) for grant in grants])

    async def _one(self, session_id: str, owner: str, grant: McpGrant) -> McpGrant:
        if grant.oauth is None:
            return grant
        connections = self._broker.mcp_connections
        found = await connections.with_tokens(self._cipher, owner, grant.url)
        record, stored = found if found is not None else (None, None)
        kept = _access(stored)
        # What the server said of the token as kept (before any refresh replaces it), once.
        seen = None if kept is None or self._challenges is None else self._challenges.take(_key(grant, kept))
        if record is not None and seen is not None and seen.status == 401:
            # The server refused this token: no worker sends it again, nor refreshes it; the person is
            # asked again (the sign-in following what the server's challenge says).
            await self._note(session_id, grant, seen, " ".join(record.scopes) or None)
            await connections.refused(record)
            record = await connections.get_for(owner, grant.url)
        access = None if record is None else await self._usable(record, kept)
        if record is None or access is None:
            bare = None if self._challenges is None else self._challenges.peek(McpHub.key(grant))
            if bare is not None and bare.status == 401:
                # Asked without a token: where its metadata is and what scope it wants, for the sign-in.
                await self._note(session_id, grant, bare, None)
            return grant
        authorized = _with(grant, access)
        if self._refused(authorized):
            return grant
        if seen is not None and seen.step_up:
            return await self._step_up(session_id, grant, authorized, record, seen)
        if self._challenges is not None:
            # A step-up noted before (by another call's 403) and not yet asked for is asked for now.
            noted = await self._broker.mcp_challenges.latest(session_id, grant.name)
            if noted is not None and noted.pending and not await self._waits(session_id, grant):
                return grant
        return authorized

    async def _usable(self, record: McpConnection, kept: str | None) -> str | None:
        """The access token to send: `kept` (the record's, as stored), or a refreshed one when it ends
        within the margin; None when there is none."""
        if record.expires_at_ms is None or record.expires_at_ms - _MARGIN_MS > time.time() * 1000:
            return kept
        if not record.refreshable:
            return None
        refresh = await imported("workers.mcp.refresh")
        refresher = refresh.Refresher(self._broker.mcp_connections, self._cipher, self._broker.providers.addresses)
        return _access(await refresher.refresh(record))

    async def _step_up(
        self, session_id: str, grant: McpGrant, authorized: McpGrant, record: McpConnection, seen: Challenged
    ) -> McpGrant:
        """After a 403 `insufficient_scope`: the grant without its token (so `ask` begins a sign-in asking
        for what was granted and what the server wants), at most `MAX_STEP_UPS` times in the session
        within a sign-in's wait; while one waits, was declined, or past the bound, the token is still
        sent (the grant's other tools work) and the server's refusal is what the model reads."""
        if await self._waits(session_id, grant):
            return authorized
        if not await self._note(session_id, grant, seen, " ".join(record.scopes) or None, step_up=True):
            logger.info("the MCP grant %s asked for more scope again; the person is not asked again", grant.name)
            return authorized
        return grant

    async def _waits(self, session_id: str, grant: McpGrant) -> bool:
        """Whether the grant's latest sign-in in the session waits for the person or was declined (then
        no step-up is asked for)."""
        latest = await self._broker.mcp_authorizations.asked(session_id, grant.name)
        return latest is not None and latest.state in ("pending", "declined")

    async def _note(
        self, session_id: str, grant: McpGrant, seen: Challenged, granted: str | None, *, step_up: bool = False
    ) -> bool:
        """Keep `seen` for the grant's next sign-in in the session; False when a step-up is past the bound."""
        return await self._broker.mcp_challenges.note(
            session_id,
            grant.name,
            Challenge(seen.header, granted),
            step_up=step_up,
            limit=MAX_STEP_UPS,
            ttl_ms=self._wait_s * 1000,
        )

    async def ask(self, session_id: str, run_id: str, grants: tuple[McpGrant, ...]) -> Lacking:
        """Ask the session's person to sign in to each OAuth grant of `grants` (as `authorized` gave them)
        that has no token, unless a sign-in for it waits (the step waits for that one too), was declined in
        the session or ran out while `run_id` waited on it. A sign-in that cannot be begun (no metadata, a
        refused address) is logged: the step goes on without the grant."""
        lacking = [g for g in grants if g.oauth is not None and "Authorization" not in g.headers]
        if not lacking:
            return Lacking()
        if self._public_url is None:
            return Lacking(
                why={g.name: "no one can sign in to it here (SWITCHBOARD_PUBLIC_URL is not set)" for g in lacking}
            )
        authorizations = self._broker.mcp_authorizations
        sign_in = await imported("workers.mcp.sign_in")
        starter = sign_in.SignIns(
            authorizations, self._cipher, self._broker.providers.addresses, self._public_url, self._wait_s
        )
        subject = (await self._broker.sessions.get(session_id)).subject
        waiting: list[str] = []
        why: dict[str, str] = {}
        for grant in lacking:
            asked = await authorizations.asked(session_id, grant.name)
            if asked is not None and (kept := _kept(asked, run_id)) is not None:
                if asked.state == "pending":
                    waiting.append(kept)
                else:
                    why[grant.name] = kept
                continue
            if time.monotonic() - self._failed.get(grant.url, -RETRY_AFTER_S) < RETRY_AFTER_S:
                why[grant.name] = _FAILED
                continue
            try:
                # What the server's last challenge said (its metadata, its scope), and a step-up's scope.
                noted = await self._broker.mcp_challenges.latest(session_id, grant.name)
                begun = await starter.begin(
                    session_id=session_id,
                    subject=subject,
                    grant=grant.name,
                    server_url=grant.url,
                    auth=grant.oauth,
                    challenge=noted.header if noted is not None else None,
                    granted=noted.granted if noted is not None else None,
                )
                outcome, found = await authorizations.require(
                    session_id,
                    authorization_id=begun.authorization_id,
                    grant=grant.name,
                    server_url=grant.url,
                    url=begun.authorization_url,
                    expires_at_ms=begun.expires_at_ms,
                )
                await self._broker.mcp_challenges.begun(session_id, grant.name)
            except (sign_in.SignInUnavailable, SwitchboardError) as error:
                logger.warning("no sign-in could be begun for the MCP grant %s (%s): %s", grant.name, grant.url, error)
                self._failed.pop(grant.url, None)
                self._failed[grant.url] = time.monotonic()
                while len(self._failed) > _MAX_FAILED:
                    del self._failed[next(iter(self._failed))]
                why[grant.name] = _FAILED
                continue
            # Another step asked meanwhile: its sign-in is the one waited on (or declined).
            if outcome == "declined":
                why[grant.name] = _DECLINED
            else:
                waiting.append(begun.authorization_id if outcome == "asked" else found)
        return Lacking(tuple(waiting), why)


def _kept(asked: LatestSignIn, run_id: str) -> str | None:
    """What a grant's latest sign-in leaves the step: the id of one still pending (waited on), why the
    grant has no tools when it was declined or ran out in this run; None when a new one is to be asked."""
    if asked.state == "pending":
        return asked.authorization_id
    if asked.state == "declined":
        return _DECLINED
    if asked.state == "expired" and asked.run_id == run_id:
        return _LAPSED
    return None


def _access(stored: bytes | None) -> str | None:
    """The access token of a stored token set (JSON), if it has one."""
    access = None if stored is None else json.loads(stored).get("access_token")
    return access if isinstance(access, str) and access else None


def _with(grant: McpGrant, access: str) -> McpGrant:
    return dataclasses.replace(grant, headers={**grant.headers, "Authorization": f"Bearer {access}"})


def _key(grant: McpGrant, access: str) -> str:
    """The hub's key of the connection that sends `access` for `grant`."""
    return McpHub.key(_with(grant, access))


def note(unlisted: dict[str, str]) -> str:
    """What the model is told of grants whose tools it does not have for want of a sign-in."""
    servers = "; ".join(f"{name}: {why}" for name, why in sorted(unlisted.items()))
    return (
        "The tools of these MCP servers are not available now, as each needs the person to sign in to it ("
        + servers
        + "). If the person asks for something they would do, say so."
    )
