"""The API process's settings (`switchboard api`): the broker's, what both processes have, and its own:
port, bootstrap key, body and rate limits, proxies, the header deadline, streams, drain, the console's
trace link. No model provider's key or URL is among them, so the API never reads one (the workers' are in
workers/settings.py)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from broker.services.credentials import looks_like_api_key
from broker.settings import BrokerSettings
from common.settings import ProcessSettings, Seconds

# Where a trace id goes in `trace_url_template`.
TRACE_ID_PLACE = "{trace_id}"


class ApiSettings(BrokerSettings, ProcessSettings):
    """The API process's: no model provider's key or URL among them."""

    port: int = Field(default=8000, ge=0, le=65535)
    bootstrap_api_key: SecretStr | None = None
    access_log: bool = False
    fast_lane: bool = True
    # The largest request body accepted (413 beyond): 64 tools with big schemas, or a 65,536-character
    # result escaped to JSON, fit with room to spare.
    max_body_bytes: int = Field(default=1_048_576, ge=65_536)
    # A client's result may carry images (5 MiB decoded in all, a third more as base64): its own limit.
    max_result_body_bytes: int = Field(default=8_388_608, ge=65_536)
    # Per API process (api/rate_limit.py): requests a second per credential and the burst it may make
    # at once (0: no limit); 401s from one address within the window before its failures are braked
    # (a valid credential from that address is still served).
    rate_limit_per_s: float = Field(default=200.0, ge=0)
    rate_limit_burst: int = Field(default=400, ge=1)
    auth_failure_limit: int = Field(default=20, ge=0)
    auth_failure_window_s: Seconds = 60.0
    # The proxies (IPs or CIDRs, comma-separated) whose X-Forwarded-For and X-Forwarded-Proto are
    # believed (api/proxies.py). Empty trusts nobody: anyone could otherwise claim any address and
    # dodge the per-address brake, or claim https and pass the same-origin check.
    trusted_proxies: str = ""
    # A connection that has not sent a request's whole header block this long after it opened (or after
    # the request's first byte) is closed (api/connection.py): a slow sender holds no connection.
    header_timeout_s: Seconds = 10.0
    stream_keepalive_s: Seconds = 15.0
    # Event streams (and pool call streams) one session, and one credential, may hold open on one API
    # process; past it 429. 0: no cap.
    max_streams_per_session: int = Field(default=64, ge=0)
    max_streams_per_credential: int = Field(default=1_000, ge=0)
    stream_retry_ms: int = Field(default=3000, ge=0)
    # Streams ended by a shutdown are told to come back within this many ms (each a random share of it,
    # so the clients of a replica going away do not all land on the others in the same instant).
    drain_retry_ms: int = Field(default=1000, ge=1)
    # After SIGTERM the API keeps serving this long with readiness failing and connections closed after
    # each response (api/server.py), then stops listening; 0 stops listening at once.
    drain_grace_s: float = Field(default=2.0, ge=0)
    # Named in every /readyz answer when set: `switchboard up` sets a fresh one, so an API of another
    # `up` (or anything else) answering on the port is never taken for the one it started.
    instance_id: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    # A trace UI's address of one trace, `{trace_id}` where the id goes (Jaeger's
    # http://jaeger:16686/trace/{trace_id}, say): the console links each run that carries a trace id to it.
    trace_url_template: str | None = Field(default=None, max_length=2048)

    @field_validator("bootstrap_api_key")
    @classmethod
    def _bootstrap_key_shape(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not looks_like_api_key(value.get_secret_value()):
            raise ValueError("must look like swb_ak_ followed by at least 32 url-safe characters")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: str) -> str:
        for item in _items(value):
            try:
                ipaddress.ip_network(item)
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or a CIDR network (host bits zero)") from None
        return value

    @field_validator("trace_url_template")
    @classmethod
    def _trace_url_shape(cls, value: str | None) -> str | None:
        if not value:
            return None
        if TRACE_ID_PLACE not in value:
            raise ValueError(f"must contain {TRACE_ID_PLACE}, where a run's trace id goes")
        # Checked with an id in its place: the console puts only a checked id (32 hex digits) there.
        filled = urlsplit(value.replace(TRACE_ID_PLACE, "0" * 31 + "1"))
        if filled.scheme not in ("http", "https") or not filled.hostname:
            raise ValueError("must be an http or https URL with a host")
        return value

    @property
    def trusted_proxy_list(self) -> list[str]:
        """`trusted_proxies` as its items."""
        return _items(self.trusted_proxies)

    @property
    def local_api_url(self) -> str:
        """The API's URL from this machine (a wildcard bind address reached on the loopback)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host  # noqa: S104 (read, not bound)
        return f"http://{host}:{self.port}"


def _items(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]
