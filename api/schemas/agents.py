"""Agents, versions and security."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from uuid import UUID

from pydantic import AfterValidator, BaseModel, Field

from api.schemas.common import Strict

Policy = Literal["allow", "require_approval", "deny"]
GrantName = Annotated[str, Field(max_length=32, min_length=1, pattern=r"^[a-z0-9-]+$")]


class AgentBody(BaseModel):
    created_at: datetime
    id: UUID
    name: str
    workspace_id: UUID


class AgentPage(BaseModel):
    items: list[AgentBody]
    next_cursor: UUID | None


class CreateAgentBody(Strict):
    name: Annotated[str, Field(max_length=200, min_length=1)]


class ToolRuleBody(Strict):
    name: str
    policy: Policy


class McpGrantBody(Strict):
    name: GrantName
    url: str
    default_policy: Policy
    tools: list[ToolRuleBody] | None = None


class SandboxEnvironment(Strict):
    type: Literal["platform"]
    release: GrantName


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
    number: Annotated[int, Field(ge=1)]


class SkillGrantBody(Strict):
    name: GrantName
    skill_id: UUID
    version: Annotated[LatestPin | PinnedPin, Field(discriminator="type")]


class AnthropicThinking(Strict):
    budget_tokens: Annotated[int, Field(ge=0)]


class AnthropicModel(Strict):
    format: Literal["anthropic"]
    model: Annotated[str, Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=0)]
    thinking: AnthropicThinking | None = None


class OpenaiResponsesModel(Strict):
    format: Literal["openai_responses"]
    model: Annotated[str, Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=0)]
    context_window: Annotated[int, Field(ge=0)]
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None


def _unique_names(grants: list[Any] | None) -> list[Any] | None:
    names = [grant.name for grant in grants or []]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"grant names must be unique; repeated: {', '.join(duplicates)}")
    if "parent" in names:
        raise ValueError("the grant name 'parent' is reserved")
    return grants


class Debounce(Strict):
    strategy: Literal["debounce"]
    debounce_ms: Annotated[int, Field(ge=0, le=60_000)] = 750


MessageConcurrency = Literal["steer", "queue", "latest", "merge", "drop"] | Debounce
# A model-visible tool name, or a pattern ending in `*` (`client__web__*`, `*`).
ToolPattern = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]*\*?$")]
ServerToolName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


def _unique_tools(names: list[str] | None) -> list[str] | None:
    if names is not None and len(set(names)) != len(names):
        raise ValueError("server tool names must be unique")
    return names


class PublishAgentVersionBody(Strict):
    model_provider_id: UUID
    model: Annotated[AnthropicModel | OpenaiResponsesModel, Field(discriminator="format")]
    system_prompt: str | None = None
    mcp: Annotated[list[McpGrantBody] | None, AfterValidator(_unique_names)] = None
    sandboxes: Annotated[list[SandboxGrantBody] | None, AfterValidator(_unique_names)] = None
    skills: Annotated[list[SkillGrantBody] | None, AfterValidator(_unique_names)] = None
    # Extensions (CONTRACT section 5).
    message_concurrency: Annotated[
        MessageConcurrency | None,
        Field(
            description="What input during an active run does: steer (default), queue, latest, merge, drop, debounce"
        ),
    ] = None
    client_tool_policies: Annotated[
        dict[ToolPattern, Policy] | None,
        Field(max_length=256, description="allow / require_approval / deny by model-visible name or `prefix*`"),
    ] = None
    server_tools: Annotated[
        list[ServerToolName] | None,
        Field(max_length=64, description="The deployment's server tools this agent offers"),
        AfterValidator(_unique_tools),
    ] = None
    server_tool_policies: Annotated[dict[ToolPattern, Policy] | None, Field(max_length=256)] = None
    max_steps: Annotated[int | None, Field(ge=1, le=1000, description="Model steps per run (default 25)")] = None


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


def _origin(value: str) -> str:
    parts = urlsplit(value)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path
        or parts.query
        or parts.fragment
        or parts.username
        or value != f"{parts.scheme}://{parts.netloc}"
    ):
        raise ValueError(f"{value!r} is not a browser Origin (scheme://host[:port], no path or trailing slash)")
    return value


Origin = Annotated[str, Field(max_length=2048), AfterValidator(_origin)]


class PutAgentSecurityBody(Strict):
    allowed_origins: Annotated[list[Origin] | None, Field(max_length=32)] = None


class AgentSecurityBody(BaseModel):
    allowed_origins: list[str]
