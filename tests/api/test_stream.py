"""The SSE stream: cursor frame first, every event once and in order, resumable, never closed on purpose."""

from __future__ import annotations

import asyncio
import socket

import pytest

from common.events.build import SDK_EVENT_TYPES
from tests.api_client import Api, run_over
from tests.sse import Frames


async def test_cursor_frame_then_retry_then_the_whole_log(api: Api) -> None:
    session = await api.session()
    await api.send(session, "hi")
    logged = await api.wait_for(session, run_over)
    async with api.stream(session, after_seq=0) as frames:
        cursor = await frames.next()
        assert (cursor.id, cursor.data) == ("0", [])
        retry = await frames.next()
        assert retry.retry == "3000"
        seen = [await frames.event() for _ in logged]
    assert seen == logged
    assert all(event["type"] in SDK_EVENT_TYPES for event in seen)
    # Timing events are logged but shown only on request, so the default view's seqs only rise.
    seqs = [e["seq"] for e in seen]
    assert seqs == sorted(set(seqs))


async def test_with_timing_the_log_is_contiguous(api: Api) -> None:
    session = await api.session()
    await api.send(session, "hi")
    await api.wait_for(session, run_over)
    page = (await api.key.get(f"/v1/sessions/{session.id}/events", params={"order": "asc", "include": "timing"})).json()
    seqs = [e["seq"] for e in page["items"]]
    assert seqs == list(range(1, len(seqs) + 1))
    timing = [e for e in page["items"] if e["type"] == "custom"]
    assert [t["payload"]["scope"] for t in timing] == ["step", "run"]
    assert timing[-1]["payload"]["outcome"] == "run_completed"
    async with api.stream(session, after_seq=0, include="timing") as frames:
        await frames.next()
        streamed = [await frames.event() for _ in seqs]
    assert streamed == page["items"]


async def test_no_position_tails_from_the_head(api: Api) -> None:
    session = await api.session()
    await api.send(session, "before")
    before = await api.wait_for(session, run_over)
    async with api.stream(session) as frames:
        cursor = await frames.next()
        # The cursor is the head (a hidden timing event may be it): never the seq the stream sends first.
        assert int(str(cursor.id)) >= before[-1]["seq"]
        await api.send(session, "after")
        first = await frames.event()
    assert first["seq"] == int(str(cursor.id)) + 1
    assert first["type"] == "message_user"


async def test_last_event_id_resumes_after_that_seq(api: Api) -> None:
    session = await api.session()
    await api.send(session, "hello")
    logged = await api.wait_for(session, run_over)
    async with api.stream(session, headers={"Last-Event-ID": "3"}) as frames:
        assert (await frames.next()).id == "3"
        resumed = [await frames.event() for _ in logged[3:]]
    assert resumed == logged[3:]


async def test_a_quiet_stream_gets_keep_alives_and_stays_open(api: Api) -> None:
    session = await api.session()
    async with api.stream(session) as frames:
        await frames.next()
        await frames.next()
        quiet = await frames.next(timeout=3)
        assert quiet.comments == ["keep-alive"]
        await api.send(session, "still here")
        assert (await frames.event())["type"] == "message_user"


async def open_streams(api: Api) -> float:
    metrics = (await api.key.get("/metrics")).text
    return float(next(line.split()[1] for line in metrics.splitlines() if line.startswith("switchboard_open_streams")))


async def test_a_client_that_goes_away_ends_its_stream(api: Api) -> None:
    session = await api.session()
    async with api.stream(session) as frames:
        await frames.next()
        assert await open_streams(api) == 1
    # Nothing more is published on the session: the stream ends on the disconnect alone.
    async with asyncio.timeout(5):
        while await open_streams(api) != 0:
            await asyncio.sleep(0.05)


async def test_every_tab_sees_the_same_live_log(api: Api) -> None:
    session = await api.session()
    async with api.stream(session) as one, api.stream(session) as two:
        tabs = [one, two]
        for tab in tabs:
            await tab.next()
        await api.send(session, "broadcast")
        logged = await api.wait_for(session, run_over)

        async def read(tab: Frames) -> list[dict[str, object]]:
            return [await tab.event() for _ in logged[1:]]

        seen = await asyncio.gather(*(read(tab) for tab in tabs))
    # The tabs opened at the head, after `session_created`.
    assert seen[0] == seen[1] == logged[1:]


@pytest.mark.parametrize("bad", ["-1", "x", "1.5"])
async def test_a_bad_position_is_refused(api: Api, bad: str) -> None:
    session = await api.session()
    async with api.as_session(session) as client:
        answer = await client.get(f"/v1/sessions/{session.id}/events/stream", params={"after_seq": bad})
    assert answer.status_code == 400
    assert "after_seq" in answer.json()["error"]["message"]


async def test_listing_pages_both_ways_with_exclusive_bounds(api: Api) -> None:
    session = await api.session()
    await api.send(session, "one")
    logged = await api.wait_for(session, run_over)
    seqs = [e["seq"] for e in logged]
    get = api.key.get
    page = (await get(f"/v1/sessions/{session.id}/events", params={"order": "asc", "limit": 2})).json()
    assert [e["seq"] for e in page["items"]] == seqs[:2]
    assert page["next_cursor"] == seqs[1]
    page = (await get(f"/v1/sessions/{session.id}/events", params={"limit": 2})).json()
    assert [e["seq"] for e in page["items"]] == seqs[::-1][:2]
    assert page["next_cursor"] == seqs[-2]
    window: dict[str, str | int] = {"order": "asc", "after_seq": seqs[0], "before_seq": seqs[3]}
    page = (await get(f"/v1/sessions/{session.id}/events", params=window)).json()
    assert [e["seq"] for e in page["items"]] == seqs[1:3]
    assert page["next_cursor"] is None


async def read_chunk(reader: asyncio.StreamReader) -> bytes:
    """One chunk of a chunked HTTP/1.1 body."""
    size = int((await reader.readuntil(b"\r\n")).strip(), 16)
    data = await reader.readexactly(size + 2)
    assert data.endswith(b"\r\n")
    return data[:-2]


async def test_a_stream_not_read_for_a_while_gets_every_event_once_in_order(api: Api) -> None:
    """Its socket fills, so the hub leaves its events to the stream's task, which waits for the socket
    to drain; once the client reads again it gets them all, each in one whole chunk or more."""
    session = await api.session()
    client = await api.register(session)
    host, port = api.stack.url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
    path = f"/v1/sessions/{session.id}/events/stream"
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {session.token}\r\n\r\n".encode())
    try:
        assert b" 200 " in await reader.readuntil(b"\r\n\r\n")
        cursor = int((await read_chunk(reader)).split(b"\n")[0].removeprefix(b"id: "))
        # About 13 MB of events while the client reads nothing: more than the socket buffers hold.
        tools = [{"name": f"tool_{n}", "description": "x" * 4000, "parameters": {"type": "object"}} for n in range(64)]
        async with api.as_session(session) as http:
            for _ in range(50):
                put = await http.put(f"/v1/sessions/{session.id}/clients/{client['id']}/tools", json={"tools": tools})
                assert put.status_code == 200, put.text
        logged = [e["seq"] for e in await api.events(session) if e["seq"] > cursor]
        seen: list[int] = []
        async with asyncio.timeout(30):
            while not seen or seen[-1] < logged[-1]:
                body = await read_chunk(reader)
                frames = [frame for frame in body.split(b"\n\n") if frame.startswith(b"id: ")]
                seen += [int(frame.split(b"\n")[0].removeprefix(b"id: ")) for frame in frames if b"\ndata: " in frame]
    finally:
        writer.close()
    assert len(logged) == 50
    assert seen == logged
