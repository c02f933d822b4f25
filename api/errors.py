"""Every refusal as the envelope `{"error": {"code", "message"}}`, with its code's status (docs/http-api.md, Errors)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from broker.errors import ErrorCode, InvalidRequest, RedisUnreachable, SwitchboardError, TooManyRequests
from broker.refusals import Outcome

logger = logging.getLogger(__name__)

# Every outcome's HTTP status: those of an operation that did what was asked, then every refusal's.
STATUS: dict[str, int] = {
    Outcome.OK: 200,
    Outcome.CREATED: 201,
    Outcome.ACCEPTED: 202,
    Outcome.EMPTY: 204,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    ErrorCode.CONFLICT: 409,
    ErrorCode.PRECONDITION_FAILED: 412,
    ErrorCode.CLIENT_OUTDATED: 426,
    ErrorCode.TOO_MANY_REQUESTS: 429,
    ErrorCode.INTERNAL: 500,
    ErrorCode.UNAVAILABLE: 503,
}
_CODE_OF_STATUS = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED, 401: ErrorCode.UNAUTHORIZED}
_OUTCOME_OF_STATUS = {status: outcome for outcome, status in STATUS.items()}


def outcome_of(status: int) -> str:
    """The outcome an answer's status stands for, as a receipt keeps it."""
    return _OUTCOME_OF_STATUS[status]


def status_of(outcome: str) -> int:
    """The status of an outcome a receipt kept (one kept by a release before outcomes holds the status)."""
    return int(outcome) if outcome.isdigit() else STATUS[outcome]


_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def _methods_of(request: Request) -> list[str]:
    """The methods some route of the request's path takes: each asked of the routes as that method."""
    routes: list[BaseRoute] = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    ]


def envelope(code: ErrorCode | str, message: str) -> dict[str, Any]:
    return {"error": {"code": str(code), "message": message}}


UNEXPECTED = envelope(ErrorCode.INTERNAL, "an unexpected error occurred; it was logged")


def error_headers(error: SwitchboardError) -> dict[str, str]:
    headers = {}
    if isinstance(error, TooManyRequests | RedisUnreachable):
        headers["Retry-After"] = str(error.retry_after_s)
    if error.code is ErrorCode.UNAUTHORIZED:
        headers["WWW-Authenticate"] = "Bearer"
    return headers


def refused(error: SwitchboardError) -> dict[str, Any]:
    """The envelope of a refusal, logged first when it is our failure rather than the caller's."""
    if error.code in (ErrorCode.INTERNAL, ErrorCode.UNAVAILABLE):
        logger.error("request failed: %s", error.message)
    return envelope(error.code, error.message)


def error_response(error: SwitchboardError) -> JSONResponse:
    return JSONResponse(refused(error), status_code=STATUS[error.code], headers=error_headers(error))


def _field(location: Sequence[Any]) -> str:
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("body", "query", "path", "header") and not path:
            continue
        # Validator names and union tags in the path say nothing to the caller (`form-`: the tags of a
        # field that takes one of two JSON forms, api/schemas/agents.py PolicyValue).
        elif not str(part).startswith(("function-", "tagged-union", "form-")):
            path += f".{part}" if path else str(part)
    return path or "body"


def describe_validation(errors: Sequence[Any]) -> str:
    """Pydantic's errors as `field: what is wrong`, the field written the way a caller writes it."""
    parts = []
    for error in errors[:3]:
        message = str(error.get("msg", "is invalid")).removeprefix("Value error, ")
        parts.append(f"{_field(error.get('loc', ()))}: {message}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def invalid_json(doc: str, position: int, reason: str) -> str:
    """A body that is not JSON, as `body: invalid JSON at line L column C (char N): reason`."""
    line = doc.count("\n", 0, position) + 1
    column = position - doc.rfind("\n", 0, position)
    return f"body: invalid JSON at line {line} column {column} (char {position}): {reason}"


def unreadable(cause: BaseException | None) -> str:
    """Why a body the JSON parser could not even start on was refused."""
    if isinstance(cause, UnicodeDecodeError):
        return f"body: invalid JSON: it is not UTF-8 text (byte {cause.start} cannot start a character there)"
    if isinstance(cause, RecursionError):
        return "body: invalid JSON: it is nested deeper than the parser goes"
    if isinstance(cause, json.JSONDecodeError):
        return invalid_json(cause.doc, cause.pos, cause.msg)
    return "body: invalid JSON"


JSON_TYPE = "application/json"


def _is_json(content_type: str) -> bool:
    kind = content_type.split(";")[0].strip().lower()
    return kind == JSON_TYPE or (kind.startswith("application/") and kind.endswith("+json"))


def not_json_type(content_type: str | None) -> str | None:
    """Why a body sent with `content_type` (None: no Content-Type at all) is not read as JSON, or None when
    it is JSON's."""
    if content_type is not None and _is_json(content_type):
        return None
    sent = "has no Content-Type" if content_type is None else f"has Content-Type {content_type[:100]!r}"
    curl = "" if content_type is None else " (curl -d sends application/x-www-form-urlencoded)"
    return (
        f"body: the body must be JSON sent with Content-Type: {JSON_TYPE}; this request {sent}{curl}: add "
        f"-H 'Content-Type: {JSON_TYPE}'"
    )


def require_json_type(request: Request) -> None:
    """For a route that reads its body itself (the front doors): InvalidRequest unless it was sent as JSON."""
    refusal = not_json_type(request.headers.get("content-type"))
    if refusal is not None:
        raise InvalidRequest(refusal)


def _not_sent_as_json(request: Request, errors: Sequence[Any]) -> str | None:
    """The refusal of a body sent with no Content-Type, or one that is not JSON (FastAPI then hands the
    route its bytes, which no body model takes), or None."""
    if not any(tuple(error.get("loc", ())) == ("body",) and error.get("type") != "missing" for error in errors):
        return None
    return not_json_type(request.headers.get("content-type"))


def _validation_message(request: Request, error: RequestValidationError) -> str:
    errors = error.errors()
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid" and isinstance(error.body, str):
        location = tuple(first.get("loc", ()))
        position = location[1] if len(location) == 2 and isinstance(location[1], int) else 0
        return invalid_json(error.body, position, str(first.get("ctx", {}).get("error", "not JSON")))
    return _not_sent_as_json(request, errors) or describe_validation(errors)


def install(app: FastAPI) -> None:
    @app.exception_handler(SwitchboardError)
    async def _switchboard(_: Request, error: SwitchboardError) -> Response:
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, error: RequestValidationError) -> Response:
        return JSONResponse(envelope(ErrorCode.INVALID_REQUEST, _validation_message(request, error)), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, error: StarletteHTTPException) -> Response:
        headers = dict(error.headers or {})
        if error.status_code == 404:
            message = f"no route {request.url.path} is provided by this server"
        elif error.status_code == 405:
            # Starlette names only the first route that matched the path; every route of it counts.
            allowed = ", ".join(_methods_of(request))
            headers["Allow"] = allowed
            message = f"{request.method} is not allowed on {request.url.path}" + (
                f"; it takes {allowed}" if allowed else ""
            )
        elif error.status_code == 400 and isinstance(error.__cause__, ValueError | RecursionError):
            # FastAPI's "There was an error parsing the body": what the parser could not read, in words.
            message = unreadable(error.__cause__)
        else:
            message = str(error.detail)
        code = _CODE_OF_STATUS.get(error.status_code, ErrorCode.INVALID_REQUEST)
        return JSONResponse(envelope(code, message), status_code=error.status_code, headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, error: Exception) -> Response:
        logger.exception("unexpected error")
        return JSONResponse(UNEXPECTED, 500)
