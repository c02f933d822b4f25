"""The fast lane answers exactly as the FastAPI routes do: the same requests, sent to a stack with the lane
and to one without, get the same statuses, headers, bodies and request metrics."""

from __future__ import annotations

import re
from typing import Any

from pydantic import SecretStr

from switchboard.settings import Settings
from tests.api_client import Api, of_type
from tests.stack import running_stack

_IDS = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|call_[A-Za-z0-9]{6,}")
_TIMES = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
_SEQS = re.compile(r'"(seq|created_at_us)":\d+')
_HOT = ('route="/v1/sessions/{session_id}/clients/{client_id}/ping"', "calls/{call_id:path}")
Seen = tuple[str, int, str, str, str]


def _plain(text: str) -> str:
    return _SEQS.sub(r'"\1":0', _TIMES.sub("T", _IDS.sub("ID", text)))


async def _exchange(api: Api) -> tuple[list[Seen], list[str]]:
    """Every case of the hot routes: answered, refused by the script, refused by validation, replayed."""
    session = await api.session()
    other = await api.session()
    web = await api.register(session)
    base = f"/v1/sessions/{session.id}/clients/{web['id']}"
    await api.send(session, '/call client__web__highlight_row {"row_id": "1"}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call = f"{base}/calls/{of_type(events, 'client_tool_dispatched')[0]['call_id']}"
    token = {"Authorization": f"Bearer {session.token}"}
    json_body = {"Content-Type": "application/json"}
    cases: list[tuple[str, str, dict[str, str], bytes]] = [
        ("ping", f"{base}/ping", token, b""),
        ("ping keyed", f"{base}/ping", {**token, "Idempotency-Key": "p1"}, b""),
        ("ping replayed", f"{base}/ping", {**token, "Idempotency-Key": "p1"}, b""),
        ("ping long key", f"{base}/ping", {**token, "Idempotency-Key": "k" * 300}, b""),
        ("ping no credential", f"{base}/ping", {}, b""),
        ("ping bad scheme", f"{base}/ping", {"Authorization": "Basic abc"}, b""),
        ("ping other session", f"{base}/ping", {"Authorization": f"Bearer {other.token}"}, b""),
        ("ping wrong workspace", f"{base}/ping", {**token, "Kikuvi-Workspace": _ZERO}, b""),
        ("ping unknown client", f"/v1/sessions/{session.id}/clients/{_ZERO}/ping", token, b""),
        ("ping malformed client", f"/v1/sessions/{session.id}/clients/nope/ping", token, b""),
        ("ping api key", f"{base}/ping", {"Authorization": f"Bearer {api.stack.api_key}"}, b""),
        ("ack unknown call", f"{base}/calls/call_nope/ack", token, b""),
        ("ack", f"{call}/ack", {**token, "Idempotency-Key": "a1"}, b""),
        ("ack replayed", f"{call}/ack", {**token, "Idempotency-Key": "a1"}, b""),
        ("ack again", f"{call}/ack", token, b""),
        ("result not json", f"{call}/result", {**token, **json_body}, b"{nope"),
        ("result wrong type", f"{call}/result", {**token, **json_body}, b'{"text": 5}'),
        ("result extra field", f"{call}/result", {**token, **json_body}, b'{"text": "x", "colour": 1}'),
        ("result no body", f"{call}/result", token, b""),
        ("result text/plain", f"{call}/result", {**token, "Content-Type": "text/plain"}, b'{"text": "x"}'),
        ("result too long", f"{call}/result", {**token, **json_body}, b'{"text": "%s"}' % (b"x" * 300_000)),
        ("result", f"{call}/result", {**token, **json_body, "Idempotency-Key": "r1"}, b'{"text": "done"}'),
        ("result replayed", f"{call}/result", {**token, **json_body, "Idempotency-Key": "r1"}, b'{"text": "done"}'),
        ("result other body", f"{call}/result", {**token, **json_body, "Idempotency-Key": "r1"}, b'{"text": "no"}'),
        ("result again", f"{call}/result", {**token, **json_body}, b'{"text": "done"}'),
        ("ack settled", f"{call}/ack", token, b""),
    ]
    seen: list[Seen] = []
    async with api.stack.client() as client:
        for name, path, headers, body in cases:
            answer = await client.post(path, content=body, headers={"Authorization": "", **headers})
            shape = ",".join(f"{h}={answer.headers.get(h)}" for h in ("content-type", "www-authenticate"))
            seen.append((name, answer.status_code, shape, str("content-length" in answer.headers), _plain(answer.text)))
        metrics = (await client.get("/metrics")).text
    counted = sorted(
        line
        for line in metrics.splitlines()
        if line.startswith("switchboard_http_requests_total") and any(h in line for h in _HOT)
    )
    return seen, counted


_ZERO = "00000000-0000-7000-8000-000000000000"


async def test_the_lane_and_the_routes_answer_alike(settings: Settings, redis_url: str, api_key: str) -> None:
    answers: dict[bool, Any] = {}
    for lane in (True, False):
        configured = settings.model_copy(
            update={
                "bootstrap_api_key": SecretStr(api_key),
                "fast_lane": lane,
                "key_prefix": f"{settings.key_prefix}{lane:d}",
            }
        )
        async with running_stack(configured, redis_url) as stack:
            api = Api(stack)
            try:
                answers[lane] = await _exchange(api)
            finally:
                await api.aclose()
    lane_seen, lane_counted = answers[True]
    route_seen, route_counted = answers[False]
    for ours, theirs in zip(lane_seen, route_seen, strict=True):
        assert ours == theirs
    assert lane_counted == route_counted
    assert {status for _, status, *_ in lane_seen} >= {200, 204, 400, 401, 403, 404, 409}
