"""Reading a stored or streamed event as its typed record (common.events.catalogue): the one place an
event's JSON is decoded into fields."""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from common.events.catalogue import AnyEvent, Custom, StepTiming

_DECODER: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)
logger = logging.getLogger(__name__)


class UnknownEvent(ValueError):
    """An event that no declaration of the catalogue reads (a type it does not know, or a field of the wrong
    type)."""


def decode(data: bytes | str) -> AnyEvent:
    """The typed event `data` holds."""
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise UnknownEvent(str(exc)) from None


def decode_known(data: bytes | str) -> AnyEvent | None:
    """The typed event `data` holds; None, and a warning, for one no declaration reads: a consumer
    following a stream passes over it (it shows nothing) rather than ending mid-run."""
    try:
        return decode(data)
    except UnknownEvent as exc:
        logger.warning("an event no declaration reads was passed over: %s", exc)
        return None


def from_values(values: Any) -> AnyEvent:
    """The typed event of one already read as JSON values (a service's reply that carries an event)."""
    try:
        event: AnyEvent = msgspec.convert(values, AnyEvent)
    except msgspec.ValidationError as exc:
        raise UnknownEvent(str(exc)) from None
    return event


def step_timing(event: Custom) -> StepTiming | None:
    """The run and step a step's timing event ends; None for any other `custom` event (a run's timing,
    another kind)."""
    if event.kind != "timing":
        return None
    try:
        return msgspec.convert(event.payload, StepTiming)
    except msgspec.ValidationError:
        return None


def encode(event: AnyEvent) -> str:
    """An event's body as a script appends it: its fields in their declared order, without `seq` and
    `created_at` (the log splices them in front)."""
    return msgspec.json.encode(event).decode()
