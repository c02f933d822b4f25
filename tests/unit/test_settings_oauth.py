"""The settings an MCP grant with OAuth reads: where the deployment is reached and how long a sign-in may
take, each refused naming itself when malformed."""

from __future__ import annotations

import secrets

import pytest
from pydantic import SecretStr, ValidationError

from common.oauth_addresses import callback_url, client_metadata_url
from common.settings import ProcessSettings

# Fixed (made once by secrets.token_urlsafe(31), (32) and (48)): a test's parameters must be the same in
# every pytest-xdist worker, which collects them each.
_TOKEN_31 = "xLLlH9eq_3-H4CaHxJCuuBwXaV2waz2YDVe7Ov32Sw"
_TOKEN_32 = "GJfCjzjMQf3alQ6W-zKwzUvvo0QQTEnm9sYQhovr4NY"
_TOKEN_48 = "2A7Z7OnADUW4tE26u2_vkosvBX3hD_mDzHftssFY9phDjOxWgTTH5SNodAL1AbsI"


def test_the_defaults_wait_a_day_and_know_no_public_url() -> None:
    settings = ProcessSettings()
    assert settings.public_url is None
    assert settings.mcp_authorization_timeout_s == 86_400


def test_a_token_urlsafe_secret_and_an_https_public_url_are_taken() -> None:
    settings = ProcessSettings(
        secret_key=SecretStr(secrets.token_urlsafe(32)),
        public_url="https://switchboard.example.com/base",
    )
    assert str(settings.public_url) == "https://switchboard.example.com/base"


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"public_url": "ftp://example.com"}, "public_url"),
        ({"public_url": "https://example.com/?a=1"}, "no credentials, query or fragment"),
        ({"public_url": "https://example.com/#top"}, "no credentials, query or fragment"),
        ({"public_url": "https://user:pw@example.com"}, "no credentials, query or fragment"),
        ({"mcp_authorization_timeout_s": 0}, "mcp_authorization_timeout_s"),
        ({"mcp_authorization_timeout_s": 2_592_001}, "less than or equal to 2592000"),
    ],
)
def test_bad_values_are_refused_naming_the_setting(values: dict[str, object], named: str) -> None:
    with pytest.raises(ValidationError) as refused:
        ProcessSettings(**values)  # type: ignore[arg-type]
    assert named in str(refused.value)


@pytest.mark.parametrize("given", ["https://sb.example.com", "https://sb.example.com/", "https://sb.example.com/x/"])
def test_the_callback_and_metadata_addresses_sit_under_the_public_url(given: str) -> None:
    public_url = ProcessSettings(public_url=given).public_url
    assert public_url is not None
    base = given.rstrip("/")
    assert callback_url(public_url) == base + "/v1/mcp/oauth/callback"
    assert client_metadata_url(public_url) == base + "/v1/mcp/oauth/client-metadata.json"


@pytest.mark.parametrize(
    "value",
    ["x" * 42, "shared-" * 6, "a+b/" * 12, "!" * 64, _TOKEN_31, _TOKEN_32[:-1] + "*"],
)
def test_a_secret_key_not_32_url_safe_base64_bytes_is_refused(value: str) -> None:
    with pytest.raises(ValidationError) as refused:
        ProcessSettings(secret_key=SecretStr(value))
    assert "secret_key" in str(refused.value)
    assert "url-safe base64" in str(refused.value)
    assert value not in str(refused.value)


@pytest.mark.parametrize("value", [_TOKEN_32, _TOKEN_48, "A" * 43 + "=", "shared-" * 8])
def test_url_safe_base64_of_32_bytes_or_more_is_taken(value: str) -> None:
    assert ProcessSettings(secret_key=SecretStr(value)).secret_key == SecretStr(value)
