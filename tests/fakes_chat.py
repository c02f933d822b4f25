"""Chat Completions streams as OpenAI's API reference writes them (`chat.completion.chunk` objects), and as
the servers that differ from it write theirs: each quirk the adapter handles is one `style` here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from common.codec import dumps
from tests.fakes import Frame, Reply

# How a server streams tool calls:
# - openai: a call's id, type and name in its first fragment, its arguments in fragments after, each call
#   under its own index (OpenAI, and most servers);
# - index0: every call under index 0, a new id starting each (vLLM's parallel calls);
# - whole: each call in one fragment, arguments whole (Ollama, Gemini's compatible endpoint);
# - no_ids: whole calls with no id, all under index 0 (llama.cpp's older server, some proxies);
# - repeated: the id and name again in every fragment (some proxies).
Style = Literal["openai", "index0", "whole", "no_ids", "repeated"]


@dataclass(frozen=True)
class ChatCall:
    id: str
    name: str
    arguments: dict[str, Any] | str


def _chunk(model: str, delta: dict[str, Any] | None, finish: str | None = None) -> Frame:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model,
             "system_fingerprint": None, "choices": choices}  # fmt: skip
    return "", chunk


def _call_fragments(place: int, call: ChatCall, style: Style) -> list[dict[str, Any]]:
    raw = call.arguments if isinstance(call.arguments, str) else dumps(call.arguments)
    index = 0 if style in ("index0", "no_ids") else place
    head: dict[str, Any] = {"index": index, "type": "function"}
    if style != "no_ids":
        head["id"] = call.id
    if style in ("whole", "no_ids"):
        return [{**head, "function": {"name": call.name, "arguments": raw}}]
    named = {"name": call.name}
    first = {**head, "function": {**named, "arguments": ""}}
    rest, again = ({**head}, named) if style == "repeated" else ({"index": index}, {})
    pieces = [raw[: len(raw) // 2], raw[len(raw) // 2 :]]
    return [first, *({**rest, "function": {**again, "arguments": piece}} for piece in pieces)]


def chat_stream(
    text: str = "",
    *calls: ChatCall,
    reasoning: str = "",
    style: Style = "openai",
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "gpt-test",
) -> Reply:
    """A whole streamed answer: reasoning (as `reasoning_content`), text in word pieces, then the calls;
    `finish` defaults to "tool_calls" or "stop"; `usage`, when given, in a last chunk with no choices (as
    `stream_options.include_usage` asks)."""
    frames = [_chunk(model, {"role": "assistant", "content": ""})]
    for piece in _words(reasoning):
        frames.append(_chunk(model, {"reasoning_content": piece}))
    for piece in _words(text):
        frames.append(_chunk(model, {"content": piece}))
    for place, call in enumerate(calls):
        frames += [_chunk(model, {"tool_calls": [fragment]}) for fragment in _call_fragments(place, call, style)]
    frames.append(_chunk(model, {}, finish or ("tool_calls" if calls else "stop")))
    if usage is not None:
        usage_chunk = _chunk(model, None)
        usage_chunk[1]["usage"] = usage
        frames.append(usage_chunk)
    return Reply(frames=frames, chat=True)


def _words(text: str) -> list[str]:
    words = text.split(" ") if text else []
    return [word + (" " if i < len(words) - 1 else "") for i, word in enumerate(words)]


def chat_usage(prompt: int, completion: int, cached: int | None = None, reasoning: int | None = None) -> dict[str, Any]:
    """A `usage` object as OpenAI writes it (the details only where given)."""
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}  # fmt: skip
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage
