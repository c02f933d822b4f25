"""The clouds a workspace provider may be bought through (docs/providers/clouds.md): Anthropic on AWS Bedrock
and on Google Vertex, OpenAI on Azure, each an option of an existing format. Which cloud goes with which
format, what credentials each takes, and how both are kept in a provider's record; the API checks a
provider with these when it is created or changed, the worker reads them back.

Credentials are write-only, like a provider's `api_key`: stored in the record, sent only to the stored
base_url's origin, never rendered or logged. `environment` stands for the worker's own cloud identity (the
cloud's usual credential chain); a deployment allows it with SWITCHBOARD_CLOUD_ENVIRONMENT_CREDENTIALS, and
such a provider's base_url must then be the cloud's own host, or a workspace key holder could send the
operator's token wherever they like."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from common.codec import dumps, loads
from common.errors import InvalidRequest

# The formats each cloud serves.
CLOUD_FORMATS: dict[str, tuple[str, ...]] = {
    "bedrock": ("anthropic",),
    "vertex": ("anthropic", "gemini"),
    "azure": ("openai_responses", "openai_chat"),
}
ENVIRONMENT = "environment"
ENVIRONMENT_SETTING = "SWITCHBOARD_CLOUD_ENVIRONMENT_CREDENTIALS"
# A provider's stored credentials: a mapping of strings, the worker's environment, or none (the cloud is
# reached with the provider's api_key alone).
Credentials = dict[str, str] | Literal["environment"] | None

# The only place a service account's signed assertion may be sent to be exchanged for a token: a key
# naming another token_uri would have the worker post to an address of the key writer's choosing.
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"  # noqa: S105 (an address, not a secret)
# A Google service account key is about 2.3 KB; this leaves room and no more.
SERVICE_ACCOUNT_LIMIT = 16_384
# Its private key: Google's are RSA 2048 (about 1,700 characters); a far larger one would hold the
# worker's event loop while it is loaded.
PRIVATE_KEY_LIMIT = 4096
# The longest any other credential may be (an AWS session token runs to about 1,500 characters, a Google
# access token to about 2,000).
CREDENTIAL_LIMIT = 8_192

_CLOUD_FIELDS: dict[str, tuple[str, ...]] = {
    "bedrock": ("region",),
    "vertex": ("project", "location"),
    "azure": ("api_version",),
}
_AWS_KEYS = ("aws_access_key_id", "aws_secret_access_key")
_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com")
_AZURE_RESOURCE = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def check_format(provider_format: str, cloud: Mapping[str, str]) -> None:
    """InvalidRequest naming `cloud` when the cloud does not serve the provider's format."""
    served = CLOUD_FORMATS[cloud["type"]]
    if provider_format not in served:
        raise InvalidRequest(
            f"cloud: {cloud['type']} serves the format{'s' if len(served) > 1 else ''} {' and '.join(served)},"
            f" not {provider_format}"
        )


def check_credentials(cloud: Mapping[str, str], credentials: Credentials, *, environment_allowed: bool) -> None:
    """InvalidRequest naming `credentials` when they are not what the cloud takes (or name the worker's
    environment where the deployment does not allow it)."""
    kind = cloud["type"]
    if credentials == ENVIRONMENT:
        if not environment_allowed:
            raise InvalidRequest(
                "credentials: this deployment does not let providers use the worker's own cloud identity"
                f" ({ENVIRONMENT_SETTING} is off); send the cloud's credentials instead"
            )
        return
    if isinstance(credentials, str):
        raise InvalidRequest('credentials: an object, or "environment"')
    if kind == "bedrock":
        _check_bedrock(credentials)
    elif kind == "vertex":
        _check_vertex(credentials)
    elif credentials is not None:
        raise InvalidRequest(
            'credentials: Azure takes its key as api_key; credentials may only be "environment" (the'
            " worker's AZURE_OPENAI_API_KEY)"
        )


def _check_bedrock(credentials: dict[str, str] | None) -> None:
    if credentials is None:
        # The provider's api_key is then a Bedrock API key.
        return
    missing = [name for name in _AWS_KEYS if not credentials.get(name)]
    unknown = sorted(set(credentials) - {*_AWS_KEYS, "aws_session_token"})
    if missing or unknown:
        wrong = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}"
        raise InvalidRequest(
            "credentials: Bedrock takes aws_access_key_id, aws_secret_access_key and, for temporary keys,"
            f" aws_session_token ({wrong})"
        )
    _bounded(credentials)


def _check_vertex(credentials: dict[str, str] | None) -> None:
    shapes = '{"access_token": ...} or {"service_account": "<the key\'s JSON text>"}'
    if credentials is None:
        raise InvalidRequest(f'credentials: Vertex needs credentials: {shapes}, or "environment"')
    if set(credentials) not in ({"access_token"}, {"service_account"}) or not next(iter(credentials.values())):
        raise InvalidRequest(f"credentials: Vertex takes {shapes}")
    if "access_token" in credentials:
        _bounded(credentials)
        return
    _check_service_account(credentials["service_account"])


def _check_service_account(text: str) -> None:
    if len(text) > SERVICE_ACCOUNT_LIMIT:
        raise InvalidRequest(f"credentials.service_account: at most {SERVICE_ACCOUNT_LIMIT} characters")
    try:
        key = loads(text)
    except ValueError:
        raise InvalidRequest("credentials.service_account: not JSON (send the key file's text)") from None
    if not isinstance(key, dict) or key.get("type") != "service_account":
        raise InvalidRequest(
            "credentials.service_account: not a service account key (its type must be service_account)"
        )
    for name in ("client_email", "private_key"):
        if not isinstance(key.get(name), str) or not key[name]:
            raise InvalidRequest(f"credentials.service_account: the key has no {name}")
    if len(key["private_key"]) > PRIVATE_KEY_LIMIT:
        raise InvalidRequest(f"credentials.service_account: private_key: at most {PRIVATE_KEY_LIMIT} characters")
    if key.get("token_uri", GOOGLE_TOKEN_URI) != GOOGLE_TOKEN_URI:
        raise InvalidRequest(f"credentials.service_account: token_uri must be {GOOGLE_TOKEN_URI}")


def _bounded(credentials: Mapping[str, str]) -> None:
    for name, value in credentials.items():
        if len(value) > CREDENTIAL_LIMIT:
            raise InvalidRequest(f"credentials.{name}: at most {CREDENTIAL_LIMIT} characters")


def check_environment_base_url(cloud: Mapping[str, str], base_url: str) -> None:
    """With the worker's own identity, InvalidRequest naming `base_url` unless it is the cloud's own host
    (https, its default port) for the cloud's region or location."""
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    kind = cloud["type"]
    if kind == "bedrock":
        region = cloud["region"]
        hosts = {f"bedrock-runtime.{region}.amazonaws.com", f"bedrock-runtime-fips.{region}.amazonaws.com"}
        ok, example = host in hosts, f"https://bedrock-runtime.{region}.amazonaws.com"
    elif kind == "vertex":
        hosts = _vertex_hosts(cloud["location"])
        ok, example = host in hosts, f"https://{sorted(hosts)[0]}"
    else:
        resource = next((host.removesuffix(end) for end in _AZURE_HOSTS if host.endswith(end)), "")
        ok, example = _AZURE_RESOURCE.fullmatch(resource) is not None, "https://<resource>.openai.azure.com"
    # The host alone would let the path or query aim the identity at another method of the cloud's API
    # (the SDKs append theirs to base_url's path).
    paths = ("", "/", "/v1", "/v1/") if kind == "vertex" else ("", "/")
    plain = parts.path in paths and not parts.query and not parts.fragment and not base_url.endswith(("?", "#"))
    if not ok or not plain or parts.scheme != "https" or parts.port not in (None, 443):
        raise InvalidRequest(
            f"base_url: a provider using the worker's own cloud identity must use the cloud's own address, with"
            f" no path or query, such as {example}"
        )


def _vertex_hosts(location: str) -> set[str]:
    if location == "global":
        return {"aiplatform.googleapis.com"}
    if location in ("us", "eu"):
        return {f"aiplatform.{location}.rep.googleapis.com"}
    return {f"{location}-aiplatform.googleapis.com"}


# How a provider's record keeps them: JSON text, "" for none.


def encode_cloud(cloud: Mapping[str, str] | None) -> str:
    """The cloud's options as a record field: only the fields its type has."""
    if cloud is None:
        return ""
    kind = cloud["type"]
    return dumps({"type": kind, **{name: cloud[name] for name in _CLOUD_FIELDS[kind]}})


def decode_cloud(text: str) -> dict[str, str] | None:
    if not text:
        return None
    value: Any = loads(text)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else None


def encode_credentials(credentials: Credentials) -> str:
    if credentials is None:
        return ""
    return ENVIRONMENT if credentials == ENVIRONMENT else dumps(credentials)


def decode_credentials(text: str) -> Credentials:
    if not text:
        return None
    if text == ENVIRONMENT:
        return "environment"
    value: Any = loads(text)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else None
