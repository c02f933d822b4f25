"""The HTTP client a workspace provider's SDK, or an agent's MCP grant, sends through (the model SDKs and
the `mcp` client each take an `http_client`; an MCP grant's wraps the pinned transport in its bounds,
workers/mcp/wire.py): every request goes to the origin the credential was stored for, to an address
resolved and checked for that very connection (common/addresses.py), so neither a redirect nor a name
whose answer changes after a check (DNS rebinding) takes the key, the transcript or the system prompt
anywhere else."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence

import httpx2

from broker.errors import AddressRefused
from common.addresses import ProviderAddresses
from workers.bounded_stream import CountedStream

# An error answer is read for its status and message only: past this the rest of its body is not read,
# so whatever answers cannot make the worker hold a body of any size (an error JSON with a message of a
# mebibyte still parses whole; its message is cut later, workers/models/base.py).
ERROR_BODY_LIMIT = 2 * 1_048_576


class _Capped(CountedStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int) -> None:
        super().__init__(stream)
        self._limit = limit

    def passed(self, chunk: bytes, ends: Sequence[int]) -> bytes:
        self.ended = self.read >= self._limit
        return chunk[: len(chunk) - max(0, self.read - self._limit)]


def _port(url: httpx2.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


class _PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends to the origin of `base_url` only, connecting to the address its check approved; `what` names
    the destination in refusals ("the model provider", "the MCP server")."""

    def __init__(
        self,
        base_url: str,
        addresses: ProviderAddresses,
        what: str = "the model provider",
        verify: ssl.SSLContext | None = None,
    ) -> None:
        url = httpx2.URL(base_url)
        self._origin = (url.scheme, url.raw_host, _port(url))
        self._addresses = addresses
        self._what = what
        self._http = httpx2.AsyncHTTPTransport() if verify is None else httpx2.AsyncHTTPTransport(verify=verify)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if (url.scheme, url.raw_host, _port(url)) != self._origin:
            raise AddressRefused(
                f"{self._what}'s address is refused: a request for {url.scheme}://{url.host}:{_port(url)}"
                " is not for the address its credentials were stored for"
            )
        host = url.raw_host.decode("ascii")
        try:
            address = await self._addresses.connectable(host, _port(url), self._what)
        except (OSError, UnicodeError, TimeoutError) as error:
            reason = str(error) or "no answer in time"
            raise httpx2.ConnectError(f"{host} could not be resolved: {reason}", request=request) from error
        # The URL names the checked address, so nothing resolves the name again between the check and the
        # connection; the Host header and TLS (SNI and the certificate's name) still use the name.
        pinned = httpx2.Request(
            request.method,
            url.copy_with(host=address),
            headers=request.headers,
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": host},
        )
        response = await self._http.handle_async_request(pinned)
        if response.status_code >= 400 and isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _Capped(response.stream, ERROR_BODY_LIMIT)
        return response

    async def aclose(self) -> None:
        await self._http.aclose()


def pinned_client(
    base_url: str,
    addresses: ProviderAddresses,
    timeout_s: float,
    what: str = "the model provider",
    headers: dict[str, str] | None = None,
    around: Callable[[httpx2.AsyncBaseTransport], httpx2.AsyncBaseTransport] | None = None,
    verify: ssl.SSLContext | None = None,
) -> httpx2.AsyncClient:
    """A client for a workspace provider or an MCP grant: pinned, and no redirects followed (a redirect
    would carry the credential's header to wherever it points). `what` names the destination in refusals,
    `headers` go with every request (a grant's credentials), and `around` wraps the pinned transport in
    one of the caller's. `verify`: a TLS context to share (building one reads the CA bundle, tens of ms of
    the event loop: a caller making many clients makes it once); None builds the default one."""
    transport: httpx2.AsyncBaseTransport = _PinnedTransport(base_url, addresses, what, verify)
    if around is not None:
        transport = around(transport)
    return httpx2.AsyncClient(
        transport=transport, follow_redirects=False, timeout=timeout_s, trust_env=False, headers=headers
    )


def refused(error: BaseException) -> AddressRefused | None:
    """The address refusal behind an SDK's error, if that is what it was (an SDK may wrap what the
    transport raised, or let it through)."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, AddressRefused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
