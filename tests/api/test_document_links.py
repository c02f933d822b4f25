"""What /openapi.json links say a generated client may do next is what the server does: the links from
create to read routes are followed as a generated client would, and every step succeeds."""

from __future__ import annotations

import re
from typing import Any

from tests.api.test_document_truth import TTL, VERSION, Document
from tests.api_client import Api
from tests.helpers import HIGHLIGHT


async def test_following_the_links_from_create_reaches_every_linked_route(api: Api, document: Document) -> None:
    """A generated client's walk: each created resource's links, followed with what the response and
    the request hold, succeed."""
    reached: set[tuple[str, str]] = set()

    async def follow(method: str, path: str, concrete: str, body: Any, depth: int) -> None:
        answer = await api.key.request(method.upper(), concrete, json=body)
        assert answer.status_code < 400, (method, concrete, body, answer.text)
        reached.add((method, path))
        links = document["paths"][path][method]["responses"].get(str(answer.status_code), {}).get("links", {})
        if depth == 0:
            return
        request_path = dict(zip(re.findall(r"{(\w+)}", path), _segments(path, concrete), strict=True))
        # Deletes last, so the other links still find what they name.
        for link in sorted(links.values(), key=lambda link: link["operationRef"].endswith("/delete")):
            target_path, target_method = _target(link["operationRef"])
            values = {
                name: _evaluate(expression, answer.json(), request_path)
                for name, expression in link.get("parameters", {}).items()
            }
            target = target_path
            for name, value in values.items():
                target = target.replace("{" + name + "}", value)
            target_body = _evaluate_body(link.get("requestBody"), answer.json(), request_path)
            if target_body is None and "requestBody" in document["paths"][target_path][target_method]:
                target_body = _minimal_body(target_path, target_method)
            await follow(target_method, target_path, target, target_body, depth - 1)

    await follow("post", "/v1/agents", "/v1/agents", {"name": "linked"}, depth=4)
    for expected in [
        ("post", "/v1/sessions"),
        ("post", "/v1/sessions/{session_id}/clients"),
        ("post", "/v1/sessions/{session_id}/clients/{client_id}/ping"),
        ("get", "/v1/sessions/{session_id}/events"),
        ("delete", "/v1/agents/{agent_id}"),
    ]:
        assert expected in reached


def _segments(template: str, concrete: str) -> list[str]:
    pattern = re.sub(r"{\w+}", "([^/]+)", template)
    match = re.fullmatch(pattern, concrete)
    assert match is not None
    return list(match.groups())


def _target(reference: str) -> tuple[str, str]:
    pointer, method = reference.removeprefix("#/paths/").rsplit("/", 1)
    return pointer.replace("~1", "/").replace("~0", "~"), method


def _evaluate(expression: str, response: Any, request_path: dict[str, str]) -> str:
    if expression.startswith("$request.path."):
        return request_path[expression.removeprefix("$request.path.")]
    value = response
    for part in expression.removeprefix("$response.body#/").split("/"):
        value = value[part]
    return str(value)


def _evaluate_body(body: Any, response: Any, request_path: dict[str, str]) -> Any:
    if isinstance(body, dict):
        return {key: _evaluate_body(value, response, request_path) for key, value in body.items()}
    if isinstance(body, str) and body.startswith("$"):
        return _evaluate(body, response, request_path)
    return body


def _minimal_body(path: str, method: str) -> Any:
    minimal: dict[tuple[str, str], Any] = {
        ("patch", "/v1/agents/{agent_id}"): {"name": "renamed"},
        ("post", "/v1/agents/{agent_id}/versions"): VERSION,
        ("put", "/v1/agents/{agent_id}/security"): {"allowed_origins": []},
        ("post", "/v1/sessions/{session_id}/events"): {"type": "input", "text": "hi"},
        ("post", "/v1/sessions/{session_id}/clients"): {"name": "web", "lifetime": TTL, "tools": [HIGHLIGHT]},
        ("put", "/v1/sessions/{session_id}/clients/{client_id}/tools"): {"tools": [HIGHLIGHT]},
    }
    return minimal.get((method, path))
