"""A webhook receiver: verifies each delivery's signature with the `standardwebhooks` package and prints
what it was told. Copy it, and put your handling where it prints.

    pip install standardwebhooks
    WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py            # listens on 127.0.0.1:8080

Make the endpoint first (the answer's `secret` is shown once; `POST /v1/webhooks/{id}/rotate-secret`
makes a new one):

    curl -sS $SWITCHBOARD_URL/v1/webhooks -H "Authorization: Bearer $SWITCHBOARD_API_KEY" \\
      -H 'Content-Type: application/json' \\
      -d '{"url": "https://hooks.example.com/webhooks", "events": ["approval.requested", "run.failed"]}'

Or let this script make it: with SWITCHBOARD_URL and SWITCHBOARD_API_KEY set and no WEBHOOK_SECRET, it
registers WEBHOOK_URL (default http://127.0.0.1:PORT/webhooks; a loopback address needs
SWITCHBOARD_PROVIDER_ALLOW_PRIVATE=true on the server) for every event type and uses the secret it is
given. PORT (default 8080) is where it listens; EXIT_AFTER=N makes it exit after N verified deliveries.

A delivery is at least once: the same `webhook-id` may come again (a retry, a redelivery after a worker
died), so handle each id once. Answer 2xx fast (do slow work after answering); a 5xx, 408, 429 (with
Retry-After) or no answer in 10 s is retried, 410 turns the endpoint off, any other 4xx fails it at once.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

EVENTS = ["approval.requested", "call.waiting", "input.requested", "run.completed", "run.failed", "run.cancelled"]
# Bodies past this are refused unread: Switchboard's are a session event and a little more.
MAX_BODY = 16 * 1024 * 1024


def say(text: str, *, err: bool = False) -> None:
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


def register(url: str) -> str:
    """Make an endpoint for `url` taking every event type; its secret."""
    request = urllib.request.Request(  # noqa: S310 (the operator's own server, http or https)
        os.environ["SWITCHBOARD_URL"].rstrip("/") + "/v1/webhooks",
        data=json.dumps({"url": url, "events": EVENTS, "description": "examples/webhook_receiver.py"}).encode(),
        headers={"Authorization": f"Bearer {os.environ['SWITCHBOARD_API_KEY']}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        created = json.load(answer)
    say(f"registered endpoint {created['id']} for {url}")
    return str(created["secret"])


def handle(payload: dict[str, Any]) -> None:
    """Your handling goes here. `payload["data"]["event"]` is the session event as its log holds it."""
    data = payload["data"]
    say(f"{payload['type']} session={data['session_id']} run={data['run_id']} subject={data['subject']}")


class Receiver(BaseHTTPRequestHandler):
    webhook: Webhook
    seen: ClassVar[set[str]] = set()
    left = 0

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            self.send_response(413)
            self.end_headers()
            return
        body = self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            payload = self.webhook.verify(body, headers)
        except WebhookVerificationError as error:
            say(f"refused a delivery: {error}", err=True)
            self.send_response(400)
            self.end_headers()
            return
        delivery_id = headers["webhook-id"]
        # At least once: a delivery seen before is answered and not handled again (keep this set in your
        # database to survive restarts).
        if delivery_id not in self.seen:
            self.seen.add(delivery_id)
            handle(payload)
            type(self).left -= 1
        self.send_response(204)
        self.end_headers()
        if self.left == 0:
            # EXIT_AFTER deliveries handled: stop once this answer is sent.
            self.server.shutdown_request(self.request)
            os._exit(0)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> int:
    port = int(os.environ.get("PORT", "8080"))
    secret = os.environ.get("WEBHOOK_SECRET") or register(
        os.environ.get("WEBHOOK_URL", f"http://127.0.0.1:{port}/webhooks")
    )
    Receiver.webhook = Webhook(secret)
    Receiver.left = int(os.environ.get("EXIT_AFTER", "-1"))
    server = ThreadingHTTPServer(("127.0.0.1", port), Receiver)
    say(f"listening on http://127.0.0.1:{port}")
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
