"""The frames between a process and its argument-checking child: a 4-byte big-endian length, then that
many bytes of JSON."""

from __future__ import annotations

import struct
from typing import Any, BinaryIO

from common.codec import dumps

HEADER = struct.Struct(">I")


def read_frame(stream: BinaryIO) -> bytes | None:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    body = stream.read(size)
    return body if len(body) == size else None


def frame(payload: dict[str, Any]) -> bytes:
    body = dumps(payload).encode()
    return HEADER.pack(len(body)) + body
