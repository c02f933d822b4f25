"""The clouds (docs/providers/clouds.md): Anthropic on AWS Bedrock and on Google Vertex, OpenAI on Azure, as
options of the existing formats, run through the packages' own clients against a local fake of each
cloud; their credentials are write-only, go only to the stored base_url, and are never returned or logged."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from common.clouds import GOOGLE_TOKEN_URI
from common.codec import dumps
from switchboard.settings import Settings
from tests.api_client import Api, Session, of_type, run_over, running_api
from tests.fakes import Reply, anthropic_stream, openai_stream
from tests.fakes_chat import ChatCall, chat_stream
from tests.fakes_clouds import FakeCloud, fake_cloud
from tests.resolver import PUBLIC, Names

# The fake providers listen on 127.0.0.1, a loopback address: allowed here only.
pytestmark = pytest.mark.private_providers

AWS_KEYS = {"aws_access_key_id": "AKIDCLOUDTEST", "aws_secret_access_key": "aws-secret-never-shown"}
AWS_SESSION = {**AWS_KEYS, "aws_session_token": "aws-session-token-never-shown"}
BEDROCK = {"type": "bedrock", "region": "us-east-1"}
VERTEX = {"type": "vertex", "project": "my-project-1", "location": "us-east5"}
AZURE = {"type": "azure", "api_version": "2025-04-01-preview"}
BEDROCK_MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
VERTEX_MODEL = "claude-sonnet-4-5@20250929"
TOOL = {"name": "lamp", "description": "Lights it", "parameters": {"type": "object"}}
VISIBLE = "client__web__lamp"


@pytest.fixture
async def cloud() -> AsyncIterator[FakeCloud]:
    async with fake_cloud() as fake:
        yield fake


def provider(base_url: str, provider_format: str, cloud: dict[str, str], **extra: Any) -> dict[str, Any]:
    body = {"api_key": "placeholder", "base_url": base_url, "display_name": "cloud", "format": provider_format}
    return {**body, "cloud": cloud, **extra}


async def session_on(api: Api, body: dict[str, Any], model: str) -> Session:
    created = await api.key.post("/v1/model-providers", json=body)
    assert created.status_code == 201, created.text
    agent = (await api.key.post("/v1/agents", json={"name": "cloud"})).json()
    version = {"model_provider_id": created.json()["id"], "model": model_block(body["format"], model)}
    assert (await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
    return await api.session(agent["id"])


def model_block(provider_format: str, model: str) -> dict[str, Any]:
    block = {"format": provider_format, "model": model, "max_tokens": 1024}
    return block if provider_format == "anthropic" else {**block, "context_window": 200_000}


async def run_with_a_tool_call(api: Api, session: Session, call_id: str) -> list[dict[str, Any]]:
    """Send, let the model call the client's tool, answer it; the log once the run is over."""
    client = await api.register(session, tools=[TOOL])
    await api.send(session, "light it")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call = of_type(events, "tool_call")[0]
    assert (call["call_id"], call["name"], call["arguments"]) == (call_id, VISIBLE, {"room": "hall"})
    await api.call(session, client["id"], call_id, "result", text="lit")
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_completed"), [e["type"] for e in events]
    text = of_type(events, "message_assistant")[-1]["message"]["content"][0]["data"]["text"]
    assert text == "The hall is lit."
    return events


def claude_replies() -> list[Reply]:
    use = {"type": "tool_use", "id": "toolu_1", "name": VISIBLE, "input": {"room": "hall"}}
    return [
        Reply(frames=anthropic_stream(use, stop="tool_use")),
        Reply(frames=anthropic_stream({"type": "text", "text": "The hall is lit."})),
    ]


async def test_bedrock_signs_with_the_stored_keys_and_a_run_completes(api: Api, cloud: FakeCloud) -> None:
    cloud.replies = claude_replies()
    body = provider(cloud.url, "anthropic", BEDROCK, credentials=AWS_SESSION)
    await run_with_a_tool_call(api, await session_on(api, body, BEDROCK_MODEL), "toolu_1")
    first, second = cloud.requests
    assert first["path"] == f"/model/{BEDROCK_MODEL}/invoke-with-response-stream"
    for sent in (first, second):
        authorization = sent["headers"]["authorization"]
        assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDCLOUDTEST/")
        assert "/us-east-1/bedrock/aws4_request" in authorization
        assert sent["headers"]["x-amz-security-token"] == "aws-session-token-never-shown"
        assert "aws-secret-never-shown" not in dumps(sent)
        # The model is in the path; the body names the API version instead (the SDK's own).
        assert sent["anthropic_version"]
        assert "model" not in sent
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"


async def test_bedrock_without_keys_sends_the_api_key_as_a_bedrock_api_key(api: Api, cloud: FakeCloud) -> None:
    cloud.replies = claude_replies()
    body = {**provider(cloud.url, "anthropic", BEDROCK), "api_key": "bedrock-api-key"}
    await run_with_a_tool_call(api, await session_on(api, body, BEDROCK_MODEL), "toolu_1")
    assert [r["headers"]["authorization"] for r in cloud.requests] == ["Bearer bedrock-api-key"] * 2


async def test_bedrock_retries_a_throttled_stream_and_reports_a_refusal_with_its_message(
    api: Api, cloud: FakeCloud
) -> None:
    throttled = ("exception:throttlingException", {"message": "Too many tokens, please wait"})
    cloud.replies = [
        Reply(frames=[anthropic_stream()[0], throttled]),
        Reply(frames=anthropic_stream({"type": "text", "text": "second time"})),
        Reply(400, {"message": "The provided model identifier is invalid."}),
    ]
    session = await session_on(api, provider(cloud.url, "anthropic", BEDROCK, credentials=AWS_KEYS), BEDROCK_MODEL)
    await api.send(session, "hello")
    events = await api.wait_for(session, run_over)
    assert of_type(events, "message_assistant")[0]["message"]["content"][0]["data"]["text"] == "second time"
    await api.send(session, "again")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "run_failed")))
    assert of_type(events, "run_failed")[0]["error"] == (
        "Anthropic refused the request (400): The provided model identifier is invalid."
    )
    assert len(cloud.requests) == 3


async def test_vertex_sends_the_access_token_and_a_run_completes(api: Api, cloud: FakeCloud) -> None:
    cloud.replies = claude_replies()
    body = provider(cloud.url, "anthropic", VERTEX, credentials={"access_token": "ya29.token-never-shown"})
    await run_with_a_tool_call(api, await session_on(api, body, VERTEX_MODEL), "toolu_1")
    first, _ = cloud.requests
    # A base_url with no path gets the Vertex API's /v1.
    path = f"/v1/projects/my-project-1/locations/us-east5/publishers/anthropic/models/{VERTEX_MODEL}:streamRawPredict"
    assert first["path"] == path
    assert first["headers"]["authorization"] == "Bearer ya29.token-never-shown"
    assert first["anthropic_version"]
    assert first["stream"] is True
    assert "model" not in first


def service_account_key(**changes: Any) -> str:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    key = {
        "type": "service_account",
        "project_id": "my-project-1",
        "private_key_id": "k1",
        "private_key": pem,
        "client_email": "runner@my-project-1.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": GOOGLE_TOKEN_URI,
    }
    return dumps({**key, **changes})


async def test_vertex_with_a_service_account_sends_the_token_it_was_exchanged_for(
    api: Api, cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.oauth2 import service_account

    exchanged: list[str] = []

    def refresh(self: service_account.Credentials, request: object) -> None:
        # In place of the exchange at Google's token endpoint, which a test does not reach.
        exchanged.append(self.service_account_email)
        self.token = "ya29.exchanged"

    monkeypatch.setattr(service_account.Credentials, "refresh", refresh)
    cloud.replies = claude_replies()
    body = provider(cloud.url, "anthropic", VERTEX, credentials={"service_account": service_account_key()})
    await run_with_a_tool_call(api, await session_on(api, body, VERTEX_MODEL), "toolu_1")
    assert exchanged[0] == "runner@my-project-1.iam.gserviceaccount.com"
    assert [r["headers"]["authorization"] for r in cloud.requests] == ["Bearer ya29.exchanged"] * 2


async def test_azure_sends_the_api_key_as_its_key_and_a_run_completes(api: Api, cloud: FakeCloud) -> None:
    call = {"type": "function_call", "call_id": "call_1", "name": VISIBLE, "arguments": {"room": "hall"}}
    cloud.replies = [
        Reply(frames=openai_stream(call)),
        Reply(frames=openai_stream({"type": "message", "text": "The hall is lit."})),
    ]
    body = {**provider(cloud.url, "openai_responses", AZURE), "api_key": "azure-key-never-shown"}
    await run_with_a_tool_call(api, await session_on(api, body, "my-gpt-deployment"), "call_1")
    first, second = cloud.requests
    for sent in (first, second):
        assert sent["path"] == "/openai/responses"
        assert sent["query"] == {"api-version": "2025-04-01-preview"}
        assert sent["headers"]["api-key"] == "azure-key-never-shown"
        assert "authorization" not in sent["headers"]
        assert sent["model"] == "my-gpt-deployment"
    assert second["input"][-1]["type"] == "function_call_output"


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("bedrock for a format it does not serve", {"format": "openai_responses", "cloud": BEDROCK}, "cloud: bedrock"),
    ("azure for anthropic", {"cloud": AZURE}, "cloud: azure serves the formats openai_responses and openai_chat"),
    ("vertex for openai", {"format": "openai_responses", "cloud": VERTEX}, "cloud: vertex serves"),
    ("an unknown cloud", {"cloud": {"type": "ibm"}}, "cloud"),
    ("a region that is no region", {"cloud": {"type": "bedrock", "region": "us-east-1/../x"}}, "cloud.bedrock.region"),
    ("a project that is no project", {"cloud": {**VERTEX, "project": "A"}}, "cloud.vertex.project"),
    ("an api_version that is none", {"format": "openai_responses", "cloud": {**AZURE, "api_version": "x"}}, "cloud"),
    ("credentials with no cloud", {"cloud": None, "credentials": AWS_KEYS}, "credentials: only a provider with a"),
    ("bedrock keys missing one", {"cloud": BEDROCK, "credentials": {"aws_access_key_id": "A"}}, "missing aws_secret"),
    ("bedrock keys with a stranger", {"cloud": BEDROCK, "credentials": {**AWS_KEYS, "x": "y"}}, "unknown x"),
    ("vertex with no credentials", {"cloud": VERTEX}, "credentials: Vertex needs credentials"),
    ("vertex with both", {"cloud": VERTEX, "credentials": {"access_token": "a", "service_account": "{}"}}, "Vertex"),
    ("a key that is not JSON", {"cloud": VERTEX, "credentials": {"service_account": "{"}}, "not JSON"),
    ("a key of another type", {"cloud": VERTEX, "credentials": {"service_account": '{"type":"user"}'}}, "type"),
    ("an oversized key", {"cloud": VERTEX, "credentials": {"service_account": "x" * 16385}}, "at most 16384"),
    (
        "an oversized private key",
        {
            "cloud": VERTEX,
            "credentials": {
                "service_account": dumps({"type": "service_account", "client_email": "a@b", "private_key": "k" * 4097})
            },
        },
        "private_key: at most 4096",
    ),
    ("azure with credentials", {"format": "openai_responses", "cloud": AZURE, "credentials": AWS_KEYS}, "api_key"),
    ("environment while it is off", {"cloud": BEDROCK, "credentials": "environment"}, "CLOUD_ENVIRONMENT_CREDENTIALS"),
    ("credentials of another kind", {"cloud": BEDROCK, "credentials": ["a"]}, "credentials"),
]


@pytest.mark.parametrize(("case", "change", "words"), BAD, ids=[case for case, _, _ in BAD])
async def test_bad_cloud_input_is_400_naming_the_field(
    settings: Settings, redis_url: str, api_key: str, case: str, change: dict[str, Any], words: str
) -> None:
    async with running_api(settings, redis_url, api_key, {}, worker=False) as api:
        body = {**provider("https://cloud.example", "anthropic", BEDROCK), **change}
        answer = await api.key.post("/v1/model-providers", json=body)
        assert answer.status_code == 400, (case, answer.text)
        assert words in answer.json()["error"]["message"], answer.json()["error"]["message"]


async def test_a_key_with_another_token_uri_is_refused(api: Api) -> None:
    key = service_account_key(token_uri="https://tokens.example/token")
    body = provider("https://cloud.example", "anthropic", VERTEX, credentials={"service_account": key})
    answer = await api.key.post("/v1/model-providers", json=body)
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    assert message == f"credentials.service_account: token_uri must be {GOOGLE_TOKEN_URI}"
    assert "BEGIN PRIVATE KEY" not in answer.text


async def test_credentials_are_never_returned_nor_logged(
    api: Api, cloud: FakeCloud, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    cloud.replies = claude_replies()[1:]
    key = service_account_key()
    bedrock = provider(cloud.url, "anthropic", BEDROCK, credentials=AWS_SESSION)
    vertex = provider(cloud.url, "anthropic", VERTEX, credentials={"service_account": key})
    session = await session_on(api, bedrock, BEDROCK_MODEL)
    await api.send(session, "hello")
    await api.wait_for(session, run_over)
    created = await api.key.post("/v1/model-providers", json=vertex)
    assert created.status_code == 201, created.text
    path = f"/v1/model-providers/{created.json()['id']}"
    rotated = await api.key.patch(path, json={"credentials": {"access_token": "ya29.rotated-never-shown"}})
    assert rotated.status_code == 200, rotated.text
    answers = [created, rotated, await api.key.get(path), await api.key.get("/v1/model-providers")]
    answers.append(await api.key.get("/v1/model-providers", params={"include": "extensions"}))
    secrets = ["aws-secret-never-shown", "aws-session-token-never-shown", "ya29.rotated-never-shown", "PRIVATE KEY"]
    for answer in answers:
        assert "credentials" not in answer.text
        for secret in secrets:
            assert secret not in answer.text
    # What is not secret is returned: the cloud and its options.
    assert created.json()["cloud"] == VERTEX
    listed = {item["id"]: item for item in answers[-1].json()["items"]}
    assert listed[created.json()["id"]]["cloud"] == VERTEX
    logged = "\n".join(f"{record.getMessage()} {record.__dict__}" for record in caplog.records)
    for secret in [*secrets, "BEGIN PRIVATE"]:
        assert secret not in logged


async def test_a_move_needs_new_credentials_and_credentials_need_a_cloud(api: Api) -> None:
    body = provider("https://cloud.example", "anthropic", BEDROCK, credentials=AWS_KEYS)
    created = (await api.key.post("/v1/model-providers", json=body)).json()
    path = f"/v1/model-providers/{created['id']}"
    moved = await api.key.patch(path, json={"base_url": "https://other.example", "api_key": "k"})
    assert moved.status_code == 400, moved.text
    assert moved.json()["error"]["message"].startswith("base_url: a provider's credentials go only to the address")
    stored = await api.stack.broker.providers.get(created["id"])
    assert (stored.base_url, stored.credentials) == ("https://cloud.example", AWS_KEYS)
    new_keys = {**AWS_KEYS, "aws_secret_access_key": "new-secret"}
    answer = await api.key.patch(
        path, json={"base_url": "https://other.example", "api_key": "k", "credentials": new_keys}
    )
    assert answer.status_code == 200, answer.text
    stored = await api.stack.broker.providers.get(created["id"])
    assert (stored.base_url, stored.api_key, stored.credentials) == ("https://other.example", "k", new_keys)
    # Credentials are checked against the cloud on an update too.
    wrong = await api.key.patch(path, json={"credentials": {"access_token": "t"}})
    assert wrong.status_code == 400
    assert wrong.json()["error"]["message"].startswith("credentials: Bedrock takes")
    # The cloud's options may change; a cloud its stored credentials do not fit may not.
    region = await api.key.patch(path, json={"cloud": {"type": "bedrock", "region": "eu-west-3"}})
    assert region.status_code == 200, region.text
    assert region.json()["cloud"] == {"type": "bedrock", "region": "eu-west-3"}
    elsewhere = await api.key.patch(path, json={"cloud": {"type": "vertex", "project": "p-12345", "location": "us"}})
    assert elsewhere.status_code == 400, elsewhere.text
    assert elsewhere.json()["error"]["message"].startswith("credentials: Vertex takes")
    plain = {"api_key": "k", "base_url": "https://cloud.example", "display_name": "p", "format": "anthropic"}
    other = (await api.key.post("/v1/model-providers", json=plain)).json()
    refused = await api.key.patch(f"/v1/model-providers/{other['id']}", json={"credentials": AWS_KEYS})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("credentials: only a provider with a cloud")


async def test_the_environment_needs_the_setting_and_the_clouds_own_address(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    names = Names({"bedrock-runtime.us-east-1.amazonaws.com": [PUBLIC], "cloud.example": [PUBLIC]})
    allowed: dict[str, object] = {"cloud_environment_credentials": True}
    async with running_api(settings, redis_url, api_key, allowed, worker=False, resolver=names) as api:
        elsewhere = provider("https://cloud.example", "anthropic", BEDROCK, credentials="environment")
        answer = await api.key.post("/v1/model-providers", json=elsewhere)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["message"].startswith("base_url: a provider using the worker's own cloud")
        official = {**elsewhere, "base_url": "https://bedrock-runtime.us-east-1.amazonaws.com"}
        created = await api.key.post("/v1/model-providers", json=official)
        assert created.status_code == 201, created.text
        path = f"/v1/model-providers/{created.json()['id']}"
        # Nor may it move away, with a key or without.
        moved = await api.key.patch(path, json={"base_url": "https://cloud.example", "api_key": "k"})
        assert moved.status_code == 400, moved.text
        assert moved.json()["error"]["message"].startswith("base_url: a provider using the worker's own cloud")
        same = await api.key.patch(path, json={"display_name": "renamed"})
        assert same.status_code == 200, same.text


async def test_a_worker_whose_deployment_does_not_allow_the_environment_refuses_the_run(
    settings: Settings, redis_url: str, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = Names({"bedrock-runtime.us-east-1.amazonaws.com": [PUBLIC]})
    async with running_api(settings, redis_url, api_key, {}, resolver=names) as api:
        providers = api.stack.broker.providers
        # Stored while the API allowed it (the setting turned off since, or the roles set apart).
        monkeypatch.setattr(type(providers), "_environment_allowed", property(lambda _: True))
        body = provider("https://bedrock-runtime.us-east-1.amazonaws.com", "anthropic", BEDROCK)
        session = await session_on(api, {**body, "credentials": "environment"}, BEDROCK_MODEL)
        monkeypatch.undo()
        # What the provider already is stays as it was through a rename.
        listed = (await api.key.get("/v1/model-providers")).json()["items"]
        stored = next(item for item in listed if item["display_name"] == "cloud")
        renamed = await api.key.patch(f"/v1/model-providers/{stored['id']}", json={"display_name": "renamed"})
        assert renamed.status_code == 200, renamed.text
        await api.send(session, "hello")
        events = await api.wait_for(session, run_over)
        error = of_type(events, "run_failed")[0]["error"]
        assert "uses the worker's own cloud identity" in error
        assert "SWITCHBOARD_CLOUD_ENVIRONMENT_CREDENTIALS is off" in error


@pytest.mark.parametrize(
    ("provider_format", "cloud_options", "credentials", "model"),
    [
        ("anthropic", BEDROCK, AWS_KEYS, BEDROCK_MODEL),
        ("anthropic", VERTEX, {"access_token": "ya29.t"}, VERTEX_MODEL),
        ("openai_responses", AZURE, None, "my-gpt-deployment"),
    ],
    ids=["bedrock", "vertex", "azure"],
)
async def test_every_cloud_client_connects_only_to_the_checked_address(
    settings: Settings,
    redis_url: str,
    api_key: str,
    cloud: FakeCloud,
    provider_format: str,
    cloud_options: dict[str, str],
    credentials: dict[str, str] | None,
    model: str,
) -> None:
    """The cloud clients send through the pinned transport: a name that rebinds to the loopback after its
    check is refused on connection, and the credentials go nowhere."""
    port = cloud.url.rsplit(":", 1)[1]
    names = Names({"rebind.example": [PUBLIC]})
    async with running_api(settings, redis_url, api_key, {"provider_allow_private": False}, resolver=names) as api:
        body = provider(f"http://rebind.example:{port}", provider_format, cloud_options)
        session = await session_on(api, {**body, "credentials": credentials}, model)
        names.answers["rebind.example"] = ["127.0.0.1"]
        await api.send(session, "hello")
        events = await api.wait_for(session, run_over)
    error = of_type(events, "run_failed")[0]["error"]
    assert error.startswith("the model provider's address is refused: rebind.example resolves to 127.0.0.1"), error
    assert cloud.requests == []


async def test_a_chat_completions_deployment_on_azure(api: Api, cloud: FakeCloud) -> None:
    call = ChatCall("call_1", VISIBLE, {"room": "hall"})
    cloud.replies = [chat_stream("", call), chat_stream("The hall is lit.")]
    body = {**provider(cloud.url, "openai_chat", AZURE), "api_key": "azure-key-never-shown"}
    await run_with_a_tool_call(api, await session_on(api, body, "my-chat-deployment"), "call_1")
    first, second = cloud.requests
    for sent in (first, second):
        assert sent["path"] == "/openai/deployments/my-chat-deployment/chat/completions"
        assert sent["query"] == {"api-version": "2025-04-01-preview"}
        assert sent["headers"]["api-key"] == "azure-key-never-shown"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "lit"}
