"""OpenAI's Chat Completions wire, streamed, through the official `openai` package: OpenAI itself and the
servers that speak it (vLLM, llama.cpp's server, LM Studio, Ollama, LiteLLM, OpenRouter, Groq, Together,
DeepSeek, Mistral). Where those servers differ from OpenAI, the difference is handled here and named
(docs/providers/openai-chat.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai

from broker.errors import AddressRefused
from common.codec import dumps
from workers.models.aliases import Aliases
from workers.models.assembler import Assembler
from workers.models.base import (
    DeltaSink,
    Endpoint,
    Message,
    ModelError,
    ModelRequest,
    ToolOutcome,
    TransientModelError,
    Turn,
)
from workers.models.bounds import StreamBounds
from workers.models.openai_client import error_detail, error_of, field_of, openai_client, usage_of

# Optional request parameters some servers refuse with a 400 that names them: such a parameter is left
# out (or, where the server names its replacement, renamed) and the request sent again at once, and the
# client remembers it for its later steps. OpenAI's reasoning models take only `max_completion_tokens`;
# most other servers know only `max_tokens`.
_DROPPABLE = ("stream_options", "parallel_tool_calls")
_RENAMED = {"max_tokens": "max_completion_tokens"}

# finish_reason values that end a turn with nothing usable, as the servers spell them.
_FILTERED = {"content_filter", "safety", "recitation"}


def _image_part(media_type: str, data: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{data}"}}


def _tool_message(result: ToolOutcome) -> dict[str, Any]:
    text = f"error: {result.text}" if result.is_error else result.text
    return {"role": "tool", "tool_call_id": result.call_id, "content": text}


def to_messages(transcript: list[Message], aliases: Aliases, system: str | None) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages. A tool message carries text only on this wire, so a
    result's images follow as one user message with image parts, after the last tool message of their
    batch (a tool message must directly follow the assistant message that made the call)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    images: list[dict[str, Any]] = []

    def flush() -> None:
        if images:
            messages.append({"role": "user", "content": [{"type": "text", "text": "The tools' images:"}, *images]})
            images.clear()

    for message in transcript:
        if message.role == "tool" and message.result is not None:
            messages.append(_tool_message(message.result))
            images.extend(_image_part(media_type, data) for media_type, data in message.result.images)
            continue
        flush()
        if message.role == "user" and message.text:
            messages.append({"role": "user", "content": message.text})
        elif message.role == "assistant" and (message.text or message.calls):
            # `content` is null beside tool calls with no text, as OpenAI writes it; some servers refuse "".
            entry: dict[str, Any] = {"role": "assistant", "content": message.text or None}
            if message.calls:
                entry["tool_calls"] = [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {"name": aliases.outward(call.name), "arguments": dumps(call.arguments)},
                    }
                    for call in message.calls
                ]
            messages.append(entry)
    flush()
    return messages


# Past these a field is not one a server in good faith sends, and is read as no value at all (how many
# calls one turn may hold is the stream's bound, workers/models/bounds.py).
_ID_LIMIT = 128
_MODEL_LIMIT = 256
# Longer than any tool name a provider takes (OpenAI's limit is 64 characters): read as no name at all.
_NAME_LIMIT = 1_024


def _text(value: object, limit: int | None = None) -> str | None:
    """A field the wire gives as a string, or None when a server sent something else (or too much)."""
    if not isinstance(value, str) or (limit is not None and len(value) > limit):
        return None
    return value


class _CallKeys:
    """Which of the turn's calls a tool-call fragment belongs to, as the servers differ.

    OpenAI sends a call's id and name once, in its first fragment, then arguments under the same `index`.
    vLLM sends parallel calls all with index 0 (a new id starts a new call); some servers send no ids (the
    assembler makes one); some repeat the id and name in every fragment; some send each call whole in one
    fragment, with neither ids nor distinct indexes (a name after a call that has its name and arguments
    starts the next call). Every fragment costs O(1) (a server may send many)."""

    def __init__(self) -> None:
        self._count = 0
        self._by_id: dict[str, int] = {}
        # The latest call each index was seen on.
        self._by_index: dict[int | None, int] = {}
        self._named: set[int] = set()
        self._filled: set[int] = set()

    def key(self, call_id: str | None, index: int | None, name: str | None, piece: str) -> int:
        if call_id is not None:
            key = self._by_id.get(call_id)
        else:
            key = self._by_index.get(index)
            if key in self._named and key in self._filled and name:
                key = None
        if key is None:
            key, self._count = self._count, self._count + 1
            if call_id is not None:
                self._by_id[call_id] = key
        self._by_index[index] = key
        if name:
            self._named.add(key)
        if piece:
            self._filled.add(key)
        return key


def _reasoning(delta: Any) -> str:
    """The reasoning a server streams beside the text: `reasoning_content` (DeepSeek, vLLM, llama.cpp) or
    `reasoning` (OpenRouter, Ollama); neither is in OpenAI's own schema, so both arrive as extra fields."""
    for name in ("reasoning_content", "reasoning"):
        value = field_of(delta, name)
        if isinstance(value, str) and value:
            return value
    return ""


# The keys of the message's one reasoning block and one text block (its calls are keyed by number).
_REASONING, _CONTENT = "reasoning", "content"


class _Reader:
    """A Chat Completions stream's chunks, fed to the assembler: one choice (the first) is asked for."""

    def __init__(self, assembler: Assembler) -> None:
        self._assembler = assembler
        self._calls = _CallKeys()
        self.finish: str | None = None

    def feed(self, chunk: Any) -> None:
        model = _text(field_of(chunk, "model"), _MODEL_LIMIT)
        if model:
            self._assembler.model(model)
        # With include_usage the counts come in a last chunk with no choices; some servers send them in
        # every chunk, growing: the last one wins.
        usage = field_of(chunk, "usage")
        if usage is not None:
            self._assembler.usage(usage_of(usage, "prompt_tokens", "completion_tokens"))
        for choice in field_of(chunk, "choices") or ():
            if field_of(choice, "index") not in (0, None):
                continue
            delta = field_of(choice, "delta")
            if delta is not None:
                self._delta(delta)
            self.finish = _text(field_of(choice, "finish_reason"), _ID_LIMIT) or self.finish

    def _delta(self, delta: Any) -> None:
        reasoning = _reasoning(delta)
        if reasoning:
            self._assembler.reasoning(reasoning, _REASONING)
        text = field_of(delta, "content")
        if isinstance(text, str) and text:
            self._assembler.text(text, _CONTENT)
        for fragment in field_of(delta, "tool_calls") or ():
            self._call(fragment)

    def _call(self, fragment: Any) -> None:
        call_id = _text(field_of(fragment, "id"), _ID_LIMIT) or None
        index = field_of(fragment, "index")
        function = field_of(fragment, "function")
        name = _text(field_of(function, "name"), _NAME_LIMIT) if function is not None else None
        piece = field_of(function, "arguments") if function is not None else None
        # Arguments a server sent as an object rather than its JSON text.
        piece = dumps(piece) if isinstance(piece, dict) else (_text(piece) or "")
        key = self._calls.key(call_id, index if isinstance(index, int) else None, name, piece)
        self._assembler.call(key, call_id=call_id, name=name, arguments=piece)

    def turn(self) -> Turn:
        if self.finish is None:
            raise TransientModelError("the Chat Completions stream ended before the answer was complete")
        if self.finish in _FILTERED and not self._assembler.has_text and not self._assembler.calls:
            raise ModelError(f"the model's answer was withheld by the provider's filter (finish_reason {self.finish})")
        self._assembler.finish(self.finish)
        return self._assembler.turn()


class OpenAIChat:
    def __init__(self, endpoint: Endpoint) -> None:
        self._client = openai_client(endpoint)
        self._text_only = endpoint.text_only
        # What this provider refused (a parameter it does not know), kept for the steps after.
        self._refused: set[str] = set()

    async def aclose(self) -> None:
        await self._client.close()

    def _params(self, request: ModelRequest, aliases: Aliases) -> dict[str, Any]:
        config = request.config
        params: dict[str, Any] = {
            "model": config.model,
            "messages": to_messages(request.transcript_for(self._text_only), aliases, config.system_prompt),
            "max_tokens": config.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if config.reasoning_effort:
            params["reasoning_effort"] = config.reasoning_effort
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": aliases.outward(t.name),
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
            params["parallel_tool_calls"] = True
            if config.tool_choice:
                params["tool_choice"] = config.tool_choice
        for name in self._refused:
            _adapt(params, name)
        return params

    async def turn(self, request: ModelRequest, deltas: DeltaSink) -> Turn:
        aliases = Aliases(tool.name for tool in request.tools)
        params = self._params(request, aliases)
        while True:
            async with StreamBounds(request.limits) as stream:
                reader = _Reader(Assembler(stream.tally, aliases, deltas, grouped=True))
                try:
                    response = await self._client.chat.completions.create(**params)
                    # Closed on the way out, whatever ends the loop: a bound passed stops reading at once.
                    async with response:
                        async for chunk in response:
                            await stream.fragment()
                            reader.feed(chunk)
                    return reader.turn()
                except ModelError:
                    raise
                except (openai.BadRequestError, openai.UnprocessableEntityError) as error:
                    refused = _refused_parameter(error, params)
                    if refused is None:
                        raise error_of(error) from error
                    self._refused.add(refused)
                    _adapt(params, refused)
                except openai.APIError as error:
                    raise error_of(error) from error
                except AddressRefused as refusal:
                    # The transport's refusal, let through by the SDK: not worth retrying, and it says why.
                    raise ModelError(refusal.message) from None


def _adapt(params: dict[str, Any], name: str) -> None:
    """`params` without the parameter a server refused: renamed where it has a replacement, else left out."""
    if name not in params:
        return
    value = params.pop(name)
    if name in _RENAMED:
        params[_RENAMED[name]] = value


# Words a server's 400 uses for a parameter it does not take (as opposed to a value it does not like:
# "max_tokens is too large" is no reason to send max_completion_tokens instead).
_UNKNOWN = ("unsupported", "not supported", "unrecognized", "unknown", "extra", "not permitted", "not allowed",
            "unexpected", "does not support", "no longer supported")  # fmt: skip


def _refused_parameter(error: openai.APIStatusError, params: dict[str, Any]) -> str | None:
    """The optional parameter a 400 (or 422) says the server does not take, if it names one we sent (and
    have not already adapted: a server refusing `max_completion_tokens` too is not asked a third time)."""
    text = " ".join(_texts(error_detail(error))).lower()
    if not any(word in text for word in _UNKNOWN):
        return None
    return next((name for name in (*_DROPPABLE, *_RENAMED) if name in params and name in text), None)


def _texts(detail: dict[str, Any]) -> Iterator[str]:
    # Servers name the parameter in the message, or in `param` (OpenAI), or in a pydantic error's `loc`
    # (FastAPI-based servers answer 422 {"detail": [{"loc": [...], "msg": ...}]}).
    yield str(detail.get("message") or "")
    yield str(detail.get("param") or "")
    items = detail.get("detail")
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict):
            yield str(item.get("msg") or "")
            yield str(item.get("type") or "")
            yield " ".join(str(part) for part in item.get("loc") or ())
