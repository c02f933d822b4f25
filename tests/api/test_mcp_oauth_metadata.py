"""The Client ID Metadata Document an authorization server fetches for an MCP grant's OAuth flow:
served without a credential under `SWITCHBOARD_PUBLIC_URL`, its client id its own address."""

from __future__ import annotations

import httpx
import pytest
from mcp.client.auth.utils import is_valid_client_metadata_url
from mcp.shared.auth import OAuthClientMetadata

from switchboard.settings import Settings
from tests.api_client import Api, running_api

PATH = "/v1/mcp/oauth/client-metadata.json"


async def test_without_a_public_url_there_is_no_document(api: Api) -> None:
    missing = await api.key.get(PATH)
    assert missing.status_code == 404
    assert "SWITCHBOARD_PUBLIC_URL" in missing.json()["error"]["message"]


@pytest.mark.parametrize("public_url", ["https://switchboard.example.com/base/", "http://127.0.0.1:9"])
async def test_the_document_names_itself_and_the_callback(
    settings: Settings, redis_url: str, api_key: str, public_url: str
) -> None:
    update: dict[str, object] = {"public_url": public_url}
    async with (
        running_api(settings, redis_url, api_key, update, worker=False) as api,
        httpx.AsyncClient(base_url=api.key.base_url) as anonymous,
    ):
        served = await anonymous.get(PATH)
    assert served.status_code == 200, served.text
    assert served.headers["cache-control"] == "public, max-age=3600"
    document = served.json()
    base = public_url.rstrip("/")
    assert document["client_id"] == base + PATH
    assert document["redirect_uris"] == [base + "/v1/mcp/oauth/callback"]
    assert document["token_endpoint_auth_method"] == "none"
    assert document["grant_types"] == ["authorization_code", "refresh_token"]
    assert document["response_types"] == ["code"]
    # What the `mcp` client itself takes as a client metadata document (and its address, when https).
    OAuthClientMetadata.model_validate(document)
    assert is_valid_client_metadata_url(document["client_id"]) == public_url.startswith("https")
