"""What every role's settings share: how they are read (environment variables `SWITCHBOARD_<FIELD>`, read
once at start and passed down), and what both long-running processes have.

Each role's settings live with the role: the broker's in `broker/settings.py`, the API's in
`api/settings.py`, a worker's in `workers/settings.py`; the command line composes them
(`switchboard/settings.py`), and each process builds only its own role's.
"""

from __future__ import annotations

import base64
import re
from typing import Annotated

from pydantic import Field, HttpUrl, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from common.jsonlog import LogFormat

Seconds = Annotated[float, Field(gt=0)]
MIN_SECRET_KEY = 32
_URL_SAFE_BASE64 = re.compile(r"[A-Za-z0-9_-]+={0,2}")

# Every settings class reads the same way: a frozen record, variables it has no field for left alone.
SETTINGS_CONFIG = SettingsConfigDict(env_prefix="SWITCHBOARD_", extra="ignore", frozen=True)


class ProcessSettings(BaseSettings):
    """What the API and a worker both have besides the broker's."""

    model_config = SETTINGS_CONFIG

    # The API's bind address; a worker serves /metrics on it.
    host: str = "127.0.0.1"
    # Operations: log lines as JSON objects (or text for a terminal); how often each process times a
    # PING to Redis.
    log_format: LogFormat = "json"
    redis_probe_s: Seconds = 5.0
    # The deployment's own secret (32 or more random bytes, url-safe base64), the same in every process:
    # each purpose derives its own key from it (the MCP `requestState` seal, api/mcp/sealing.py; an MCP
    # grant's OAuth tokens, broker/services/token_cipher.py). Unset, each process makes up one of its own,
    # so what one process sealed no other opens (and OAuth grants are refused).
    secret_key: SecretStr | None = None
    # Where browsers and MCP servers reach this deployment (https://switchboard.example.com): an MCP
    # grant's OAuth redirect and client metadata document are addresses under it (docs/mcp.md).
    public_url: HttpUrl | None = None
    # How long a sign-in link to an OAuth grant's server lasts, and a run that needs it waits for it.
    mcp_authorization_timeout_s: int = Field(default=86_400, ge=1, le=2_592_000)

    @field_validator("secret_key")
    @classmethod
    def _secret_length(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(_url_safe_bytes(value.get_secret_value())) < MIN_SECRET_KEY:
            raise ValueError(
                f"must be at least {MIN_SECRET_KEY} characters: url-safe base64 of {MIN_SECRET_KEY} or more random"
                " bytes (secrets.token_urlsafe(32) makes one)"
            )
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url_shape(cls, value: HttpUrl | None) -> HttpUrl | None:
        # Paths are appended to it, and a query or fragment would swallow them.
        if value is not None and (value.query or value.fragment or value.username or value.password):
            raise ValueError("must be a scheme, host, optional port and path: no credentials, query or fragment")
        return value


def _url_safe_bytes(text: str) -> bytes:
    """`text` decoded as url-safe base64 (padding optional); nothing when it is not that."""
    if not _URL_SAFE_BASE64.fullmatch(text) or len(text.rstrip("=")) % 4 == 1:
        return b""
    return base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))


def env_names(role: type[BaseSettings]) -> frozenset[str]:
    """The environment variables `role` reads (`SWITCHBOARD_<FIELD>`)."""
    prefix = role.model_config.get("env_prefix", "")
    return frozenset(f"{prefix}{name}".upper() for name in role.model_fields)
