"""Server tools for the recovery tests, loaded by worker processes via SWITCHBOARD_SERVER_TOOLS_MODULE."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from workers.tools import ServerTool


class SlowArgs(BaseModel):
    seconds: float = 5.0


async def slow(args: SlowArgs) -> str:
    await asyncio.sleep(args.seconds)
    return f"slept {args.seconds:g} s"


TOOLS = [ServerTool("slow", "Sleeps, so a test can kill the worker running it.", SlowArgs, slow, timeout_s=60)]
