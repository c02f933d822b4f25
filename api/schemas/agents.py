"""Agents, versions and security."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from api.schemas.common import JSON_NUMBER, Strict, last_of_each_name
from api.schemas.providers import BaseUrl
from broker.services.providers import SCRIPTED_MODEL, SCRIPTED_PROVIDER_ID
from broker.settings import MAX_WAIT_CEILING_S
from common.policies import Policy

# Far past any model's, and within what every JSON reader holds exactly.
MAX_TOKENS = 10_000_000
MAX_CONTEXT_WINDOW = 100_000_000
MAX_INT32 = 2**31 - 1

Slug = Annotated[str, Field(max_length=32, min_length=1, pattern=r"^[a-z0-9-]+$")]


def _not_parent(name: str) -> str:
    if name == "parent":
        raise ValueError("the grant name 'parent' is reserved")
    return name


GrantName = Annotated[Slug, AfterValidator(_not_parent), Field(json_schema_extra={"not": {"const": "parent"}})]


class AgentBody(BaseModel):
    created_at: datetime
    id: UUID
    name: str
    workspace_id: UUID


class AgentPage(BaseModel):
    items: list[AgentBody]
    next_cursor: UUID | None


class CreateAgentBody(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "support-agent"}]})

    name: Annotated[str, Field(max_length=200, min_length=1)]


ApprovalTimeout = Annotated[
    Annotated[int, Field(ge=1, le=MAX_WAIT_CEILING_S), JSON_NUMBER] | None,
    Field(
        description="An extension: an approval nobody decides within this many seconds resolves as a deny "
        "(reason `timeout`); only with require_approval; at most SWITCHBOARD_MAX_WAIT_S (absent: it waits for ever)"
    ),
]


def _timeout_needs_approval(policy: Policy, timeout: int | None) -> None:
    if timeout is not None and policy != "require_approval":
        raise ValueError(f"approval_timeout_s: only with the policy require_approval, not {policy}")


class PolicyBody(Strict):
    """An extension: a policy as an object, so an approval can be given a deadline."""

    policy: Policy
    approval_timeout_s: ApprovalTimeout = None

    @model_validator(mode="after")
    def _with_approval(self) -> PolicyBody:
        _timeout_needs_approval(self.policy, self.approval_timeout_s)
        return self


def _policy_form(value: Any) -> str:
    return "form-object" if isinstance(value, dict | PolicyBody) else "form-name"


# A policy's name, or (an extension) `{"policy": "require_approval", "approval_timeout_s": N}`: told apart
# by the JSON's kind, so a refusal speaks of the form that was sent (a `form-` tag is left out of the
# field a refusal names: api/errors.py).
PolicyValue = Annotated[
    Annotated[Policy, Tag("form-name")] | Annotated[PolicyBody, Tag("form-object")], Discriminator(_policy_form)
]


class ToolRuleBody(Strict):
    name: str
    policy: Policy
    approval_timeout_s: ApprovalTimeout = None

    @model_validator(mode="after")
    def _with_approval(self) -> ToolRuleBody:
        _timeout_needs_approval(self.policy, self.approval_timeout_s)
        return self


# Set by the MCP transport, or by HTTP itself, for every request: a grant cannot override them.
_TRANSPORT_HEADERS = frozenset(
    ("host", "content-length", "content-type", "transfer-encoding", "connection", "keep-alive", "upgrade", "te",
     "trailer", "proxy-authorization", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id")
)  # fmt: skip
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
MAX_GRANT_HEADERS = 16
MAX_MCP_GRANTS = 32


def _grant_headers(headers: dict[str, str] | None) -> dict[str, str] | None:
    if headers is None:
        return None
    if len(headers) > MAX_GRANT_HEADERS:
        raise ValueError(f"at most {MAX_GRANT_HEADERS} headers, not {len(headers)}")
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ValueError(
                f"{name[:80]!r} is not an HTTP header name (letters, digits and !#$%&'*+.^_`|~-, 64 at most)"
            )
        if name.lower() in _TRANSPORT_HEADERS:
            raise ValueError(f"{name} is set by the MCP transport and cannot be sent by a grant")
        if len(value) > 4096 or any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
            raise ValueError(f"the value of {name} must be at most 4096 characters with no control character")
    return headers


# What the document says of a grant's headers, held by _grant_headers with words a person can act on.
_HEADERS_SCHEMA = {
    "maxProperties": MAX_GRANT_HEADERS,
    "propertyNames": {"pattern": _HEADER_NAME.pattern},
    "additionalProperties": {
        "type": "string",
        "maxLength": 4096,
        "pattern": "^[^\\u0000-\\u0008\\u000a-\\u001f\\u007f]*$",
    },
}


# An OAuth scope token (RFC 6749 section 3.3): printable ASCII but space, '"' and '\'.
ScopeToken = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[\x21\x23-\x5b\x5d-\x7e]+$")]
MAX_OAUTH_SCOPES = 32


class McpOAuthBody(Strict):
    """A grant whose server wants each person's sign-in (OAuth 2.1, docs/mcp.md "Grants with OAuth")."""

    type: Literal["oauth"]
    scopes: Annotated[
        list[ScopeToken] | None,
        Field(
            max_length=MAX_OAUTH_SCOPES,
            description="The scopes asked for (default: the server's challenge, else its scopes_supported)",
        ),
    ] = None
    client_id: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=512,
            pattern=r"^[\x20-\x7e]+$",
            description="A client registered with the authorization server beforehand",
        ),
    ] = None
    client_secret: Annotated[
        str | None,
        Field(
            min_length=1,
            max_length=4096,
            pattern=r"^[\x20-\x7e]+$",
            description="That client's secret (write-only: never returned)",
        ),
    ] = None

    @model_validator(mode="after")
    def _secret_has_its_client(self) -> McpOAuthBody:
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("client_secret without client_id: a secret belongs to a registered client")
        return self


class McpGrantBody(Strict):
    name: GrantName
    # An extension of the Subako field (any string): an http(s) URL this server can reach (docs/mcp.md).
    url: BaseUrl
    default_policy: Annotated[
        PolicyValue,
        Field(description="A policy's name, or (an extension) an object with approval_timeout_s beside policy"),
    ]
    tools: list[ToolRuleBody] | None = None
    # Extensions (docs/mcp.md). The credentials are write-only: kept apart from the config, never returned,
    # sent only to this grant's address.
    timeout_s: Annotated[
        Annotated[int, Field(ge=1, le=MAX_WAIT_CEILING_S), JSON_NUMBER] | None,
        Field(
            description="How long one call of this server's tools may take (default 60 s; at most "
            "SWITCHBOARD_MAX_WAIT_S)"
        ),
    ] = None
    bearer_token: Annotated[
        str | None,
        Field(min_length=1, max_length=4096, pattern=r"^[\x21-\x7e]+$", description="Sent as Authorization: Bearer"),
    ] = None
    headers: Annotated[
        dict[str, str] | None,
        Field(
            description=f"Extra request headers (at most {MAX_GRANT_HEADERS}), such as an API key; not the ones the"
            " MCP transport sets (Host, Content-Type, Accept, Mcp-Session-Id, ...)",
            json_schema_extra=_HEADERS_SCHEMA,
        ),
        AfterValidator(_grant_headers),
    ] = None
    auth: McpOAuthBody | None = None

    @model_validator(mode="after")
    def _one_authorization(self) -> McpGrantBody:
        authorization = any(name.lower() == "authorization" for name in self.headers or {})
        if self.bearer_token and authorization:
            raise ValueError("bearer_token and an Authorization header: send one of the two")
        if self.auth is not None and (self.bearer_token or authorization):
            raise ValueError("auth and a bearer_token or Authorization header: the OAuth token is the authorization")
        return self

    def credentials(self) -> dict[str, str]:
        """The headers this grant's requests carry (its token as Authorization)."""
        sent = dict(self.headers or {})
        if self.bearer_token:
            sent["Authorization"] = f"Bearer {self.bearer_token}"
        return sent

    def secrets(self) -> dict[str, Any]:
        """What of this grant is kept apart from its config and never returned: its headers and its
        OAuth client's secret."""
        kept: dict[str, Any] = {}
        if sent := self.credentials():
            kept["headers"] = sent
        if self.auth is not None and self.auth.client_secret is not None:
            kept["oauth_client_secret"] = self.auth.client_secret
        return kept


class SandboxEnvironment(Strict):
    type: Literal["platform"]
    release: Slug


class SandboxNetwork(Strict):
    type: Literal["unrestricted", "none"]


class SandboxGrantBody(Strict):
    name: GrantName
    environment: SandboxEnvironment
    default_policy: Policy
    network: SandboxNetwork | None = None
    tools: list[ToolRuleBody] | None = None


class LatestPin(Strict):
    type: Literal["latest"]


class PinnedPin(Strict):
    type: Literal["pinned"]
    number: Annotated[int, Field(ge=1, le=MAX_INT32), JSON_NUMBER]


class SkillGrantBody(Strict):
    name: GrantName
    skill_id: UUID
    version: Annotated[LatestPin | PinnedPin, Field(discriminator="type")]


class AnthropicThinking(Strict):
    budget_tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS), JSON_NUMBER]


class AnthropicModel(Strict):
    format: Literal["anthropic"]
    model: Annotated[str, Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS), JSON_NUMBER]
    thinking: AnthropicThinking | None = None


class OpenaiResponsesModel(Strict):
    format: Literal["openai_responses"]
    model: Annotated[str, Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS), JSON_NUMBER]
    context_window: Annotated[int, Field(ge=0, le=MAX_CONTEXT_WINDOW), JSON_NUMBER]
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None


ToolChoice = Literal["auto", "required", "none"]


class OpenaiChatModel(Strict):
    """An extension format (docs/providers/openai-chat.md): any Chat Completions endpoint."""

    format: Literal["openai_chat"]
    model: Annotated[str, Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS), JSON_NUMBER]
    context_window: Annotated[int, Field(ge=0, le=MAX_CONTEXT_WINDOW), JSON_NUMBER]
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    tool_choice: Annotated[
        ToolChoice | None, Field(description="auto (the default), required (a tool every step) or none")
    ] = None


# Gemini 2.5 Pro's largest thinking budget, the largest of the models that take one (Flash's is 24576).
GEMINI_MAX_THINKING = 32_768


class GeminiThinking(Strict):
    budget_tokens: Annotated[
        int,
        Field(ge=0, le=GEMINI_MAX_THINKING, description="Tokens the model may think with; 0 turns thinking off"),
        JSON_NUMBER,
    ]


class GeminiModel(Strict):
    """An extension format (docs/providers/gemini.md): Google's Gemini, by API key or on Vertex AI."""

    format: Literal["gemini"]
    model: Annotated[str, Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=0, le=MAX_TOKENS), JSON_NUMBER]
    thinking: GeminiThinking | None = None
    tool_choice: Annotated[
        ToolChoice | None, Field(description="auto (the default), required (a tool every step) or none")
    ] = None


ModelBody = Annotated[
    AnthropicModel | OpenaiResponsesModel | OpenaiChatModel | GeminiModel, Field(discriminator="format")
]


class Debounce(Strict):
    strategy: Literal["debounce"]
    debounce_ms: Annotated[int, Field(ge=0, le=60_000), JSON_NUMBER] = 750


MessageConcurrency = Literal["steer", "queue", "latest", "merge", "drop"] | Debounce
# A model-visible tool name, or a pattern ending in `*` (`client__web__*`, `*`).
ToolPattern = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]*\*?$")]
ServerToolName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


def _each_name_once(names: list[str] | None) -> list[str] | None:
    return None if names is None else list(dict.fromkeys(names))


REPEATS = "A name repeated: the last definition wins"


# The built-in scripted model: a version any deployment can publish.
SCRIPTED_EXAMPLE: dict[str, Any] = {
    "model_provider_id": SCRIPTED_PROVIDER_ID,
    "model": {"format": "openai_responses", "model": SCRIPTED_MODEL, "max_tokens": 1024, "context_window": 8192},
}


class PublishAgentVersionBody(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [SCRIPTED_EXAMPLE]})

    model_provider_id: UUID
    model: ModelBody
    system_prompt: str | None = None
    # Each grant is a server a worker connects to for every step: 32 is far past what a model can choose
    # among, and bounds what one version makes a worker hold.
    mcp: Annotated[
        list[McpGrantBody] | None,
        Field(max_length=MAX_MCP_GRANTS, description=f"At most {MAX_MCP_GRANTS}. {REPEATS}"),
        AfterValidator(last_of_each_name),
    ] = None
    sandboxes: Annotated[
        list[SandboxGrantBody] | None, Field(description=REPEATS), AfterValidator(last_of_each_name)
    ] = None
    skills: Annotated[list[SkillGrantBody] | None, Field(description=REPEATS), AfterValidator(last_of_each_name)] = None
    # Extensions (docs/agents-and-models.md).
    message_concurrency: Annotated[
        MessageConcurrency | None,
        Field(
            description="What input during an active run does: steer (default), queue, latest, merge, drop, debounce"
        ),
    ] = None
    client_tool_policies: Annotated[
        dict[ToolPattern, PolicyValue] | None,
        Field(
            max_length=256,
            description="allow / require_approval / deny by model-visible name or `prefix*`; a policy may be an "
            'object {"policy": "require_approval", "approval_timeout_s": N}',
        ),
    ] = None
    server_tools: Annotated[
        list[ServerToolName] | None,
        Field(max_length=64, description="The deployment's server tools this agent offers (a repeat counts once)"),
        AfterValidator(_each_name_once),
    ] = None
    server_tool_policies: Annotated[dict[ToolPattern, PolicyValue] | None, Field(max_length=256)] = None
    max_steps: Annotated[
        Annotated[int, Field(ge=1, le=1000), JSON_NUMBER] | None, Field(description="Model steps per run (default 25)")
    ] = None


class AgentVersionBody(BaseModel):
    agent_id: UUID
    config: dict[str, Any]
    created_at: datetime
    id: UUID
    model_provider_id: UUID
    version: int


class AgentVersionPage(BaseModel):
    items: list[AgentVersionBody]
    next_cursor: UUID | None


# A browser Origin as browsers send it: scheme, host (a name, or an IPv6 address in brackets) and an
# optional port; no path, not even a trailing slash.
_H16 = "[0-9A-Fa-f]{1,4}"
_IPV6 = "|".join(
    (
        f"({_H16}:){{7}}{_H16}",
        f"({_H16}:){{1,7}}:",
        *(f"({_H16}:){{1,{6 - n}}}(:{_H16}){{1,{n + 1}}}" for n in range(6)),
        f":((:{_H16}){{1,7}}|:)",
    )
)
_PORT = "(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
ORIGIN_PATTERN = rf"^https?://([A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*|\[({_IPV6})\])(:{_PORT})?$"
Origin = Annotated[
    str,
    Field(
        max_length=2048,
        pattern=ORIGIN_PATTERN,
        description="A browser Origin: scheme://host[:port], no path or trailing slash",
    ),
]


class PutAgentSecurityBody(Strict):
    allowed_origins: Annotated[list[Origin] | None, Field(max_length=32)] = None


class AgentSecurityBody(BaseModel):
    allowed_origins: list[str]
