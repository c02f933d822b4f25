"""The requests Switchboard makes to an MCP grant's authorization server's token endpoint: the
authorization code exchanged for tokens when the person's browser comes back to the callback (the API),
and a refresh token exchanged for fresh ones before they run out (a worker). One fetcher for both, so
both have the same safety.

The endpoint's address came from metadata a stranger's server wrote, so it gets the check every grant's
connection gets (common/addresses.py: resolved, every address judged, the connection made to the address
that was checked, so a name that answers differently a moment later reaches nothing else), follows no
redirect, is bounded in time (`EXCHANGE_TIMEOUT_S`, the whole exchange, slow trickles included) and in size
(`MAX_TOKEN_RESPONSE_BYTES`: past it the answer is refused, not read)."""

from __future__ import annotations

import asyncio
import base64
from urllib.parse import quote

import httpx2

from common.addresses import ProviderAddresses, split_base_url
from common.bounded_body import BodyRefused, bounded_body
from common.errors import AddressRefused

EXCHANGE_TIMEOUT_S = 10.0
MAX_TOKEN_RESPONSE_BYTES = 65_536
_WHAT = "the authorization server"


class ExchangeFailed(Exception):
    """The token endpoint gave no answer to read: why, in words for the person's page or the log."""


def client_auth(
    form: dict[str, str], client_id: str, client_secret: str | None, method: str | None
) -> tuple[dict[str, str], dict[str, str]]:
    """The form and headers with the client's authentication (RFC 6749 2.3.1), as the `mcp` package's
    OAuthContext.prepare_token_auth does it: a secret in a Basic header or the form, else none (PKCE)."""
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
    form = {**form, "client_id": client_id}
    if client_secret and method == "client_secret_basic":
        pair = f"{quote(client_id, safe='')}:{quote(client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    elif client_secret and method == "client_secret_post":
        form["client_secret"] = client_secret
    return form, headers


async def post_form(
    addresses: ProviderAddresses, url: str, form: dict[str, str], headers: dict[str, str]
) -> tuple[int, bytes]:
    """POST `form` to `url` at a checked address; the status and the body (at most
    MAX_TOKEN_RESPONSE_BYTES). ExchangeFailed saying why when it cannot be sent, is refused, or answers
    too much or too late."""
    try:
        host, port = split_base_url(url, "token_endpoint")
    except Exception as error:
        raise ExchangeFailed(str(error)) from None
    try:
        async with asyncio.timeout(EXCHANGE_TIMEOUT_S):
            try:
                address = await addresses.connectable(host, port, _WHAT)
            except AddressRefused as refused:
                raise ExchangeFailed(str(refused)) from None
            except (OSError, UnicodeError) as error:
                raise ExchangeFailed(f"{host} could not be resolved: {error}") from None
            return await _send(httpx2.URL(url), address, host, form, headers)
    except TimeoutError:
        raise ExchangeFailed(f"{_WHAT} did not answer within {EXCHANGE_TIMEOUT_S:g} s") from None
    except httpx2.HTTPError as error:
        raise ExchangeFailed(f"{_WHAT} could not be reached: {error}") from None


async def _send(
    url: httpx2.URL, address: str, host: str, form: dict[str, str], headers: dict[str, str]
) -> tuple[int, bytes]:
    # The URL names the checked address, so nothing resolves the name again between the check and the
    # connection; the Host header and TLS (SNI and the certificate's name) still use the name.
    pinned = url.copy_with(host=address)
    # Read as sent (a compressed answer would grow past the bound inside one chunk): none is asked for.
    headers = {**headers, "Host": url.netloc.decode("ascii"), "Accept-Encoding": "identity"}
    async with httpx2.AsyncClient(follow_redirects=False, trust_env=False, timeout=EXCHANGE_TIMEOUT_S) as http:
        request = http.build_request("POST", pinned, data=form, headers=headers, extensions={"sni_hostname": host})
        response = await http.send(request, stream=True)
        try:
            return response.status_code, await bounded_body(response, MAX_TOKEN_RESPONSE_BYTES, _WHAT)
        except BodyRefused as refused:
            raise ExchangeFailed(str(refused)) from None
        finally:
            await response.aclose()
