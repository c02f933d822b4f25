"""JSON in and out of Redis, ids and timestamps; no pickle anywhere."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        # orjson refuses an integer past 64 bits, which JSON allows (a tool's schema or an approver's
        # arguments may hold one); the standard library writes it. Read back, it is a float, as in Lua.
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(data: str | bytes) -> Any:
    return orjson.loads(data)


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace: the form hashed for `args_hash` and request fingerprints."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


def sha256_hex(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def uuid7() -> str:
    """A time-ordered UUID (RFC 9562 v7) in canonical form, so lex order of ids is creation order."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64 | 0b10 << 62
    value |= rand & 0x3FFF_FFFF_FFFF_FFFF
    return str(uuid.UUID(int=value))


_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def canonical_uuid(value: str) -> str | None:
    """The canonical lowercase form of a UUID written any way, or None when it is not one."""
    # Nearly every id arrives canonical already; parsing one costs more than the request's script.
    if _CANONICAL_UUID.fullmatch(value):
        return value
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex}"


def token(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def rfc3339(ms: int) -> str:
    """Milliseconds since the epoch as RFC 3339 UTC with a `Z`, the form every timestamp takes."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def rfc3339_ms(text: str) -> int:
    """The milliseconds since the epoch of an RFC 3339 time (`rfc3339`'s inverse)."""
    return to_ms(datetime.fromisoformat(text))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def to_ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)
