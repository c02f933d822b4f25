"""The Anthropic Messages API, streamed, through the official `anthropic` package."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2

from broker.errors import AddressRefused
from common.events.blocks import DOCUMENT_TYPE
from common.events.catalogue import TextBlock, ThinkingBlock, ToolCallBlock
from workers.models.aliases import Aliases
from workers.models.assembler import Assembler
from workers.models.base import (
    DeltaSink,
    Endpoint,
    Message,
    ModelError,
    ModelRequest,
    TransientModelError,
    Turn,
    Usage,
    count,
    provider_text,
)
from workers.models.bounds import StreamBounds, passed_bound
from workers.models.clouds import AnthropicCloudClient, anthropic_on_cloud, cloud_failure
from workers.models.retry import RetryLater
from workers.models.wire import model_client
from workers.pinned import refused
from workers.retry_after import retry_after_s

# Error types Anthropic reports (in a status body or a mid-stream `error` event) that are worth retrying,
# and Bedrock's names for the same (a mid-stream exception frame, which the SDK reports as an `error` event).
_TRANSIENT_TYPES = {
    "overloaded_error",
    "api_error",
    "rate_limit_error",
    "timeout_error",
    "throttlingException",
    "serviceUnavailableException",
    "internalServerException",
    "modelStreamErrorException",
}


def _assistant_blocks(message: Message, aliases: Aliases) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock) and block.data.text:
            blocks.append({"type": "text", "text": block.data.text})
        elif isinstance(block, ToolCallBlock):
            call = block.data
            name = aliases.outward(call.name)
            blocks.append({"type": "tool_use", "id": call.id, "name": name, "input": call.arguments})
        elif isinstance(block, ThinkingBlock) and block.data.redacted:
            blocks.append({"type": "redacted_thinking", "data": block.data.thinking})
        # Thinking goes back only with its signature, which the API checks.
        elif isinstance(block, ThinkingBlock) and block.data.signature:
            thought = block.data
            blocks.append({"type": "thinking", "thinking": thought.thinking, "signature": thought.signature})
    return blocks


def to_messages(transcript: list[Message], aliases: Aliases) -> list[dict[str, Any]]:
    """The conversation as Messages API turns: roles alternate, tool results ride in user turns."""
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for message in transcript:
        if message.role == "user" and message.text:
            add("user", [{"type": "text", "text": message.text}])
        elif message.role == "assistant":
            add("assistant", _assistant_blocks(message, aliases))
        elif message.role == "tool" and message.result is not None:
            result = message.result
            content: str | list[dict[str, Any]] = result.text
            if result.images or result.documents:
                # An image a client returned reaches the model as an image block in the tool result, a PDF
                # as a document block.
                content = [{"type": "text", "text": result.text}] if result.text else []
                content += [
                    {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
                    for media_type, data in result.images
                ]
                content += [
                    {"type": "document", "source": {"type": "base64", "media_type": DOCUMENT_TYPE, "data": data}}
                    | {"title": uri[:500]}
                    for uri, data in result.documents
                ]
            block = {"type": "tool_result", "tool_use_id": result.call_id, "content": content}
            add("user", [{**block, "is_error": result.is_error}])
    return turns


def _error(error: anthropic.APIError) -> ModelError:
    # The wire guard's bound, which the SDK reports as a connection error (that would be retried).
    passed = passed_bound(error)
    if passed is not None:
        return passed
    refusal = refused(error)
    if refusal is not None:
        return ModelError(refusal.message)
    if isinstance(error, anthropic.APIConnectionError):
        cause = f" ({error.__cause__})" if isinstance(error.__cause__, httpx2.ConnectError) else ""
        return TransientModelError(f"Anthropic could not be reached: {error.message}{cause}")
    body = error.body if isinstance(error.body, dict) else {}
    detail: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else body
    kind = provider_text(detail.get("type"), "", limit=64) or None
    # The provider's own message; never the SDK's text for a status error, which holds the whole body.
    fallback = error.response.reason_phrase if isinstance(error, anthropic.APIStatusError) else error.message
    text = provider_text(detail.get("message"), provider_text(fallback, "no message"))
    status = getattr(error, "status_code", 0)
    if status == 429 or status >= 500 or kind in _TRANSIENT_TYPES:
        response = getattr(error, "response", None)
        retry_after = retry_after_s(response.headers.get("retry-after") if response is not None else None)
        return RetryLater(f"Anthropic answered {status} {kind or ''}: {text}".replace("  ", " "), retry_after)
    return ModelError(f"Anthropic refused the request ({status}): {text}")


class _Counts:
    """The usage of one message: message_start carries the input counts, message_delta the output so far
    (and, from some servers, the input again): the latest non-null count of each wins. Anthropic counts
    cached input apart from `input_tokens`; here the input includes it."""

    _NAMES = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, usage: Any) -> Usage | None:
        """The usage so far, with what `usage` (if any) says."""
        for name in self._NAMES if usage is not None else ():
            value = count(getattr(usage, name, None))
            if value is not None:
                self._counts[name] = value
        if not self._counts:
            return None
        read, written = self._counts.get("cache_read_input_tokens"), self._counts.get("cache_creation_input_tokens")
        fresh = self._counts.get("input_tokens")
        total = None if fresh is None else fresh + (read or 0) + (written or 0)
        return Usage(input_tokens=total, output_tokens=self._counts.get("output_tokens"), cached_input_tokens=read)


class _Reader:
    """A Messages stream's events, fed to the assembler: each content block under its index."""

    def __init__(self, assembler: Assembler) -> None:
        self._assembler = assembler
        self._counts = _Counts()
        # Block index -> its type, as content_block_start said (a delta of another kind is not its own).
        self._kinds: dict[int, str] = {}

    def feed(self, event: Any) -> None:
        kind = event.type
        if kind == "message_start":
            self._assembler.model(event.message.model)
            self._assembler.usage(self._counts.add(getattr(event.message, "usage", None)))
        elif kind == "message_delta":
            self._assembler.usage(self._counts.add(getattr(event, "usage", None)))
            self._assembler.finish(getattr(getattr(event, "delta", None), "stop_reason", None))
        elif kind == "content_block_start":
            self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            self._delta(event.index, event.delta)

    def _start(self, index: int, content: Any) -> None:
        # What a block opens with is kept, and counted, as what its deltas would have sent.
        block = content.model_dump()
        kind = self._kinds[index] = content.type
        if kind == "text":
            self._assembler.text(_string(block.get("text")) or "", index)
        elif kind == "thinking":
            signature = _string(block.get("signature"))
            self._assembler.reasoning(_string(block.get("thinking")) or "", index, signature=signature)
        elif kind == "redacted_thinking":
            self._assembler.redacted(_string(block.get("data")) or "", index)
        elif kind == "tool_use":
            self._assembler.call(index, call_id=_string(block.get("id")), name=_string(block.get("name")))
            if isinstance(block.get("input"), dict):
                self._assembler.opened_with(index, block["input"])

    def _delta(self, index: int, delta: Any) -> None:
        kind = self._kinds.get(index)
        if delta.type == "text_delta" and kind == "text":
            self._assembler.text(delta.text, index)
        elif delta.type == "input_json_delta" and kind == "tool_use":
            self._assembler.call(index, arguments=delta.partial_json)
        elif delta.type == "thinking_delta" and kind == "thinking":
            self._assembler.reasoning(delta.thinking, index)
        elif delta.type == "signature_delta" and kind == "thinking":
            self._assembler.reasoning("", index, signature=delta.signature or None)

    def turn(self) -> Turn:
        return self._assembler.turn()


def _string(value: object) -> str | None:
    return value if isinstance(value, str) else None


class AnthropicMessages:
    def __init__(self, endpoint: Endpoint) -> None:
        self._text_only = endpoint.text_only
        # Retries are ours (models/retry.py), so the budget spans the whole step. A workspace provider's
        # requests go through the pinned client (`addresses`); the platform's (None) are the operator's.
        base_url, addresses, timeout_s = endpoint.base_url, endpoint.addresses, endpoint.timeout_s
        # Either way its responses are counted on the wire (workers/models/wire.py).
        http = model_client(
            base_url, addresses, timeout_s, anthropic.DefaultAsyncHttpxClient, anthropic.DEFAULT_CONNECTION_LIMITS
        )
        # On a cloud (Bedrock, Vertex) the `anthropic` package's client for it, with the cloud's credentials.
        self._cloud = endpoint.cloud is not None
        self._client: anthropic.AsyncAnthropic | AnthropicCloudClient = (
            anthropic_on_cloud(endpoint, http)
            if self._cloud
            else anthropic.AsyncAnthropic(
                base_url=base_url, api_key=endpoint.api_key, max_retries=0, timeout=timeout_s, http_client=http
            )
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def turn(self, request: ModelRequest, deltas: DeltaSink) -> Turn:
        config = request.config
        aliases = Aliases(tool.name for tool in request.tools)
        params: dict[str, Any] = {
            "model": config.model,
            "max_tokens": config.max_tokens,
            "messages": to_messages(request.transcript_for(self._text_only, documents=True), aliases),
            "stream": True,
        }
        if config.system_prompt:
            params["system"] = config.system_prompt
        if config.thinking_budget is not None:
            params["thinking"] = {"type": "enabled", "budget_tokens": config.thinking_budget}
        if request.tools:
            # The Messages API refuses an input_schema without `"type": "object"`; every tool's parameters
            # describe an object (common/schema/accept.py), `{}` included, whether or not they say so.
            params["tools"] = [
                {
                    "name": aliases.outward(t.name),
                    "description": t.description,
                    "input_schema": {**t.parameters, "type": "object"},
                }
                for t in request.tools
            ]
        async with StreamBounds(request.limits) as stream:
            reader = _Reader(Assembler(stream.tally, aliases, deltas))
            try:
                response = await self._client.messages.create(**params)
                # Closed on the way out, whatever ends the loop: a bound passed stops reading at once.
                async with response:
                    async for event in response:
                        await stream.fragment()
                        reader.feed(event)
            except ModelError:
                raise
            except anthropic.APIError as error:
                raise _error(error) from error
            except AddressRefused as refusal:
                # The transport's refusal, let through by the SDK: not worth retrying, and it says why.
                raise ModelError(refusal.message) from None
            except Exception as error:
                failure = self._failure(error)
                if failure is None:
                    raise
                raise failure from error
        return reader.turn()

    def _failure(self, error: Exception) -> ModelError | None:
        """What an error the SDK let through means: a cloud identity that could not be resolved, or a tool
        call's input that is not JSON; None for anything else."""
        failure = cloud_failure(error) if self._cloud else None
        if failure is not None:
            return failure
        if isinstance(error, ValueError):
            return ModelError(f"Anthropic sent a tool call whose input is not JSON: {error}")
        return None
