"""The OpenAI Responses API (and servers that speak it: vLLM, Ollama, LM Studio), streamed, through the
official `openai` package."""

from __future__ import annotations

from typing import Any

import openai

from broker.errors import AddressRefused
from common.codec import dumps
from common.events.blocks import DOCUMENT_TYPE
from workers.models.aliases import Aliases
from workers.models.assembler import Assembler
from workers.models.base import (
    DeltaSink,
    Endpoint,
    Message,
    ModelError,
    ModelRequest,
    StreamLimits,
    TransientModelError,
    Turn,
)
from workers.models.bounds import StreamBounds, Tally, json_bytes
from workers.models.openai_client import error_of, failure, field_of, openai_client, usage_of

# What a server may add to each tool it sends back: the fields it fills in that the request left out.
_TOOL_ECHO = 256


def _data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def _filename(uri: str) -> str:
    # The file's name as the model sees it: the last segment of its URI's path.
    name = uri.rstrip("/").rsplit("/", 1)[-1].split("?", 1)[0]
    return (name or "document")[:200] if name.lower().endswith(".pdf") else f"{(name or 'document')[:195]}.pdf"


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
            if result.images or result.documents:
                # The Responses API takes a function call's output as a list of input items too.
                output = [{"type": "input_text", "text": text}] if text else []
                output += [
                    {"type": "input_image", "image_url": f"data:{media_type};base64,{data}"}
                    for media_type, data in result.images
                ]
                output += [
                    {
                        "type": "input_file",
                        "filename": _filename(uri),
                        "file_data": f"data:{DOCUMENT_TYPE};base64,{data}",
                    }
                    for uri, data in result.documents
                ]
            items.append({"type": "function_call_output", "call_id": result.call_id, "output": output})
    return items


def _turn(response: Any, aliases: Aliases, limits: StreamLimits) -> Turn:
    """The turn from the response's whole output (its last event). That event repeats what was streamed,
    but a server may put there what it never streamed: what the turn keeps is counted again, afresh."""
    built = Assembler(Tally(limits), aliases)
    built.model(getattr(response, "model", None))
    built.usage(usage_of(getattr(response, "usage", None), "input_tokens", "output_tokens"))
    # A response has a status, not a finish reason: an incomplete one says why (`max_output_tokens`,
    # `content_filter`); a completed one ended as the model chose.
    if getattr(response, "status", None) == "incomplete":
        built.finish(getattr(getattr(response, "incomplete_details", None), "reason", None) or "incomplete")
    output = list(getattr(response, "output", None) or ())
    for place, item in enumerate(output):
        kind = field_of(item, "type")
        summary = _joined(field_of(item, "summary")) if kind == "reasoning" else ""
        if summary:
            built.reasoning(summary, place)
        elif kind == "message":
            built.text(_joined(field_of(item, "content")), place)
        elif kind == "function_call":
            call_id, name = field_of(item, "call_id"), field_of(item, "name")
            built.call(place, call_id=call_id, name=name, arguments=field_of(item, "arguments") or "{}")
    return built.turn()


def _joined(parts: Any) -> str:
    """The text of an item's parts (a message's content, a reasoning item's summary)."""
    return "".join(field_of(part, "text") or "" for part in parts or ())


class OpenAIResponses:
    def __init__(self, endpoint: Endpoint) -> None:
        self._client = openai_client(endpoint)
        self._text_only = endpoint.text_only

    async def aclose(self) -> None:
        await self._client.close()

    async def turn(self, request: ModelRequest, deltas: DeltaSink) -> Turn:
        config = request.config
        aliases = Aliases(tool.name for tool in request.tools)
        params: dict[str, Any] = {
            "model": config.model,
            "input": to_input(request.transcript_for(self._text_only, documents=True), aliases),
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
        # The API sends the request's tools and instructions back in three events (response.created,
        # .in_progress, .completed), and the text and arguments again when each item is done.
        echoed = json_bytes(params.get("tools", [])) + json_bytes(params.get("instructions", ""))
        echoed += _TOOL_ECHO * len(params.get("tools", []))
        async with StreamBounds(request.limits, echoed=echoed, repeats=True) as stream:
            try:
                response = await self._client.responses.create(**params)
                # Closed on the way out, whatever ends the read: a bound passed stops reading at once.
                async with response:
                    return await _read(response, aliases, stream, deltas, request.limits)
            except ModelError:
                raise
            except openai.APIError as error:
                raise error_of(error) from error
            except AddressRefused as refusal:
                # The transport's refusal, let through by the SDK: not worth retrying, and it says why.
                raise ModelError(refusal.message) from None


async def _read(events: Any, aliases: Aliases, stream: StreamBounds, deltas: DeltaSink, limits: StreamLimits) -> Turn:
    # Streamed as it comes, and counted; the turn is read from the last event, which holds it whole.
    streamed = Assembler(stream.tally, aliases, deltas, keep=False)
    async for event in events:
        await stream.fragment()
        kind = event.type
        if kind == "response.output_text.delta":
            streamed.text(event.delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            streamed.reasoning(event.delta)
        elif kind == "response.output_item.added" and event.item.type == "function_call":
            item = event.item
            streamed.call(item.id or item.call_id, call_id=item.call_id, name=item.name)
        elif kind == "response.function_call_arguments.delta" and streamed.knows(event.item_id):
            streamed.call(event.item_id, arguments=event.delta)
        elif kind in ("response.completed", "response.incomplete"):
            return _turn(event.response, aliases, limits)
        elif kind == "response.failed":
            detail = event.response.error
            raise failure(field_of(detail, "code"), field_of(detail, "message") or "the response failed")
        elif kind == "error":
            raise failure(getattr(event, "code", None), getattr(event, "message", "") or "stream error")
    raise TransientModelError("the OpenAI API stream ended before the response was complete")
