"""What a model step takes (the request) and gives (one assistant turn), and how it fails."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from broker.services.runs import PlannedCall
from common.addresses import ProviderAddresses
from common.events.blocks import document_text
from common.events.build import Block, image_text, text_block, thinking_block, tool_call_block
from common.events.catalogue import MessageBlock

if TYPE_CHECKING:
    from workers.config import RunConfig
    from workers.settings import WorkerSettings


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: the model-visible name, its description, its JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


# What of a provider's own text reaches run_failed: its error message, cut to this many characters (an
# error body can be of any size, and the rest of it is the provider's business, not the session's).
MESSAGE_LIMIT = 500


def provider_text(value: object, fallback: str, limit: int = MESSAGE_LIMIT) -> str:
    """A message or code a provider sent, as run_failed shows it: text only, at most `limit` characters
    (and an ellipsis); `fallback` when it sent none."""
    if not isinstance(value, str) or not value.strip():
        return fallback
    return value if len(value) <= limit else value[:limit] + "…"


class ModelError(Exception):
    """The model call failed for good; the run ends with `run_failed` carrying this message."""


class TransientModelError(ModelError):
    """A failure worth trying again (429, 5xx, a timeout, a dropped connection)."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    call_id: str
    text: str
    is_error: bool
    # Images a client returned with the text: (media type, base64 data) each.
    images: tuple[tuple[str, str], ...] = ()
    # PDF resources embedded in the result (a wire that takes documents beside a call's output gets them;
    # the others their placeholder, `without_documents`): (uri, base64 data) each.
    documents: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Message:
    """One entry of the conversation as the model sees it."""

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    # An assistant message's blocks as the log holds them (read back typed: common.events.read).
    content: list[MessageBlock] = field(default_factory=list)
    calls: list[PlannedCall] = field(default_factory=list)
    result: ToolOutcome | None = None


def without_images(transcript: list[Message]) -> list[Message]:
    """The transcript for a provider marked text-only: each result's images as their text placeholders
    (`[image/png, 48 KB]`) after its text, so the model still learns they came and what they were."""

    def folded(result: ToolOutcome) -> ToolOutcome:
        names = [image_text(media_type, data) for media_type, data in result.images]
        return replace(result, text="\n".join([result.text, *names]).strip(), images=())

    return [replace(m, result=folded(m.result)) if m.result is not None and m.result.images else m for m in transcript]


def without_documents(transcript: list[Message]) -> list[Message]:
    """The transcript for a wire that takes no documents in a call's output: each result's PDFs as their
    placeholder (`[resource: file:///a.pdf, application/pdf, 30 KiB, not shown to this model]`) after its
    text."""

    def folded(result: ToolOutcome) -> ToolOutcome:
        names = [document_text(uri, data) for uri, data in result.documents]
        return replace(result, text="\n".join([result.text, *names]).strip(), documents=())

    return [
        replace(m, result=folded(m.result)) if m.result is not None and m.result.documents else m for m in transcript
    ]


KIB = 1_024
MIB = 1_048_576
# Room for one event's envelope (its ids, names, the SSE framing) beside the arguments it may carry.
_ENVELOPE = 64 * KIB
# On the wire a fragment carries more than its text: ids, names, the JSON around them, and the padding
# some servers add (OpenAI's `obfuscation`).
_FRAGMENT_WIRE = KIB


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """What one step's model stream may carry (docs/configuration.md): `text_bytes` of text and reasoning
    (and, apart, of all its calls' arguments together), `argument_bytes` of one call's arguments,
    `fragments` of any kind, and `calls` tool calls."""

    text_bytes: int = 8 * MIB
    argument_bytes: int = MIB
    fragments: int = 20_000
    calls: int = 128

    @classmethod
    def of(cls, settings: WorkerSettings) -> StreamLimits:
        """The limits a worker's settings name."""
        return cls(
            settings.model_max_text_bytes,
            settings.model_max_argument_bytes,
            settings.model_max_fragments,
            settings.model_max_calls,
        )

    @property
    def event_bytes(self) -> int:
        """The most one event may hold on the wire: the largest a server sends whole is one call's
        arguments (a Chat Completions or Gemini call in one fragment), escaped as a JSON string (up to
        twice their size), in its envelope."""
        return 2 * self.argument_bytes + _ENVELOPE

    @property
    def response_bytes(self) -> int:
        """The most one attempt's responses may hold on the wire: what the text and argument bounds let
        through, with room for servers that repeat it (the Responses API sends an item's text again when
        it is done, and the whole output once more at the end) and for each fragment's envelope."""
        return 4 * (self.text_bytes + self.event_bytes) + _FRAGMENT_WIRE * self.fragments


@dataclass(frozen=True, slots=True)
class ModelRequest:
    config: RunConfig
    transcript: list[Message]
    tools: list[ToolSpec]
    # What the model's stream may carry (workers/models/bounds.py counts it as it arrives).
    limits: StreamLimits = StreamLimits()

    def transcript_for(self, text_only: bool, documents: bool = False) -> list[Message]:
        """The transcript as a provider takes it: with images folded to text where it reads none, and PDFs
        where its wire or the provider takes no documents."""
        transcript = without_images(self.transcript) if text_only else self.transcript
        return transcript if documents and not text_only else without_documents(transcript)


USAGE_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens")


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens one model call used, as its provider counted them; None where it did not say.
    `input_tokens` includes the cached ones, `output_tokens` the reasoning ones (as every provider here
    counts them, or is made to)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    reasoning_tokens: int | None = None

    def fields(self) -> dict[str, int]:
        """The counts the provider gave, by name."""
        found = {name: getattr(self, name) for name in USAGE_FIELDS}
        return {name: int(value) for name, value in found.items() if value is not None}


# Past this a count is nonsense, whoever sent it: a run's sum of counts stays far inside what Redis's
# HINCRBY and Lua's doubles hold exactly (commit_step.lua adds them).
COUNT_LIMIT = 2**40


def count(value: object) -> int | None:
    """A provider's token count as an int, or None when it sent none (or nonsense)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < COUNT_LIMIT:
        return value
    return None


@dataclass(frozen=True, slots=True)
class Turn:
    """What one model step produced: the assistant message's blocks and the tool calls among them."""

    content: list[Block]
    calls: list[PlannedCall]
    model: str | None
    usage: Usage | None = None
    # Why the model stopped, as its provider said it (`end_turn`, `tool_calls`, `MAX_TOKENS`, ...); None
    # when it did not say.
    finish_reason: str | None = None


class TurnBuilder:
    """Assembles a turn's blocks in order; a tool call adds its block and its planned call together."""

    def __init__(self) -> None:
        self.content: list[Block] = []
        self.calls: list[PlannedCall] = []

    def text(self, text: str) -> None:
        if text:
            self.content.append(text_block(text))

    def thinking(self, thinking: str, *, redacted: bool = False, signature: str | None = None) -> None:
        self.content.append(thinking_block(thinking, redacted=redacted, signature=signature))

    def call(self, call_id: str, name: str, arguments: dict[str, Any], invalid: str = "") -> None:
        self.calls.append(PlannedCall(call_id, name, arguments, invalid))
        self.content.append(tool_call_block(call_id, name, arguments))

    def turn(self, model: str | None, usage: Usage | None = None, finish_reason: str | None = None) -> Turn:
        return Turn(self.content, self.calls, model, usage, finish_reason)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how a model client reaches its provider."""

    base_url: str
    api_key: str = field(repr=False)
    timeout_s: float
    # The address check every connection to a workspace provider goes through; None for the platform's
    # own providers, whose URLs are the operator's.
    addresses: ProviderAddresses | None = None
    # A cloud the provider is bought through (docs/providers/clouds.md), with its non-secret options:
    # {"type": "bedrock" | "vertex" | "azure", ...}; None for the provider's own API.
    cloud: Mapping[str, Any] | None = None
    # The cloud's credentials (write-only, never logged); None: the worker's environment's.
    credentials: Mapping[str, str] | None = field(default=None, repr=False)
    # The provider takes no images: a tool result's images reach it as their text placeholder.
    text_only: bool = False


class DeltaSink(Protocol):
    """Where a model sends what it streams, as it arrives: text, and each tool call's arguments."""

    def text(self, piece: str) -> None: ...

    def reasoning(self, piece: str) -> None:
        """A fragment of what the model reasons, where the provider streams it."""

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        """A fragment of the arguments of the turn's `index`-th tool call (from 0), `name` the tool's
        model-visible name (never a provider alias)."""

    def restart(self) -> None:
        """What was streamed so far is void (a failed attempt that will be tried again)."""


class Model(Protocol):
    async def turn(self, request: ModelRequest, deltas: DeltaSink) -> Turn: ...

    async def aclose(self) -> None: ...
