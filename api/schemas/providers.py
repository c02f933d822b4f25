"""Model providers."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, Field

from api.schemas.common import Strict
from broker.errors import InvalidRequest
from broker.services.providers import ProviderFormat
from common.addresses import split_base_url
from common.clouds import CREDENTIAL_LIMIT, SERVICE_ACCOUNT_LIMIT


class BedrockCloud(Strict):
    """Anthropic on AWS Bedrock (format anthropic)."""

    type: Literal["bedrock"]
    region: Annotated[str, Field(max_length=32, pattern=r"^[a-z]{2}(-[a-z]+){1,2}-[0-9]{1,2}$", examples=["us-east-1"])]


class VertexCloud(Strict):
    """Anthropic (format anthropic) or Gemini (format gemini) on Google Vertex AI."""

    type: Literal["vertex"]
    project: Annotated[str, Field(max_length=30, pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")]
    location: Annotated[
        str, Field(max_length=32, pattern=r"^(global|us|eu|[a-z]+-[a-z]+[0-9]{1,2})$", examples=["us-east5"])
    ]


class AzureCloud(Strict):
    """OpenAI on Azure (formats openai_responses and openai_chat)."""

    type: Literal["azure"]
    api_version: Annotated[
        str, Field(max_length=32, pattern=r"^([0-9]{4}-[0-9]{2}-[0-9]{2}(-preview)?|preview|latest)$")
    ]


Cloud = Annotated[BedrockCloud | VertexCloud | AzureCloud, Field(discriminator="type")]

_CLOUD_DESCRIPTION = (
    "An extension (docs/providers/clouds.md): the cloud the provider is bought through, with its options."
)
_CREDENTIALS_DESCRIPTION = (
    "An extension, write-only (never read back): the cloud's credentials, sent only to base_url. Bedrock:"
    " {aws_access_key_id, aws_secret_access_key, aws_session_token?} (without them api_key is a Bedrock API"
    ' key); Vertex: {access_token} or {service_account: "<the key JSON>"}; or "environment", the worker\'s own'
    " cloud identity, where the deployment allows it (SWITCHBOARD_CLOUD_ENVIRONMENT_CREDENTIALS)."
)
_CredentialMap = Annotated[
    dict[
        Annotated[str, Field(max_length=64)],
        Annotated[str, Field(min_length=1, max_length=max(SERVICE_ACCOUNT_LIMIT, CREDENTIAL_LIMIT))],
    ],
    Field(max_length=3),
]
CredentialsField = Annotated[
    _CredentialMap | Literal["environment"] | None, Field(description=_CREDENTIALS_DESCRIPTION)
]


class PlatformModelBody(BaseModel):
    model: str
    display_name: str
    description: str


class PlatformProviderBody(BaseModel):
    type: Literal["platform"]
    created_at: datetime
    description: str
    display_name: str
    format: ProviderFormat
    id: UUID
    models: list[PlatformModelBody]


class ByokProviderBody(BaseModel):
    type: Literal["byok"]
    created_at: datetime
    description: str
    display_name: str
    format: ProviderFormat
    id: UUID
    workspace_id: UUID
    # Extensions (docs/providers/index.md, docs/providers/clouds.md); a cloud's credentials never.
    text_only: bool = False
    cloud: Annotated[Cloud | None, Field(description=_CLOUD_DESCRIPTION)] = None


ProviderBody = Annotated[PlatformProviderBody | ByokProviderBody, Field(discriminator="type")]


class ProviderPage(BaseModel):
    items: list[ProviderBody]
    next_cursor: UUID | None


# An http(s) URL with a host (a name or a bracketed IPv6 address), maybe a port and a path: what the
# server can take apart (common/addresses.py); whether the host may be reached is decided there.
BASE_URL = r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(:[0-9]{1,5})?(/[!-~]*)?$"
_BASE_URL = re.compile(BASE_URL)


def _usable(base_url: str) -> str:
    """The document's pattern, held with words a person can act on rather than the pattern's text."""
    try:
        split_base_url(base_url)
    except InvalidRequest as refused:
        raise ValueError(refused.message.removeprefix("base_url: ")) from None
    if _BASE_URL.match(base_url) is None:
        raise ValueError(
            "must be an http or https URL: a host (a name or a bracketed IPv6 address), then an optional port"
            " and path, such as https://api.openai.com/v1"
        )
    return base_url


BaseUrl = Annotated[str, Field(max_length=2048, json_schema_extra={"pattern": BASE_URL}), AfterValidator(_usable)]


class CreateProviderBody(Strict):
    api_key: Annotated[str, Field(min_length=1, max_length=16384)]
    base_url: BaseUrl
    description: Annotated[str, Field(max_length=1024)] = ""
    display_name: Annotated[str, Field(max_length=200)]
    format: ProviderFormat
    text_only: Annotated[
        bool,
        Field(
            description="An extension: the provider takes no images, so a tool result's images reach it as their"
            " text placeholder (for a Chat Completions server whose model reads text only)"
        ),
    ] = False
    cloud: Annotated[Cloud | None, Field(description=_CLOUD_DESCRIPTION)] = None
    credentials: CredentialsField = None


class UpdateProviderBody(Strict):
    # An extension (the Subako body has no key): a new key, which a new base_url must come with.
    api_key: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=16384,
            description="A new API key (write-only, never read back). Required with a base_url that differs from"
            " the stored one: a stored key goes only to the address it was stored for.",
        ),
    ] = None
    base_url: BaseUrl | None = None
    description: Annotated[str | None, Field(max_length=1024)] = None
    display_name: Annotated[str | None, Field(max_length=200)] = None
    text_only: Annotated[
        bool | None,
        Field(
            description="An extension: the provider takes no images, so a tool result's images reach it as their"
            " text placeholder (for a Chat Completions server whose model reads text only)"
        ),
    ] = None
    cloud: Annotated[Cloud | None, Field(description=_CLOUD_DESCRIPTION)] = None
    credentials: CredentialsField = None
