"""What the OpenAI adapters (Responses and Chat Completions) share: the client made from an Endpoint, and
how the `openai` package's errors become ours."""

from __future__ import annotations

from typing import Any

import httpx2
import openai

from workers.models.base import Endpoint, ModelError, TransientModelError, Usage, count, provider_text
from workers.models.bounds import passed_bound
from workers.models.clouds import azure_openai
from workers.models.retry import RetryLater
from workers.models.wire import model_client
from workers.pinned import refused
from workers.retry_after import retry_after_s

_TRANSIENT_CODES = {"server_error", "rate_limit_exceeded", "server_is_overloaded", "slow_down", "timeout"}


def openai_client(endpoint: Endpoint) -> openai.AsyncOpenAI:
    """The `openai` client for an endpoint. Retries are ours (models/retry.py), so the budget spans the
    whole step. A workspace provider's requests go through the pinned client (`addresses`); the platform's
    (None) are the operator's. A provider on Azure gets the package's Azure client."""
    base_url, addresses, timeout_s = endpoint.base_url, endpoint.addresses, endpoint.timeout_s
    # Either way its responses are counted on the wire (workers/models/wire.py).
    http = model_client(
        base_url, addresses, timeout_s, openai.DefaultAsyncHttpxClient, openai.DEFAULT_CONNECTION_LIMITS
    )
    if endpoint.cloud is not None:
        return azure_openai(endpoint, http)
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=endpoint.api_key, max_retries=0, timeout=timeout_s, http_client=http
    )


def usage_of(usage: Any, inputs: str, outputs: str) -> Usage | None:
    """An OpenAI wire's counts, named `inputs` and `outputs` (Responses: input_tokens and output_tokens;
    Chat Completions: prompt_tokens and completion_tokens), each with its `_details` (cached_tokens, and
    reasoning_tokens); the input includes the cached, the output the reasoning."""
    if usage is None:
        return None
    cached, reasoning = field_of(usage, f"{inputs}_details"), field_of(usage, f"{outputs}_details")
    return Usage(
        input_tokens=count(field_of(usage, inputs)),
        output_tokens=count(field_of(usage, outputs)),
        cached_input_tokens=count(field_of(cached, "cached_tokens")) if cached is not None else None,
        reasoning_tokens=count(field_of(reasoning, "reasoning_tokens")) if reasoning is not None else None,
    )


def field_of(item: Any, name: str) -> Any:
    """A field of a streamed object, whether the SDK gave it as a model or a dict."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def failure(code: object, message: object, status: int | None = None, wait_s: float | None = None) -> ModelError:
    """A provider's refusal or failure as run_failed tells it; 429, 5xx and the transient codes are retried."""
    where = f"{status} " if status else ""
    kind = provider_text(code, "", limit=64)
    text = provider_text(message, "no message")
    if (status is not None and (status == 429 or status >= 500)) or kind in _TRANSIENT_CODES:
        return RetryLater(f"the OpenAI API answered {where}{kind}: {text}".replace("  ", " "), wait_s)
    return ModelError(f"the OpenAI API refused the request ({where}{kind or 'error'}): {text}".replace("( ", "("))


def error_of(error: openai.APIError) -> ModelError:
    """The `openai` package's error as ours: the status and the provider's own message, never the SDK's
    text (which holds the whole body)."""
    passed = passed_bound(error)
    if passed is not None:
        return passed
    refusal = refused(error)
    if refusal is not None:
        return ModelError(refusal.message)
    if isinstance(error, openai.APIConnectionError):
        cause = f" ({error.__cause__})" if isinstance(error.__cause__, httpx2.ConnectError) else ""
        return TransientModelError(f"the OpenAI API could not be reached: {error.message}{cause}")
    detail = error_detail(error)
    code = detail.get("code") or detail.get("type")
    if isinstance(error, openai.APIStatusError):
        wait = retry_after_s(error.response.headers.get("retry-after"))
        message = provider_text(detail.get("message"), error.response.reason_phrase or "no message")
        return failure(code, message, error.status_code, wait)
    return failure(code, detail.get("message") or error.message)


def error_detail(error: openai.APIError) -> dict[str, Any]:
    """The error object of an error body ({"error": {...}} or the object itself); {} when there is none."""
    body = error.body if isinstance(error.body, dict) else {}
    return body["error"] if isinstance(body.get("error"), dict) else body
