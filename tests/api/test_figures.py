"""The deployment's figures (/metrics/cluster) come back to zero on every way a client or a run can end:
the gauges are moved up and down by the scripts, so a path that forgot one would leave them off forever."""

from __future__ import annotations

from tests.api_client import Api, of_type
from tests.helpers import Exposition

CALL = '/call client__web__highlight_row {"row_id": "7"}'


async def figures(api: Api) -> Exposition:
    return Exposition((await api.key.get("/metrics/cluster")).text)


async def test_every_way_out_brings_clients_and_runs_back_to_zero(api: Api) -> None:
    # A run cancelled while its call is owed.
    cancelled = await api.session()
    await api.register(cancelled)
    await api.register(cancelled, name="tab", ttl=None)
    await api.send(cancelled, CALL)
    await api.wait_for(cancelled, lambda es: bool(of_type(es, "client_tool_dispatched")))
    async with api.as_session(cancelled) as client:
        assert (await client.post(f"/v1/sessions/{cancelled.id}/cancel")).status_code == 200
    # A session deleted with two clients, a run waiting on a call and a run queued behind it.
    deleted = await api.session(message_concurrency="queue")
    await api.register(deleted)
    await api.register(deleted, name="other", ttl=None)
    await api.send(deleted, CALL)
    await api.send(deleted, "hello")
    await api.wait_for(deleted, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert (await api.key.delete(f"/v1/sessions/{deleted.id}")).status_code == 204
    # A client that leaves, and one that lapses.
    leaving = await api.session()
    gone = await api.register(leaving)
    async with api.as_session(leaving) as client:
        assert (await client.delete(f"/v1/sessions/{leaving.id}/clients/{gone['id']}")).status_code == 204
    await api.register(leaving, name="lapsing", ttl=5)
    # "web" and "tab" of the cancelled session, and "lapsing".
    assert (await figures(api))("switchboard_clients_active") == 3
    await api.wait_for(leaving, lambda es: len(of_type(es, "client_left")) == 2, timeout=8)
    async with api.as_session(cancelled) as client:
        listed = (await client.get(f"/v1/sessions/{cancelled.id}/clients")).json()["items"]
        assert {c["name"] for c in listed} == {"web", "tab"}
        for registration in listed:
            left = await client.delete(f"/v1/sessions/{cancelled.id}/clients/{registration['id']}")
            assert left.status_code == 204

    after = await figures(api)
    assert after("switchboard_clients_active") == 0
    assert after("switchboard_runs", state="active") == 0
    assert after("switchboard_runs_started_total") == 2
    assert after("switchboard_runs_ended_total", outcome="cancelled") == 3  # two that ran, one still queued
    assert after("switchboard_calls_dispatched_total") == 2
    assert after("switchboard_calls_failed_total", reason="run_gone") == 2
    assert after("switchboard_calls_acked_total") == 0
