"""The local collector of the tracing scenario: an OTLP/HTTP trace receiver on 127.0.0.1 that decodes each
`/v1/traces` request (protobuf) and keeps only a count of its spans, as a collector next to the API would
take them."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

# The exporter's batches are at most 512 spans (OTEL_BSP_MAX_EXPORT_BATCH_SIZE): a few hundred KiB.
MAX_BODY = 16 * 2**20


class Counts:
    """What the receiver took: export requests, spans, and requests it could not decode."""

    def __init__(self) -> None:
        self.requests = 0
        self.spans = 0
        self.bad = 0
        self._lock = threading.Lock()

    def took(self, body: bytes) -> bool:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except Exception:
            with self._lock:
                self.bad += 1
            return False
        spans = sum(len(scoped.spans) for resource in request.resource_spans for scoped in resource.scope_spans)
        with self._lock:
            self.requests += 1
            self.spans += spans
        return True


def _handler(counts: Counts) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            size = int(self.headers.get("Content-Length") or 0)
            if self.path != "/v1/traces" or not 0 <= size <= MAX_BODY:
                self._answer(404 if self.path != "/v1/traces" else 413)
                return
            self._answer(200 if counts.took(self.rfile.read(size)) else 400)

        def _answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextlib.contextmanager
def receiving() -> Iterator[tuple[str, Counts]]:
    """A receiver serving in a thread of its own while the block runs: its endpoint (for
    `OTEL_EXPORTER_OTLP_ENDPOINT`) and its counts."""
    counts = Counts()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(counts))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", counts
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
