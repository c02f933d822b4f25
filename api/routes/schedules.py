"""A session's schedules (an extension): input posted later, once (`at`) or by a cron expression."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api.deps import Authenticated, ManagedSession, ReadSession
from api.keyed import Answer, Keyed, keyed
from api.schemas.common import ErrorBody, moment
from api.schemas.schedules import CreateScheduleBody, ScheduleBody, SchedulePage
from api.state import State
from broker.errors import InvalidRequest, NotFound
from broker.services.schedules import Schedule
from common.codec import canonical_uuid, now_ms, uuid7
from common.schedules import cron_problem, next_fire_ms, time_zone

router = APIRouter(
    prefix="/v1/sessions/{session_id}/schedules", tags=["schedules"], responses={400: {"model": ErrorBody}}
)


def _body(schedule: Schedule) -> ScheduleBody:
    return ScheduleBody(
        id=schedule.id,
        cron=schedule.cron,
        at=None if schedule.at_ms is None else moment(schedule.at_ms),
        timezone=schedule.timezone,
        text=schedule.text,
        next_fire_at=moment(schedule.next_fire_ms),
        created_at=moment(schedule.created_ms),
    )


def _json(schedule: Schedule) -> bytes:
    # `cron` or `at`, whichever the schedule has: the other is left out rather than null.
    return _body(schedule).model_dump_json(exclude_none=True).encode()


def _first_fire(body: CreateScheduleBody, zone: str, now_ms: int) -> tuple[int, int | None]:
    """(the first fire time, the `at` moment or None), both ms; InvalidRequest naming the field."""
    if (body.cron is None) == (body.at is None):
        raise InvalidRequest("cron, at: give exactly one of them (a cron expression, or one moment)")
    if body.at is not None:
        at_ms = round(body.at.timestamp() * 1000)
        if at_ms <= now_ms:
            raise InvalidRequest(f"at: {body.at.isoformat()} is in the past; a schedule fires in the future")
        return at_ms, at_ms
    cron = body.cron or ""
    problem = cron_problem(cron)
    if problem is not None:
        raise InvalidRequest(problem)
    first = next_fire_ms(cron, zone, now_ms)
    if first is None:
        raise InvalidRequest(f"cron: {cron!r} never matches a date to come")
    return first, None


@router.post("", status_code=201, response_model=ScheduleBody, response_model_exclude_none=True)
async def create_schedule(
    canonical: ManagedSession, body: CreateScheduleBody, request: Request, caller: Authenticated, state: State
) -> Response:
    """Add a schedule: at each fire time its `text` is posted as the session's input (`source`
    `external`, with `trigger: "schedule"` and `schedule_id`), by the session's message concurrency. At
    most 20 a session."""
    zone = body.timezone if body.timezone is not None else "UTC"
    try:
        time_zone(zone)
    except ValueError as error:
        raise InvalidRequest(str(error)) from None
    first_ms, at_ms = _first_fire(body, zone, now_ms())

    async def act(keyed_: Keyed) -> Answer:
        schedule = await state.broker.schedules.create(
            canonical,
            keyed_.seed["schedule_id"],
            cron=body.cron,
            at_ms=at_ms,
            timezone=zone,
            text=body.text,
            next_ms=first_ms,
        )
        return Answer(201, _json(schedule))

    return await keyed(request, caller, act, seed={"schedule_id": uuid7()}, session_id=canonical)


@router.get("", response_model=SchedulePage, response_model_exclude_none=True)
async def list_schedules(canonical: ReadSession, state: State) -> Response:
    """The session's schedules, oldest first; one page (a session holds at most 20)."""
    schedules = await state.broker.schedules.all(canonical)
    items = b",".join(_json(schedule) for schedule in schedules)
    return Response(b'{"items":[' + items + b'],"next_cursor":null}', media_type="application/json")


@router.delete("/{schedule_id}", status_code=204)
async def delete_schedule(session_id: str, schedule_id: str, canonical: ManagedSession, state: State) -> Response:
    """Remove a schedule: it fires no more. 404 for an id the session has not (an `at` schedule that
    fired is gone)."""
    schedule = canonical_uuid(schedule_id)
    if schedule is None:
        raise NotFound(f"no schedule {schedule_id} in this session")
    await state.broker.schedules.delete(canonical, schedule)
    return Response(status_code=204)
