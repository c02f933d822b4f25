"""Reads SSE frames the way the subako SDK does (fields per line, a blank line dispatches)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Frame:
    id: str | None = None
    data: list[str] = field(default_factory=list)
    retry: str | None = None
    comments: list[str] = field(default_factory=list)

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads("\n".join(self.data))
        return parsed


class Frames:
    def __init__(self, response: httpx.Response) -> None:
        self._lines: AsyncIterator[str] = response.aiter_lines()

    async def next(self, timeout: float = 5) -> Frame:
        frame = Frame()
        async with asyncio.timeout(timeout):
            async for line in self._lines:
                if line == "":
                    return frame
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "":
                    frame.comments.append(value)
                elif name == "id":
                    frame.id = value
                elif name == "data":
                    frame.data.append(value)
                elif name == "retry":
                    frame.retry = value
        raise EOFError("the stream ended")

    async def event(self, timeout: float = 5) -> dict[str, Any]:
        """The next frame that carries an event (cursor, retry and comment frames are skipped)."""
        while True:
            frame = await self.next(timeout)
            if frame.data:
                return frame.event
