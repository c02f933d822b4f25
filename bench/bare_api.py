"""The baseline of scenario 13: the barest honest FastAPI app answering a client call's two requests.

Two POST routes at the paths of the ack and the result: each reads its JSON body (the result's through
a pydantic model, as a FastAPI app would) and answers a small JSON. It runs as its own process, served
by uvicorn exactly as `switchboard api` serves the API (`api.server.uvicorn_options`: the same HTTP
protocol, loop and logging), so the two figures differ only in what the API does for a call.

`python -m bench.bare_api PORT`
"""

from __future__ import annotations

import sys

import uvicorn
from fastapi import FastAPI, Request
from pydantic import BaseModel

from api.server import uvicorn_options
from api.settings import ApiSettings

PREFIX = "/v1/sessions/{session_id}/clients/{client_id}/calls/{call_id:path}"


class Result(BaseModel):
    text: str


def create() -> FastAPI:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post(f"{PREFIX}/ack")
    async def ack(session_id: str, client_id: str, call_id: str, request: Request) -> dict[str, str]:
        await request.body()
        return {"type": "client_tool_acked", "call_id": call_id, "client_id": client_id}

    @app.post(f"{PREFIX}/result")
    async def result(session_id: str, client_id: str, call_id: str, body: Result) -> dict[str, str]:
        return {"call_id": call_id, "text": body.text}

    return app


def main() -> None:
    port = int(sys.argv[1])
    settings = ApiSettings()
    uvicorn.run(
        create(),
        host="127.0.0.1",
        port=port,
        log_level="info",
        log_config=None,
        access_log=settings.access_log,
        **uvicorn_options(settings),
    )


if __name__ == "__main__":
    main()
