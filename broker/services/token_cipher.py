"""The seal on an MCP grant's OAuth tokens at rest: AES-GCM under a key derived (HKDF-SHA256) from
`SWITCHBOARD_SECRET_KEY` for this purpose alone, so the secret's other uses (api/mcp/sealing.py) never
share it, and bound to the connection it was sealed for, so a sealed value moved to another connection's
record does not open."""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr

from broker.errors import BrokerUnavailable

_PURPOSE = b"switchboard/mcp/oauth-tokens/v1"
_NONCE_BYTES = 12
_VERSION = b"1"


class TokenCipher:
    """Seals and opens token sets under the deployment's secret."""

    def __init__(self, secret: SecretStr) -> None:
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_PURPOSE).derive(
            secret.get_secret_value().encode()
        )
        self._aead = AESGCM(key)

    def seal(self, plaintext: bytes, bound_to: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plaintext, _VERSION + b"|" + bound_to.encode())
        return _VERSION.decode() + "." + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, sealed: str, bound_to: str) -> bytes:
        """The plaintext; a value sealed under another secret, for another connection, or changed: an error
        whose message names neither."""
        version, _, body = sealed.partition(".")
        try:
            raw = base64.urlsafe_b64decode(body.encode())
            if version.encode() != _VERSION or len(raw) <= _NONCE_BYTES:
                raise ValueError(version)
            return self._aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _VERSION + b"|" + bound_to.encode())
        except (InvalidTag, ValueError):
            raise BrokerUnavailable(
                "a stored MCP token set does not open: SWITCHBOARD_SECRET_KEY changed, or the record was altered"
            ) from None
