"""A front door's request body, decoded once and only as far as the door reads it (docs/ag-ui.md,
docs/ai-sdk.md).

A frontend sends its whole conversation with every request, and a door acts on its end alone (the newest
message, the newest assistant message and the tool results after it). Validating all of it as the
protocol's models took 60 ms of the event loop for 11,000 messages before the body was refused. So a body
is decoded with msgspec into structs holding only the fields a door reads: everything else is skipped
over, never built. Every list a door reads is `Bounded`, refused at the first item past its limit, so a
body is refused in time proportional to what it was read for, never to what it holds beyond a bound
(bench/doors.py holds the cost of a refusal to that of a plain `/events` body of the same size).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, TypeVar, get_args

import msgspec

from api.errors import unreadable
from broker.errors import InvalidRequest

# The bounds every door shares: messages in a body, and parts in one message (an AI SDK assistant
# message holds a whole run: a part per step, text and tool call). A conversation passes
# SWITCHBOARD_MAX_BODY_BYTES (1 MiB) long before it has this many messages.
MAX_MESSAGES = 4_096
MAX_PARTS = 1_024

_T = TypeVar("_T")
# A JSON null read as a value (a result's output, a resume entry's payload, a tool's parameters).
NULL = msgspec.Raw(b"null")


class Bounded(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """A JSON array of at most as many items as the subclass has fields (`bounded`), each decoded as the
    subclass says (undecoded, by default).

    msgspec checks a list's `max_length` only once it has read the whole list, building every item; an
    array-like struct with no room for another item refuses it as it meets it, so a list far past its
    bound costs no more than one at it. Like every struct a door reads into, it holds only what JSON
    decodes to, never a cycle, so the garbage collector need not track it (`gc=False`)."""

    def items(self) -> list[Any]:
        """The list's items, in order."""
        names = self.__struct_fields__
        # The fields past the list's end are all UNSET (no JSON value decodes to it): the first of them,
        # by bisection (reading each of thousands of fields to find a list of three costs more than it).
        low, high = 0, len(names)
        while low < high:
            middle = (low + high) // 2
            if getattr(self, names[middle]) is msgspec.UNSET:
                high = middle
            else:
                low = middle + 1
        return [getattr(self, name) for name in names[:low]]


class Skipped(msgspec.Struct, array_like=True):
    """Any JSON array, its items read past and never built: a list the door reads only in some messages
    (it reads it again from that message, `Bounded`, where it does)."""


@functools.cache
def bounded(limit: int, item: Any = msgspec.Raw) -> type[Bounded]:
    """The Bounded list of at most `limit` items, each decoded as `item` (a struct, or undecoded)."""
    fields = [(f"item{n}", item | msgspec.UnsetType, msgspec.UNSET) for n in range(limit)]
    made = msgspec.defstruct(
        f"AtMost{limit}", fields, bases=(Bounded,), array_like=True, forbid_unknown_fields=True, gc=False
    )
    assert issubclass(made, Bounded)
    return made


_PATH = re.compile(r" - at `\$([^`]*)`$")
_INDEX = re.compile(r"\[(\d+)\]")
_MISSING = re.compile(r"^Object missing required field `([^`]+)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `([^`]+)`$")
_TOO_MANY = re.compile(r"^Expected `array` of at most length (\d+)")


def _join(*parts: str) -> str:
    return ".".join(part for part in parts if part)


def _refusal(error: msgspec.ValidationError, raw: bytes | msgspec.Raw, kind: type, where: str) -> InvalidRequest:
    """msgspec's refusal of `raw` as `kind`, a 400 naming the field (`where` is the decoded value's own
    place in the body)."""
    text = str(error)
    place = ""
    found = _PATH.search(text)
    if found is not None:
        text = text[: found.start()]
        place = _INDEX.sub(r".\1", found.group(1)).lstrip(".")
    field = _join(where, place)
    if missing := _MISSING.match(text):
        return InvalidRequest(f"{_join(field, missing.group(1))}: required")
    if unknown := _UNKNOWN.match(text):
        return InvalidRequest(f"{_join(field, unknown.group(1))}: not a field it takes")
    if too_many := _TOO_MANY.match(text):
        limit = int(too_many.group(1))
        field = _join(where, _past_its_bound(raw, kind, limit))
        return InvalidRequest(f"{field or 'body'}: more than {limit:,} items; the limit is {limit:,}")
    return InvalidRequest(f"{field or 'body'}: {text}")


def _past_its_bound(raw: bytes | msgspec.Raw, kind: type, limit: int) -> str:
    """The field of `kind` (its name in the body) whose list in `raw` runs past `limit` items: msgspec
    names no place for a list past its bound, only the bound, so when two of the struct's lists have
    that bound each is read again alone to see which (a refusal's cost, paid only then). A door's
    lists are fields of the struct it decodes into, never inside their items (it decodes an item that
    holds one by itself); "" when none has that bound."""
    named = [name for name, field in _lists(kind).items() if len(field.__struct_fields__) == limit]
    if len(named) > 1:
        named = [name for name in named if _overflows(raw, _alone(kind, name))]
    return named[0] if named else ""


@functools.cache
def _lists(kind: type) -> dict[str, type[Bounded]]:
    """Each Bounded list `kind` reads, by its field's name in the body."""
    found: dict[str, type[Bounded]] = {}
    for field in msgspec.structs.fields(kind):
        for option in get_args(field.type) or (field.type,):
            if isinstance(option, type) and issubclass(option, Bounded):
                found[field.encode_name] = option
    return found


@functools.cache
def _alone(kind: type, name: str) -> type:
    """A struct reading only the field of `kind` named `name` in the body (every other one skipped)."""
    (field,) = [field for field in msgspec.structs.fields(kind) if field.encode_name == name]
    return msgspec.defstruct(f"Only{name}", [(field.name, field.type, None)], rename={field.name: name}, gc=False)


def _overflows(raw: bytes | msgspec.Raw, alone: type) -> bool:
    try:
        msgspec.json.decode(raw, type=alone)
    except msgspec.ValidationError as error:
        return _TOO_MANY.match(str(error)) is not None
    return False


def decode(raw: bytes | msgspec.Raw, kind: type[_T], where: str = "") -> _T:
    """`raw` as `kind`; 400 naming the field that is wrong ("body" when the body is not JSON), a list
    past its bound included."""
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as error:
        # A body that is not JSON is refused as that first, wherever its shape went wrong before the
        # parser got to the break (skipping it through costs far less than decoding it did).
        try:
            msgspec.json.decode(raw, type=msgspec.Raw)
        except (msgspec.DecodeError, UnicodeDecodeError):
            raise InvalidRequest(_not_json(raw)) from None
        raise _refusal(error, raw, kind, where) from None
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise InvalidRequest(_not_json(raw)) from None


def _not_json(raw: bytes | msgspec.Raw) -> str:
    # msgspec names a byte (or, for text that is not UTF-8, its place in one string); the standard parser
    # names the line and column in the body, as every route's refusal of a body that is not JSON does
    # (only a whole body can fail here: a Raw was decoded once). It stops where the body breaks.
    try:
        json.loads(bytes(raw))
    except (ValueError, RecursionError) as cause:
        return unreadable(cause)
    return "body: invalid JSON"


def value(raw: msgspec.Raw) -> Any:
    """A JSON value the door reads whole (a tool's schema, a result's content, an approval's answer)."""
    return msgspec.json.decode(raw)
