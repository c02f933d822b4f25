"""Delegation reads the session's event stream with httpx2's own SSE reader: frames however the chunks
cut them and whatever line ends they use, the opening cursor frame as the stream's position, comments and
retry hints skipped; and a stream that is not one fails the turn at once rather than being retried."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx2
import pytest

from delegate import chat

URL = "http://switchboard.test"
SESSION = "0190f0a0-0000-7000-8000-000000000001"


def _event(seq: int, kind: str, **fields: object) -> bytes:
    return json.dumps({"type": kind, "seq": seq, "run_id": "run-1", **fields}).encode()


def _stream() -> list[bytes]:
    message = {"role": "assistant", "content": [{"type": "text", "data": {"text": "it is noon"}}]}
    whole = (
        b"id: 7\n\nretry: 1000\n\n: keep-alive\n\n"
        + b"id: 8\r\ndata: "
        + _event(8, "run_started")
        + b"\r\n\r\n"
        + b"id: 9\rdata: "
        + _event(9, "message_assistant", message=message)
        + b"\r\r"
        + b"id: 10\ndata: "
        + _event(10, "run_completed")
        + b"\n\n"
    )
    # Cut every few bytes, so frames, lines and CRLFs fall across chunks.
    return [whole[at : at + 5] for at in range(0, len(whole), 5)]


async def test_frames_are_read_however_cut_from_the_position_the_stream_opened_at() -> None:
    seen: list[httpx2.Request] = []

    async def chunks() -> AsyncIterator[bytes]:
        for chunk in _stream():
            yield chunk

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        if request.method == "GET":
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=chunks())
        return httpx2.Response(200, json={"run_id": "run-1", "outcome": "started", "client_id": None})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(answer), base_url=URL) as http:
        result = await asyncio.wait_for(chat(URL, SESSION, "swb_st_x", "what time is it?", http=http), 5)
    assert (result.outcome, result.text) == ("completed", "it is noon")
    assert [event["seq"] for event in result.events] == [8, 9, 10]
    assert [request.method for request in seen] == ["GET", "POST"]
    assert seen[0].headers["accept"] == "text/event-stream"


async def test_an_answer_that_is_not_an_event_stream_fails_at_once() -> None:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"items": []})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(answer), base_url=URL) as http:
        with pytest.raises(httpx2.SSEError, match="text/event-stream"):
            await asyncio.wait_for(chat(URL, SESSION, "swb_st_x", "hello", http=http), 5)
