"""Google's Gemini, streamed, through the official `google-genai` package: the Gemini API by API key, or
Vertex AI (docs/providers/gemini.md)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator

import httpx2
from google.auth import exceptions as auth_errors
from google.genai import Client, errors, types

from broker.errors import AddressRefused
from workers.models.aliases import Aliases
from workers.models.assembler import Assembler
from workers.models.base import (
    DeltaSink,
    Endpoint,
    ModelError,
    ModelRequest,
    TransientModelError,
    Turn,
    Usage,
    count,
    provider_text,
)
from workers.models.bounds import StreamBounds
from workers.models.gemini_cloud import vertex_client_args
from workers.models.gemini_wire import MADE_ID, signature_text, to_contents
from workers.models.retry import RetryLater
from workers.models.wire import model_client
from workers.pinned import refused
from workers.retry_after import retry_after_s

_MODES = {
    "auto": types.FunctionCallingConfigMode.AUTO,
    "required": types.FunctionCallingConfigMode.ANY,
    "none": types.FunctionCallingConfigMode.NONE,
}
# A candidate that ends for one of these reasons with nothing in it is an answer of sorts (an empty one).
# Not MAX_TOKENS: with nothing in it, the model's unseen thinking took the whole of max_tokens.
_ENDINGS = {None, "STOP", "FINISH_REASON_UNSPECIFIED"}
_GEMINI_API = "https://generativelanguage.googleapis.com"


class _NoSyncRequests(httpx2.BaseTransport):
    """The transport of the SDK's sync client, which this adapter never uses: given one, the SDK makes
    none of its own, so nothing of it can reach a provider by another way than the pinned client."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        raise AddressRefused("the Gemini adapter sends no synchronous requests")


def usage_of(metadata: types.GenerateContentResponseUsageMetadata | None) -> Usage | None:
    """Gemini's counts: the prompt's include the cached ones; the thoughts are counted apart from the
    candidates, and here inside the output."""
    if metadata is None:
        return None
    candidates, thoughts = count(metadata.candidates_token_count), count(metadata.thoughts_token_count)
    output = None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    return Usage(
        input_tokens=count(metadata.prompt_token_count),
        output_tokens=output,
        cached_input_tokens=count(metadata.cached_content_token_count),
        reasoning_tokens=thoughts,
    )


def _name(value: object) -> str | None:
    """An enum the SDK parsed (or a value it did not know, kept as sent) by its wire name."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _said(message: str | None) -> str:
    text = provider_text(message, "")
    return f": {text}" if text else ""


def _wait_s(error: errors.APIError) -> float | None:
    """How long the API asked to wait: a Retry-After header, else the RetryInfo of its error details."""
    headers = getattr(error.response, "headers", None)
    header = headers.get("retry-after") if headers is not None else None
    if (asked := retry_after_s(header if isinstance(header, str) else None)) is not None:
        return asked
    body = error.details if isinstance(error.details, dict) else {}
    detail = body.get("error", body)
    items = detail.get("details") if isinstance(detail, dict) else None
    for item in items if isinstance(items, list) else []:
        delay = item.get("retryDelay") if isinstance(item, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return max(0.0, float(delay[:-1]))
            except ValueError:
                return None
    return None


def error_of(error: errors.APIError) -> ModelError:
    """The SDK's status error as ours: the status and the provider's own message, never the SDK's text
    (which holds the whole body). 429, 499 (cancelled on its side) and 5xx are tried again."""
    status = error.code or 0
    kind = provider_text(error.status, "", limit=64)
    text = provider_text(error.message, "no message")
    if status in (429, 499) or status >= 500:
        return RetryLater(f"the Gemini API answered {status} {kind}: {text}".replace(" :", ":"), _wait_s(error))
    return ModelError(f"the Gemini API refused the request ({status} {kind}): {text}".replace(" )", ")"))


class _Reader:
    """A Gemini stream's chunks, fed to the assembler. Gemini's parts carry no index: consecutive parts of
    a kind are one block, and a part with a thought signature starts one, so the signature goes back on
    the part it came with (a signature on a text part or a call is kept as an empty thinking block right
    before it, which gemini_wire.py puts back on that part). Calls come whole."""

    def __init__(self, assembler: Assembler, model: str) -> None:
        self._assembler = assembler
        self._assembler.model(model)
        self.candidates = False
        self.finish: str | None = None
        self.finish_message: str | None = None
        self.blocked: tuple[str, str | None] | None = None

    def feed(self, chunk: types.GenerateContentResponse) -> None:
        self._assembler.model(chunk.model_version)
        self._assembler.usage(usage_of(chunk.usage_metadata))
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            self.blocked = (_name(feedback.block_reason) or "blocked", feedback.block_reason_message)
        # One candidate is asked for (candidate_count is left at its default of one).
        for candidate in (chunk.candidates or [])[:1]:
            self.candidates = True
            if candidate.finish_reason is not None:
                self.finish, self.finish_message = _name(candidate.finish_reason), candidate.finish_message
            for part in (candidate.content.parts if candidate.content else None) or []:
                self._part(part)

    def _part(self, part: types.Part) -> None:
        signature = signature_text(part.thought_signature)
        call = part.function_call
        if call is not None:
            self._signed(signature)
            # Some models give no id (the API matches responses by name and order): one is made, unique in
            # the session since the broker keys calls by it.
            call_id = call.id or f"{MADE_ID}{secrets.token_hex(8)}"
            self._assembler.whole_call(call_id, call.name or "", dict(call.args or {}))
        elif part.text is None and signature is None:
            return  # a kind of part this adapter does not ask for (code execution, inline data)
        elif part.thought:
            self._assembler.reasoning(part.text or "", signature=signature)
        else:
            self._signed(signature)
            self._assembler.text(part.text or "")

    def _signed(self, signature: str | None) -> None:
        # A text part's or a call's signature: an empty thinking block right before it.
        if signature is not None:
            self._assembler.reasoning("", signature=signature)

    def turn(self) -> Turn:
        # The Gemini API's reasons come without a message (the SDK reads one from Vertex AI only).
        if self.blocked is not None:
            reason, message = self.blocked
            raise ModelError(f"the Gemini API blocked the prompt ({reason}){_said(message)}")
        if not self.candidates:
            raise ModelError("the Gemini API returned no candidates")
        answered = self._assembler.has_text or self._assembler.has_reasoning or self._assembler.calls
        if self.finish not in _ENDINGS and not answered:
            raise ModelError(f"the Gemini API stopped with no answer ({self.finish}){_said(self.finish_message)}")
        self._assembler.finish(self.finish)
        return self._assembler.turn()


class Gemini:
    def __init__(self, endpoint: Endpoint) -> None:
        cloud = dict(endpoint.cloud or {})
        vertex = cloud.get("type") == "vertex"
        if cloud and not vertex:
            raise ModelError(f"the gemini format is not offered on {provider_text(cloud.get('type'), 'that cloud')}")
        if vertex:
            args, default_url = vertex_client_args(endpoint)
        elif endpoint.api_key:
            args, default_url = {"vertexai": False, "api_key": endpoint.api_key}, _GEMINI_API
        else:
            # The SDK would take GOOGLE_API_KEY from the worker's environment: never for a provider.
            raise ModelError("the Gemini provider has no API key")
        self._text_only = endpoint.text_only
        base_url = endpoint.base_url.rstrip("/") or default_url
        timeout_s, addresses = endpoint.timeout_s, endpoint.addresses
        # Every request of a workspace provider goes through the pinned client (`addresses`); the SDK
        # opens no connection of its own: given its async client, it uses neither its own nor aiohttp,
        # and its sync client (never used here) refuses. Retries are ours (models/retry.py).
        # Either way its responses are counted on the wire (workers/models/wire.py), with the lines its
        # reader holds outside events (workers/models/gemini_lines.py).
        self._http = model_client(base_url, addresses, timeout_s, held_lines=True)
        self._sync = httpx2.Client(transport=_NoSyncRequests())
        options = types.HttpOptions(
            base_url=base_url,
            api_version="v1beta1" if vertex else "v1beta",
            # Milliseconds; without it the SDK sends each request with no timeout at all.
            timeout=int(timeout_s * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
            httpx_client=self._sync,
            httpx_async_client=self._http,
        )
        try:
            self._client = Client(**args, http_options=options)
        except ValueError as error:
            raise ModelError(f"the Gemini client could not be made: {error}") from None

    async def aclose(self) -> None:
        await self._client.aio.aclose()
        await self._http.aclose()
        self._sync.close()

    def _config(self, request: ModelRequest, aliases: Aliases) -> types.GenerateContentConfig:
        config = request.config
        tools: list[types.Tool] | None = None
        tool_config: types.ToolConfig | None = None
        if request.tools:
            declarations = [
                # parameters_json_schema: the tool's JSON Schema as is (`parameters` takes the OpenAPI
                # subset Gemini's Schema type knows, which would drop what it does not).
                types.FunctionDeclaration(
                    name=aliases.outward(t.name), description=t.description, parameters_json_schema=t.parameters
                )
                for t in request.tools
            ]
            tools = [types.Tool(function_declarations=declarations)]
            if config.tool_choice in _MODES:
                calling = types.FunctionCallingConfig(mode=_MODES[config.tool_choice])
                tool_config = types.ToolConfig(function_calling_config=calling)
        thinking = None
        if config.thinking_budget is not None:
            thinking = types.ThinkingConfig(thinking_budget=config.thinking_budget, include_thoughts=True)
        return types.GenerateContentConfig(
            system_instruction=config.system_prompt or None,
            max_output_tokens=config.max_tokens,
            tools=tools,
            tool_config=tool_config,
            thinking_config=thinking,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )

    async def turn(self, request: ModelRequest, deltas: DeltaSink) -> Turn:
        aliases = Aliases(tool.name for tool in request.tools)
        contents = to_contents(request.transcript_for(self._text_only), aliases)
        async with StreamBounds(request.limits) as stream:
            reader = _Reader(Assembler(stream.tally, aliases, deltas), request.config.model)
            try:
                chunks = await self._client.aio.models.generate_content_stream(
                    model=request.config.model, contents=contents, config=self._config(request, aliases)
                )
                try:
                    async for chunk in chunks:
                        await stream.fragment()
                        reader.feed(chunk)
                finally:
                    # Whatever ends the loop (a bound passed stops reading at once). The generator's inner
                    # ones are left to the garbage collector: StreamBounds closes the response itself.
                    if isinstance(chunks, AsyncGenerator):
                        await chunks.aclose()
            except ModelError:
                raise
            except AddressRefused as refusal:
                # The transport's refusal, let through by the SDK: not worth retrying, and it says why.
                raise ModelError(refusal.message) from None
            except errors.APIError as error:
                raise error_of(error) from error
            except (httpx2.TransportError, auth_errors.TransportError) as error:
                behind = refused(error)
                if behind is not None:
                    raise ModelError(behind.message) from None
                # A timeout's text is often empty: say what kind of failure it was instead.
                timeout = isinstance(error, httpx2.TimeoutException)
                fallback = "no answer in time" if timeout else "the connection failed"
                raise TransientModelError(
                    f"the Gemini API could not be reached: {provider_text(str(error), fallback)}"
                ) from error
            except ValueError as error:
                # A chunk that is not JSON, or not a GenerateContentResponse.
                message = provider_text(str(error), "")
                raise ModelError(f"the Gemini API sent what could not be read: {message}") from None
            except auth_errors.GoogleAuthError as error:
                message = provider_text(str(error), "no message")
                raise ModelError(f"the Vertex AI credentials could not be used: {message}") from None
        return reader.turn()
