"""The built-in server tools: the current time, and arithmetic the model should not do in its head."""

from __future__ import annotations

import ast
import operator
from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from workers.tools.registry import Registry, ServerTool


class TimeArgs(BaseModel):
    timezone: Annotated[str, Field(description="An IANA time zone such as Europe/Paris")] = "UTC"


async def current_time(args: TimeArgs) -> str:
    try:
        zone = UTC if args.timezone == "UTC" else ZoneInfo(args.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {args.timezone!r}; use an IANA name such as Europe/Paris") from None
    return datetime.now(zone).isoformat(timespec="seconds")


class CalculateArgs(BaseModel):
    expression: Annotated[str, Field(max_length=500, description="Arithmetic: numbers, + - * / // % ** ( )")]


_OPERATORS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_MAX_EXPONENT = 1000


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        result: float | int = _OPERATORS[type(node.op)](_evaluate(node.operand))
        return result
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        # Bounded so a tool call cannot tie a worker up computing a huge power.
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponents are limited to {_MAX_EXPONENT}")
        result = _OPERATORS[type(node.op)](left, right)
        return result
    raise ValueError("only numbers, + - * / // % ** and parentheses are allowed")


async def calculate(args: CalculateArgs) -> str:
    try:
        tree = ast.parse(args.expression, mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {args.expression!r}") from None
    try:
        return str(_evaluate(tree))
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("the result is too large for a floating-point number") from None


BUILTINS = Registry(
    [
        ServerTool("current_time", "The current date and time, in UTC or a given time zone.", TimeArgs, current_time),
        ServerTool("calculate", "Evaluate an arithmetic expression exactly.", CalculateArgs, calculate),
    ]
)
