"""The clouds' clients (docs/providers/clouds.md): Anthropic on AWS Bedrock and Google Vertex through the
`anthropic` package's own clients, OpenAI on Azure through the `openai` package's. Each takes the pinned
HTTP client a workspace provider's requests go through, so the cloud's credentials reach the stored
base_url's origin and nothing else.

An Endpoint's `credentials` are the provider's stored ones, {} when it has none (the provider's api_key
then does: a Bedrock API key, or the Azure key), or None for the worker's own cloud identity (the
registry lets that through only where the deployment allows it)."""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anthropic
import httpx2
import openai

from common.clouds import GOOGLE_TOKEN_URI, PRIVATE_KEY_LIMIT
from common.codec import loads
from workers.models.base import Endpoint, ModelError, provider_text

if TYPE_CHECKING:
    from google.auth.credentials import Credentials as GoogleCredentials

CLOUDS_EXTRA = "pip install 'switchboard[clouds]'"
_CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# Where the errors of resolving or refreshing a cloud identity come from (boto, google-auth): they reach
# run_failed as the cloud's, not as a crash of the step.
_AUTH_MODULES = ("botocore", "boto3", "google.auth", "google.oauth2")

AnthropicCloudClient = anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex


def _need(module: str, what: str) -> None:
    # find_spec, not an import: the worker's loop goes on, and the SDK imports the module when it signs.
    if importlib.util.find_spec(module) is None:
        raise ModelError(f"{what} needs the {module} package, which this worker lacks: {CLOUDS_EXTRA}")


def _options(endpoint: Endpoint) -> tuple[Mapping[str, str], Mapping[str, str] | None]:
    if endpoint.cloud is None:
        raise ModelError("the provider names no cloud")
    return endpoint.cloud, endpoint.credentials


def anthropic_on_cloud(endpoint: Endpoint, http: httpx2.AsyncClient | None) -> AnthropicCloudClient:
    """The `anthropic` client for a provider on Bedrock or Vertex."""
    cloud, _ = _options(endpoint)
    if cloud["type"] == "bedrock":
        return _bedrock(endpoint, http)
    if cloud["type"] == "vertex":
        return _vertex(endpoint, http)
    raise ModelError(f"the format anthropic is not served on {cloud['type']}")


def _quiet_signer() -> None:
    # botocore's signer logs each canonical request at DEBUG, and with temporary keys that holds the
    # session token (X-Amz-Security-Token): whatever level the process logs at, the signer's stay above.
    signer = logging.getLogger("botocore.auth")
    if signer.level < logging.INFO:
        signer.setLevel(logging.INFO)


def _bedrock(endpoint: Endpoint, http: httpx2.AsyncClient | None) -> anthropic.AsyncAnthropicBedrock:
    cloud, credentials = _options(endpoint)
    # Bedrock streams in AWS's event-stream framing, which botocore decodes; boto3 signs (SigV4).
    _need("botocore", "Anthropic on Bedrock")
    _quiet_signer()
    # None: the worker's own AWS identity (boto's chain); keys: SigV4 with them; {}: the provider's api_key
    # is a Bedrock API key, sent as a bearer token. What is left None is the SDK's default.
    keys = credentials or {}
    if credentials is None or keys:
        _need("boto3", "Bedrock with the worker's own AWS identity" if credentials is None else "Bedrock with AWS keys")
    try:
        return anthropic.AsyncAnthropicBedrock(
            api_key=endpoint.api_key if credentials == {} else None,
            aws_access_key=keys.get("aws_access_key_id"),
            aws_secret_key=keys.get("aws_secret_access_key"),
            aws_session_token=keys.get("aws_session_token") or None,
            aws_region=cloud["region"],
            base_url=endpoint.base_url,
            http_client=http,
            max_retries=0,
            timeout=endpoint.timeout_s,
        )
    except ValueError as error:
        # The SDK refuses AWS keys where the worker's environment sets AWS_BEARER_TOKEN_BEDROCK as well.
        raise ModelError(f"the Bedrock client refused its settings: {provider_text(str(error), 'no reason')}") from None


def vertex_base_url(base_url: str) -> str:
    """The `anthropic` Vertex client's base URL: the host's /v1 when base_url names no path (the form
    the docs give, the same for every format on Vertex), base_url itself otherwise."""
    return base_url if urlsplit(base_url).path.strip("/") else base_url.rstrip("/") + "/v1"


def _vertex(endpoint: Endpoint, http: httpx2.AsyncClient | None) -> anthropic.AsyncAnthropicVertex:
    cloud, credentials = _options(endpoint)
    region, project, timeout_s = cloud["location"], cloud["project"], endpoint.timeout_s
    base_url = vertex_base_url(endpoint.base_url)
    token = credentials.get("access_token") if credentials else None
    google: GoogleCredentials | None = None
    if credentials is None:
        # The SDK runs google.auth.default (ADC) on the first request.
        _need("google.auth", "Vertex with the worker's own Google identity")
    elif token is None:
        google = service_account(credentials.get("service_account", ""))
    return anthropic.AsyncAnthropicVertex(
        region=region,
        project_id=project,
        access_token=token,
        credentials=google,
        base_url=base_url,
        http_client=http,
        max_retries=0,
        timeout=timeout_s,
    )


def service_account(text: str) -> GoogleCredentials:
    """Google credentials from a service account key's JSON text, scoped for Vertex. Their token is
    fetched from Google's own token endpoint (the key's token_uri must be it; the API checked that when
    the key was stored, and it is checked again here)."""
    _need("google.oauth2", "Vertex with a service account key")
    from google.oauth2 import service_account as accounts

    try:
        info = loads(text)
    except ValueError:
        raise ModelError("the provider's service account key is not JSON") from None
    if not isinstance(info, dict) or info.get("token_uri", GOOGLE_TOKEN_URI) != GOOGLE_TOKEN_URI:
        raise ModelError(f"the provider's service account key must use the token_uri {GOOGLE_TOKEN_URI}")
    if len(str(info.get("private_key", ""))) > PRIVATE_KEY_LIMIT:
        # Loaded on the event loop: a key far past an RSA 4096 one would hold it.
        raise ModelError(f"the provider's service account key is longer than {PRIVATE_KEY_LIMIT} characters")
    try:
        # google-auth declares this constructor without types.
        credentials: GoogleCredentials = accounts.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
            {**info, "token_uri": GOOGLE_TOKEN_URI}, scopes=[_CLOUD_PLATFORM_SCOPE]
        )
    except (ValueError, KeyError, TypeError) as error:
        # Never the key's text: the message says only what kind of thing is wrong with it.
        raise ModelError(f"the provider's service account key cannot be used: {_key_problem(error)}") from None
    return credentials


def _key_problem(error: Exception) -> str:
    if isinstance(error, KeyError):
        return "a field it needs is missing"
    if isinstance(error, TypeError):
        return "a field holds a value of the wrong type"
    return "a value in it is malformed (its private key, or a field's format)"


def azure_openai(endpoint: Endpoint, http: httpx2.AsyncClient | None) -> openai.AsyncAzureOpenAI:
    """The `openai` client for a provider on Azure: base_url is the resource's endpoint
    (https://<resource>.openai.azure.com), the provider's api_key its key."""
    cloud, credentials = _options(endpoint)
    if cloud["type"] != "azure":
        raise ModelError(f"the OpenAI formats are not served on {cloud['type']}")
    # None: the worker's environment's key (AZURE_OPENAI_API_KEY, or AZURE_OPENAI_AD_TOKEN), as the SDK reads it.
    api_key = None if credentials is None else endpoint.api_key
    try:
        return openai.AsyncAzureOpenAI(
            azure_endpoint=endpoint.base_url,
            api_version=cloud["api_version"],
            api_key=api_key,
            max_retries=0,
            timeout=endpoint.timeout_s,
            http_client=http,
        )
    except openai.OpenAIError as error:
        raise ModelError(f"the Azure OpenAI client refused its settings: {provider_text(str(error), '')}") from None


def cloud_failure(error: BaseException) -> ModelError | None:
    """A cloud client's failure to resolve or refresh its identity (boto's, google-auth's, or the SDK's
    RuntimeError when neither found one) as run_failed tells it; None for anything else."""
    module = type(error).__module__
    if module.startswith(_AUTH_MODULES) or isinstance(error, RuntimeError):
        reason = provider_text(str(error), "no reason given", limit=200)
        return ModelError(f"the cloud's credentials could not be used: {reason}")
    return None
