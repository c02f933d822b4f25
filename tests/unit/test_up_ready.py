"""`switchboard up` says it is up only when the API it started answers: another server ready on the same
port (another `up`, anything) never counts."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from switchboard.up import wait_ready


@contextlib.contextmanager
def ready_server(answer: dict[str, str]) -> Iterator[str]:
    """An HTTP server on a free local port answering every GET with `answer` (200); its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("answer", [{"status": "ready"}, {"status": "ready", "instance": "someone-else"}])
def test_another_server_ready_on_the_port_is_not_the_api_up_started(answer: dict[str, str]) -> None:
    with ready_server(answer) as url, pytest.raises(SystemExit, match=f"did not answer at {url}"):
        wait_ready(url, "ours", [], wait_s=1.0)


def test_the_api_up_started_is_ready_when_it_answers_with_its_instance() -> None:
    with ready_server({"status": "ready", "instance": "ours"}) as url:
        wait_ready(url, "ours", [], wait_s=5.0)
