"""A reverse proxy that adds a session token to every request it forwards: the MCP conformance suite
cannot be given a credential, and a session's MCP endpoints take none other. Host and Origin pass as the
caller sent them (the suite's DNS-rebinding scenario sets both); responses stream through as they come."""

from __future__ import annotations

import anyio
import httpx2
from starlette.types import Receive, Scope, Send

# Headers that belong to one connection (or that the proxy sets itself), not to the request.
_HOP = {
    b"authorization",
    b"connection",
    b"content-length",
    b"keep-alive",
    b"proxy-connection",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
}


class BearerProxy:
    """Forwards every request to `upstream` with `Authorization: Bearer <token>`."""

    def __init__(self, upstream: str, token: str) -> None:
        self._upstream = upstream
        self._token = token
        self._http = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=None))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await self._http.aclose()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k.lower() not in _HOP]
        headers.append(("authorization", f"Bearer {self._token}"))
        query = scope["query_string"].decode("latin-1")
        url = self._upstream + scope["raw_path"].decode("latin-1") + (f"?{query}" if query else "")
        request = self._http.build_request(scope["method"], url, headers=headers, content=body)
        # A caller that goes closes the upstream request, as a reverse proxy does: a stream that only ends
        # when its caller goes (a subscriptions/listen for tool-list changes) would otherwise be held open.
        async with anyio.create_task_group() as forwarding:
            forwarding.start_soon(_cancel_on_disconnect, receive, forwarding.cancel_scope)
            response = await self._http.send(request, stream=True)
            try:
                forwarded = [(k, v) for k, v in response.headers.raw if k.lower() not in _HOP]
                await send({"type": "http.response.start", "status": response.status_code, "headers": forwarded})
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            finally:
                await response.aclose()
            forwarding.cancel_scope.cancel()


async def _cancel_on_disconnect(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()
