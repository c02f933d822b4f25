"""Reading a stored or streamed event as its typed record (common.events.catalogue): the one place an
event's JSON is decoded into fields."""

from __future__ import annotations

import msgspec

from common.events.catalogue import AnyEvent

_DECODER: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)


class UnknownEvent(ValueError):
    """An event that no declaration of the catalogue reads (a type it does not know, or a field of the wrong
    type)."""


def decode(data: bytes | str) -> AnyEvent:
    """The typed event `data` holds."""
    try:
        return _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise UnknownEvent(str(exc)) from None


def encode(event: AnyEvent) -> str:
    """An event's body as a script appends it: its fields in their declared order, without `seq` and
    `created_at` (the log splices them in front)."""
    return msgspec.json.encode(event).decode()
