"""The `requestState` of an `InputRequiredResult`: which call, and which of its input requests, a caller's
retry answers, sealed (encrypted and authenticated, by the `mcp` package's AES-GCM codec) so the caller
can neither read nor change it, under a key derived from `SWITCHBOARD_SECRET_KEY` so that any API process
opens what another sealed."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

if TYPE_CHECKING:
    from mcp.server.request_state import AESGCMRequestStateCodec

# The purpose this key serves, so the secret's other uses never share it.
_PURPOSE = b"switchboard/mcp/request-state/v1"
_VERSION = 1


@dataclass(frozen=True, slots=True)
class Sealed:
    """What a retry is bound to: the session, the call (and the seq its dispatch was logged at), the tool
    name and arguments it was called with, and the input requests the caller was asked; `task`: whether
    the retry answers with the call's task (a tool that asks first, for a caller that takes tasks)."""

    session_id: str
    call_id: str
    seq: int
    name: str
    arguments: str
    request_ids: tuple[str, ...]
    task: bool = False


def arguments_digest(arguments: dict[str, Any]) -> str:
    """The arguments a call was made with, as a retry must repeat them."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class RequestStates:
    """Seals and opens request states under the deployment's secret (a per-process one when unset)."""

    def __init__(self, secret: SecretStr | None) -> None:
        material = secret.get_secret_value().encode() if secret is not None else os.urandom(32)
        self._key = hmac.new(material, _PURPOSE, hashlib.sha256).hexdigest()

    @cached_property
    def _codec(self) -> AESGCMRequestStateCodec:
        # Imported on first use: the API starts without the `mcp` package (api/routes/mcp.py loads it in a
        # thread when a session's MCP endpoint is first called), and only that server seals or opens.
        from mcp.server.request_state import AESGCMRequestStateCodec

        return AESGCMRequestStateCodec([self._key])

    def seal(self, sealed: Sealed) -> str:
        payload = {
            "v": _VERSION,
            "s": sealed.session_id,
            "c": sealed.call_id,
            "q": sealed.seq,
            "n": sealed.name,
            "a": sealed.arguments,
            "r": list(sealed.request_ids),
            "t": int(sealed.task),
        }
        return self._codec.seal(json.dumps(payload, separators=(",", ":")).encode())

    def open(self, token: str) -> Sealed | None:
        """What `token` sealed; None for one this deployment did not seal, or one changed since."""
        from mcp.server.request_state import InvalidRequestState

        try:
            payload = json.loads(self._codec.unseal(token))
            if payload["v"] != _VERSION:
                return None
            ids = payload["r"]
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                return None
            return Sealed(
                str(payload["s"]),
                str(payload["c"]),
                int(payload["q"]),
                str(payload["n"]),
                str(payload["a"]),
                tuple(ids),
                bool(payload.get("t")),
            )
        except (InvalidRequestState, ValueError, KeyError, TypeError):
            return None
