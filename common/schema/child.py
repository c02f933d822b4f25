"""The process that runs argument checks too large for an event loop (`python -m broker.schema.child
STEPS SECONDS`): frames in on stdin, frames out on stdout, one check at a time, each under the budget.

A frame is a 4-byte big-endian length and that many bytes of JSON. Out first: `{"ready": true}`. Then
in: `{"schema": <the schema's JSON text>, "arguments": <value>}`; out: `{"problem": <text>}` ('' when
the arguments fit) or `{"over_budget": true}`. The parent kills this process if an answer is late, so
even a check the meter cannot interrupt (a single step in C) ends.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any, BinaryIO

from jsonschema.protocols import Validator

from common.codec import loads
from common.schema.budget import Budgeted, OverBudget
from common.schema.frames import frame, read_frame

_COMPILED = 256


def serve(steps: int, seconds: float, stdin: BinaryIO, stdout: BinaryIO) -> None:
    budgeted = Budgeted()
    compiled: OrderedDict[str, Validator] = OrderedDict()
    # Imports take a while on a busy machine: the parent's clock for a check starts after this.
    stdout.write(frame({"ready": True}))
    stdout.flush()
    while (request := read_frame(stdin)) is not None:
        message = loads(request)
        text = message["schema"]
        validator = compiled.get(text)
        if validator is None:
            validator = compiled[text] = budgeted.compile(loads(text))
            if len(compiled) > _COMPILED:
                compiled.popitem(last=False)
        compiled.move_to_end(text)
        try:
            answer: dict[str, Any] = {"problem": budgeted.problem(validator, message["arguments"], steps, seconds)}
        except OverBudget:
            answer = {"over_budget": True}
        stdout.write(frame(answer))
        stdout.flush()


def main() -> None:
    steps, seconds = int(sys.argv[1]), float(sys.argv[2])
    serve(steps, seconds, sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
