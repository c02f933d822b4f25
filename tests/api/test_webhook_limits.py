"""Webhook endpoints' bad input (400 naming the field, nothing written), their cap, and the address rule
(a literal private address refused at creation while the deployment allows none)."""

from __future__ import annotations

from typing import Any

import pytest

from broker.services.webhooks import MAX_ENDPOINTS
from tests.api_client import Api

pytestmark = pytest.mark.both_redis

GOOD = {"url": "https://hooks.example/in", "events": ["run.completed"]}

BAD_CREATE: list[tuple[dict[str, Any], str]] = [
    ({"events": ["run.completed"]}, "url"),
    ({**GOOD, "url": "ftp://hooks.example/in"}, "url"),
    ({**GOOD, "url": "https://"}, "url"),
    ({**GOOD, "url": "https://user:pw@hooks.example/in"}, "url"),
    ({**GOOD, "url": "https://hooks.example/" + "x" * 2_048}, "url"),
    ({**GOOD, "url": 5}, "url"),
    ({**GOOD, "url": "http://127.0.0.1:9/in"}, "url"),
    ({**GOOD, "url": "http://169.254.169.254/latest"}, "url"),
    ({"url": GOOD["url"]}, "events"),
    ({**GOOD, "events": []}, "events"),
    ({**GOOD, "events": ["run.completed", "run.exploded"]}, "run.exploded"),
    ({**GOOD, "events": "run.completed"}, "events"),
    ({**GOOD, "events": ["run.completed"] * 7}, "events"),
    ({**GOOD, "subject": ""}, "subject"),
    ({**GOOD, "subject": "s" * 201}, "subject"),
    ({**GOOD, "agent_id": "not-an-id"}, "agent_id"),
    ({**GOOD, "description": "d" * 501}, "description"),
    ({**GOOD, "secret": "whsec_mine"}, "secret"),
]

BAD_PATCH: list[tuple[dict[str, Any], str]] = [
    ({"enabled": "yes"}, "enabled"),
    ({"events": []}, "events"),
    ({"events": ["nope"]}, "nope"),
    ({"url": "mailto:ops@example.com"}, "url"),
    ({"url": "http://10.1.2.3/in"}, "url"),
    ({"description": "d" * 501}, "description"),
    ({"id": "01a22b9d-0000-7000-8000-000000000001"}, "id"),
]


@pytest.mark.parametrize(("body", "named"), BAD_CREATE, ids=[f"create-{n}-{i}" for i, (_, n) in enumerate(BAD_CREATE)])
async def test_a_bad_endpoint_is_refused_naming_the_field(api: Api, body: dict[str, Any], named: str) -> None:
    answer = await api.key.post("/v1/webhooks", json=body)
    assert answer.status_code == 400, answer.text
    assert named in answer.json()["error"]["message"]
    assert (await api.key.get("/v1/webhooks")).json()["items"] == []


@pytest.mark.parametrize(("body", "named"), BAD_PATCH, ids=[f"patch-{n}-{i}" for i, (_, n) in enumerate(BAD_PATCH)])
async def test_a_bad_change_is_refused_and_changes_nothing(api: Api, body: dict[str, Any], named: str) -> None:
    created = (await api.key.post("/v1/webhooks", json=GOOD)).json()
    answer = await api.key.patch(f"/v1/webhooks/{created['id']}", json=body)
    assert answer.status_code == 400, answer.text
    assert named in answer.json()["error"]["message"]
    after = (await api.key.get(f"/v1/webhooks/{created['id']}")).json()
    assert {k: v for k, v in created.items() if k != "secret"} == after


async def test_unknown_ids_and_cursors(api: Api) -> None:
    assert (await api.key.get("/v1/webhooks/nope")).status_code == 404
    missing = "01a22b9d-0000-7000-8000-000000000001"
    assert (await api.key.patch(f"/v1/webhooks/{missing}", json={"description": "x"})).status_code == 404
    assert (await api.key.post(f"/v1/webhooks/{missing}/test")).status_code == 404
    assert (await api.key.post(f"/v1/webhooks/{missing}/rotate-secret")).status_code == 404
    created = (await api.key.post("/v1/webhooks", json=GOOD)).json()
    bad_cursor = await api.key.get(f"/v1/webhooks/{created['id']}/deliveries", params={"after": "x"})
    assert bad_cursor.status_code == 400
    assert "after" in bad_cursor.json()["error"]["message"]
    retry = await api.key.post(f"/v1/webhooks/{created['id']}/deliveries/{'m' * 300}/retry")
    assert retry.status_code == 404


async def test_a_workspace_holds_at_most_100_endpoints(api: Api) -> None:
    for _ in range(MAX_ENDPOINTS):
        assert (await api.key.post("/v1/webhooks", json=GOOD)).status_code == 201
    past = await api.key.post("/v1/webhooks", json=GOOD)
    assert past.status_code == 400, past.text
    assert "100" in past.json()["error"]["message"]
    listing = (await api.key.get("/v1/webhooks", params={"limit": 200})).json()
    assert len(listing["items"]) == MAX_ENDPOINTS
    # Deleting one makes room again.
    assert (await api.key.delete(f"/v1/webhooks/{listing['items'][0]['id']}")).status_code == 204
    assert (await api.key.post("/v1/webhooks", json=GOOD)).status_code == 201
