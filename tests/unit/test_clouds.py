"""The clouds' rules (common/clouds.py) and clients (workers/models/clouds.py) without a stack: the hosts
the worker's own identity may go to, how a record keeps them, the clients made from an Endpoint (the
worker's own identity included, which the API tests cannot reach: it must go to the cloud's own host)."""

from __future__ import annotations

import importlib.util
from typing import Any

import anthropic
import httpx2
import pytest

from common.clouds import (
    GOOGLE_TOKEN_URI,
    check_environment_base_url,
    decode_cloud,
    decode_credentials,
    encode_cloud,
    encode_credentials,
)
from common.codec import dumps
from common.errors import InvalidRequest
from workers.models.base import Endpoint, ModelError
from workers.models.clouds import CLOUDS_EXTRA, anthropic_on_cloud, azure_openai, service_account, vertex_base_url

BEDROCK = {"type": "bedrock", "region": "us-east-1"}
VERTEX = {"type": "vertex", "project": "my-project-1", "location": "us-east5"}
AZURE = {"type": "azure", "api_version": "2025-04-01-preview"}


@pytest.mark.parametrize(
    ("cloud", "base_url"),
    [
        (BEDROCK, "https://bedrock-runtime.us-east-1.amazonaws.com"),
        (BEDROCK, "https://bedrock-runtime-fips.us-east-1.amazonaws.com/"),
        (VERTEX, "https://us-east5-aiplatform.googleapis.com"),
        (VERTEX, "https://us-east5-aiplatform.googleapis.com/v1"),
        ({**VERTEX, "location": "global"}, "https://aiplatform.googleapis.com"),
        ({**VERTEX, "location": "eu"}, "https://aiplatform.eu.rep.googleapis.com"),
        (AZURE, "https://my-resource.openai.azure.com"),
        (AZURE, "https://my-resource.cognitiveservices.azure.com:443/"),
    ],
)
def test_the_clouds_own_hosts_take_the_workers_identity(cloud: dict[str, str], base_url: str) -> None:
    check_environment_base_url(cloud, base_url)


@pytest.mark.parametrize(
    ("cloud", "base_url"),
    [
        (BEDROCK, "https://bedrock-runtime.us-west-2.amazonaws.com"),
        (BEDROCK, "http://bedrock-runtime.us-east-1.amazonaws.com"),
        (BEDROCK, "https://bedrock-runtime.us-east-1.amazonaws.com:8443"),
        (BEDROCK, "https://bedrock-runtime.us-east-1.amazonaws.com.evil.example"),
        (VERTEX, "https://europe-west1-aiplatform.googleapis.com"),
        (VERTEX, "https://aiplatform.googleapis.com"),
        (AZURE, "https://openai.azure.com"),
        (AZURE, "https://my-resource.openai.azure.com.evil.example"),
        (AZURE, "https://a.b.openai.azure.com"),
        (AZURE, "https://llm.example"),
        # The cloud's host, but a path or query that would aim the identity at another of its methods.
        (VERTEX, "https://us-east5-aiplatform.googleapis.com/v1/projects/p/locations/l/models/m:rawPredict?x="),
        (BEDROCK, "https://bedrock-runtime.us-east-1.amazonaws.com/model/other/invoke"),
        (BEDROCK, "https://bedrock-runtime.us-east-1.amazonaws.com?x=1"),
        (AZURE, "https://my-resource.openai.azure.com/#"),
    ],
)
def test_any_other_host_is_refused_the_workers_identity(cloud: dict[str, str], base_url: str) -> None:
    with pytest.raises(InvalidRequest, match=r"^base_url: a provider using the worker's own cloud identity"):
        check_environment_base_url(cloud, base_url)


def test_a_record_keeps_the_clouds_options_and_credentials_as_json() -> None:
    assert decode_cloud(encode_cloud({**BEDROCK, "stray": "x"})) == BEDROCK
    assert (encode_cloud(None), decode_cloud("")) == ("", None)
    keys = {"aws_access_key_id": "A", "aws_secret_access_key": "S"}
    for credentials in (keys, "environment", None):
        assert decode_credentials(encode_credentials(credentials)) == credentials


def endpoint(cloud: dict[str, str], credentials: dict[str, str] | None, api_key: str = "k") -> Endpoint:
    return Endpoint("https://cloud.example", api_key, 10.0, cloud=cloud, credentials=credentials)


class Recorder:
    """An HTTP client whose transport keeps each request and answers 400."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []
        self.client = httpx2.AsyncClient(transport=httpx2.MockTransport(self._answer))

    def _answer(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(400, json={"error": {"message": "recorded", "type": "invalid_request_error"}})


async def test_azure_chat_completions_go_to_the_deployment_with_the_key() -> None:
    recorder = Recorder()
    client = azure_openai(endpoint(AZURE, {}, "azure-key"), recorder.client)
    with pytest.raises(Exception, match="recorded"):
        await client.chat.completions.create(model="my-deployment", messages=[{"role": "user", "content": "hi"}])
    (sent,) = recorder.requests
    assert sent.url.path == "/openai/deployments/my-deployment/chat/completions"
    assert sent.url.params["api-version"] == "2025-04-01-preview"
    assert sent.headers["api-key"] == "azure-key"
    await client.close()


async def test_azure_with_the_workers_identity_takes_its_environments_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_AD_TOKEN", raising=False)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "from-the-environment")
    recorder = Recorder()
    client = azure_openai(endpoint(AZURE, None, "stored-but-unused"), recorder.client)
    with pytest.raises(Exception, match="recorded"):
        await client.responses.create(model="my-deployment", input="hi")
    assert recorder.requests[0].headers["api-key"] == "from-the-environment"
    assert recorder.requests[0].url.path == "/openai/responses"
    monkeypatch.delenv("AZURE_OPENAI_API_KEY")
    with pytest.raises(ModelError, match="the Azure OpenAI client refused its settings"):
        azure_openai(endpoint(AZURE, None), recorder.client)


async def test_bedrock_with_the_workers_identity_signs_with_its_environments_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_BEARER_TOKEN_BEDROCK", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    recorder = Recorder()
    client = anthropic_on_cloud(endpoint(BEDROCK, None), recorder.client)
    assert isinstance(client, anthropic.AsyncAnthropicBedrock)
    assert (client.aws_access_key, client.api_key) == (None, None)
    with pytest.raises(Exception, match="recorded"):
        await client.messages.create(model="m", max_tokens=1, messages=[{"role": "user", "content": "hi"}])
    authorization = recorder.requests[0].headers["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDFROMENV/")
    await client.close()


class Adc:
    """Application Default Credentials as google.auth.default hands them out, minting a token on refresh."""

    token: str | None = None
    expired = False

    def refresh(self, request: object) -> None:
        self.token = "ya29.from-adc"


async def test_vertex_with_the_workers_identity_uses_application_default_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import google.auth

    asked: list[object] = []

    def default(scopes: list[str] | None = None, **_: object) -> tuple[Adc, str]:
        asked.append(scopes)
        return Adc(), "adc-project"

    monkeypatch.setattr(google.auth, "default", default)
    recorder = Recorder()
    client = anthropic_on_cloud(endpoint(VERTEX, None), recorder.client)
    with pytest.raises(Exception, match="recorded"):
        await client.messages.create(model="claude-x@1", max_tokens=1, messages=[{"role": "user", "content": "hi"}])
    (sent,) = recorder.requests
    assert sent.headers["authorization"] == "Bearer ya29.from-adc"
    # The provider's project, not the one the credentials came with.
    assert sent.url.path.startswith("/v1/projects/my-project-1/locations/us-east5/publishers/anthropic/models/")
    assert asked == [["https://www.googleapis.com/auth/cloud-platform"]]
    await client.close()


def test_a_worker_without_the_clouds_extra_fails_saying_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    found = importlib.util.find_spec

    def without_botocore(name: str, package: str | None = None) -> Any:
        return None if name == "botocore" else found(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_botocore)
    with pytest.raises(ModelError, match=r"needs the botocore package.*" + CLOUDS_EXTRA.replace("[", r"\[")):
        anthropic_on_cloud(endpoint(BEDROCK, {}), None)


def test_vertex_gets_v1_only_where_base_url_names_no_path() -> None:
    assert (
        vertex_base_url("https://us-east5-aiplatform.googleapis.com") == "https://us-east5-aiplatform.googleapis.com/v1"
    )
    assert vertex_base_url("https://proxy.example/") == "https://proxy.example/v1"
    assert vertex_base_url("https://proxy.example/vertex/v1") == "https://proxy.example/vertex/v1"


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("{", "not JSON"),
        (dumps({"type": "service_account", "token_uri": "https://tokens.example"}), "token_uri"),
        (dumps({"type": "service_account", "client_email": "a@b", "private_key": "not-a-key-secret-text"}), "cannot"),
    ],
)
def test_a_bad_service_account_key_fails_without_its_text(key: str, words: str) -> None:
    with pytest.raises(ModelError, match=words) as raised:
        service_account(key)
    assert "secret-text" not in str(raised.value)
    assert GOOGLE_TOKEN_URI.startswith("https://oauth2.googleapis.com/")
