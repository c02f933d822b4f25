"""The OpenAI Responses API (and servers that speak it: vLLM, Ollama, LM Studio), streamed, through the
official `openai` package."""

from __future__ import annotations

from typing import Any

import httpx2
import openai

from broker.errors import AddressRefused
from common.codec import dumps
from workers.arguments import parse_arguments
from workers.models.aliases import Aliases
from workers.models.base import (
    DeltaSink,
    Endpoint,
    Message,
    ModelError,
    ModelRequest,
    TransientModelError,
    Turn,
    TurnBuilder,
    Usage,
    count,
    provider_text,
)
from workers.models.retry import RetryLater
from workers.pinned import pinned_client, refused

_TRANSIENT_CODES = {"server_error", "rate_limit_exceeded", "server_is_overloaded", "slow_down", "timeout"}


def to_input(transcript: list[Message], aliases: Aliases) -> list[dict[str, Any]]:
    """The conversation as Responses input items; tool results are function_call_output items."""
    items: list[dict[str, Any]] = []
    for message in transcript:
        if message.role == "user" and message.text:
            items.append({"role": "user", "content": message.text})
        elif message.role == "assistant":
            if message.text:
                items.append({"role": "assistant", "content": message.text})
            for call in message.calls:
                name = aliases.outward(call.name)
                arguments = dumps(call.arguments)
                items.append({"type": "function_call", "call_id": call.call_id, "name": name, "arguments": arguments})
        elif message.role == "tool" and message.result is not None:
            result = message.result
            text = f"error: {result.text}" if result.is_error else result.text
            output: str | list[dict[str, Any]] = text
            if result.images:
                # The Responses API takes a function call's output as a list of input items too.
                output = [{"type": "input_text", "text": text}] if text else []
                output += [
                    {"type": "input_image", "image_url": f"data:{media_type};base64,{data}"}
                    for media_type, data in result.images
                ]
            items.append({"type": "function_call_output", "call_id": result.call_id, "output": output})
    return items


def _failure(code: object, message: object, status: int | None = None, wait_s: float | None = None) -> ModelError:
    where = f"{status} " if status else ""
    kind = provider_text(code, "", limit=64)
    text = provider_text(message, "no message")
    if (status is not None and (status == 429 or status >= 500)) or kind in _TRANSIENT_CODES:
        return RetryLater(f"the OpenAI API answered {where}{kind}: {text}".replace("  ", " "), wait_s)
    return ModelError(f"the OpenAI API refused the request ({where}{kind or 'error'}): {text}".replace("( ", "("))


def _error(error: openai.APIError) -> ModelError:
    refusal = refused(error)
    if refusal is not None:
        return ModelError(refusal.message)
    if isinstance(error, openai.APIConnectionError):
        cause = f" ({error.__cause__})" if isinstance(error.__cause__, httpx2.ConnectError) else ""
        return TransientModelError(f"the OpenAI API could not be reached: {error.message}{cause}")
    body = error.body if isinstance(error.body, dict) else {}
    detail: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else body
    code = detail.get("code") or detail.get("type")
    if isinstance(error, openai.APIStatusError):
        # The status and the provider's own message; never the SDK's text, which holds the whole body.
        header = error.response.headers.get("retry-after")
        wait = float(header) if header and header.isdigit() else None
        message = provider_text(detail.get("message"), error.response.reason_phrase or "no message")
        return _failure(code, message, error.status_code, wait)
    return _failure(code, detail.get("message") or error.message)


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def usage_of(usage: Any) -> Usage | None:
    """The Responses API's counts (input includes the cached, output the reasoning)."""
    if usage is None:
        return None
    inputs, outputs = _field(usage, "input_tokens_details"), _field(usage, "output_tokens_details")
    return Usage(
        input_tokens=count(_field(usage, "input_tokens")),
        output_tokens=count(_field(usage, "output_tokens")),
        cached_input_tokens=count(_field(inputs, "cached_tokens")) if inputs is not None else None,
        reasoning_tokens=count(_field(outputs, "reasoning_tokens")) if outputs is not None else None,
    )


def _turn(output: list[Any], aliases: Aliases, model: str | None, usage: Usage | None = None) -> Turn:
    built = TurnBuilder()
    for item in output:
        kind = _field(item, "type")
        if kind == "reasoning":
            summary = "".join(_field(part, "text") or "" for part in _field(item, "summary") or [])
            if summary:
                built.thinking(summary)
        elif kind == "message":
            built.text("".join(_field(part, "text") or "" for part in _field(item, "content") or []))
        elif kind == "function_call":
            arguments, invalid = parse_arguments(_field(item, "arguments") or "{}")
            built.call(_field(item, "call_id"), aliases.inward(_field(item, "name")), arguments, invalid)
    return built.turn(model, usage)


class OpenAIResponses:
    def __init__(self, endpoint: Endpoint) -> None:
        # Retries are ours (models/retry.py), so the budget spans the whole step. A workspace provider's
        # requests go through the pinned client (`addresses`); the platform's (None) are the operator's.
        base_url, addresses, timeout_s = endpoint.base_url, endpoint.addresses, endpoint.timeout_s
        http = pinned_client(base_url, addresses, timeout_s) if addresses is not None else None
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=endpoint.api_key, max_retries=0, timeout=timeout_s, http_client=http
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def turn(self, request: ModelRequest, deltas: DeltaSink) -> Turn:
        config = request.config
        aliases = Aliases(tool.name for tool in request.tools)
        params: dict[str, Any] = {
            "model": config.model,
            "input": to_input(request.transcript, aliases),
            "max_output_tokens": config.max_tokens,
            "store": False,
            "stream": True,
        }
        if config.system_prompt:
            params["instructions"] = config.system_prompt
        if config.reasoning_effort:
            params["reasoning"] = {"effort": config.reasoning_effort}
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "name": aliases.outward(t.name),
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in request.tools
            ]
        try:
            return await _read(await self._client.responses.create(**params), aliases, deltas)
        except openai.APIError as error:
            raise _error(error) from error
        except AddressRefused as refusal:
            # The transport's refusal, let through by the SDK: not worth retrying, and it says why.
            raise ModelError(refusal.message) from None


async def _read(stream: Any, aliases: Aliases, deltas: DeltaSink) -> Turn:
    # Output item id -> (the call's place among the turn's calls, its call_id, its model-visible name).
    calls: dict[str, tuple[int, str, str]] = {}
    async for event in stream:
        kind = event.type
        if kind == "response.output_text.delta":
            deltas.text(event.delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            deltas.reasoning(event.delta)
        elif kind == "response.output_item.added" and event.item.type == "function_call":
            item = event.item
            calls[item.id or item.call_id] = (len(calls), item.call_id, aliases.inward(item.name))
        elif kind == "response.function_call_arguments.delta":
            call = calls.get(event.item_id)
            if call is not None:
                deltas.tool_input(*call, event.delta)
        elif kind in ("response.completed", "response.incomplete"):
            response = event.response
            model = getattr(response, "model", None)
            return _turn(list(response.output), aliases, model, usage_of(getattr(response, "usage", None)))
        elif kind == "response.failed":
            failure = event.response.error
            raise _failure(_field(failure, "code"), _field(failure, "message") or "the response failed")
        elif kind == "error":
            raise _failure(getattr(event, "code", None), getattr(event, "message", "") or "stream error")
    raise TransientModelError("the OpenAI API stream ended before the response was complete")
