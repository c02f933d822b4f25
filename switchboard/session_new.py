"""`switchboard session new`: a session to try things with from a terminal (`tools serve`, curl), on an
agent found by name or made with the built-in scripted model. It talks to a running API over HTTP with
an API key: `$SWITCHBOARD_API_KEY`, else the bootstrap key, else the development key `switchboard up`
keeps in the data directory."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx2

from broker.services.providers import SCRIPTED_MODEL, SCRIPTED_PROVIDER_ID
from switchboard.settings import LocalApiSettings

API_KEY_ENV = "SWITCHBOARD_API_KEY"
SCRIPTED = {"format": "openai_responses", "model": SCRIPTED_MODEL, "max_tokens": 1000, "context_window": 8000}


class SessionNotCreated(Exception):
    """What went wrong, said for a person at a terminal."""


@dataclass(frozen=True)
class NewSession:
    session_id: str
    session_token: str
    agent_id: str
    agent_name: str
    created_agent: bool


def api_key(settings: LocalApiSettings, environ: dict[str, str]) -> str:
    given = environ.get(API_KEY_ENV)
    if given:
        return given
    if settings.bootstrap_api_key is not None:
        return settings.bootstrap_api_key.get_secret_value()
    path = settings.dev_key_path
    if path.exists():
        return path.read_text().strip()
    raise SessionNotCreated(
        f"no API key: set {API_KEY_ENV}, or run this where `switchboard up` keeps {path} "
        "(or point SWITCHBOARD_DATA_DIR at that folder)"
    )


def _checked(answer: httpx2.Response, what: str) -> Any:
    if answer.status_code >= 400:
        try:
            message = answer.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = answer.text[:200]
        raise SessionNotCreated(f"{what}: {answer.status_code} {message}")
    return answer.json()


def _agent(http: httpx2.Client, name: str) -> tuple[str, bool]:
    """The newest agent called `name`, or a new one of the scripted model; and whether it was made."""
    params: dict[str, str | int] = {"limit": 200}
    while True:
        page = _checked(http.get("/v1/agents", params=params), "listing agents")
        for agent in page["items"]:
            if agent["name"] == name:
                return str(agent["id"]), False
        if page["next_cursor"] is None:
            break
        params["after"] = page["next_cursor"]
    keyed = {"Idempotency-Key": str(uuid.uuid4())}
    agent = _checked(http.post("/v1/agents", json={"name": name}, headers=keyed), "creating the agent")
    version = {"model_provider_id": SCRIPTED_PROVIDER_ID, "model": SCRIPTED}
    keyed = {"Idempotency-Key": str(uuid.uuid4())}
    _checked(http.post(f"/v1/agents/{agent['id']}/versions", json=version, headers=keyed), "publishing its version")
    return str(agent["id"]), True


def new_session(url: str, key: str, agent_name: str) -> NewSession:
    headers = {"Authorization": f"Bearer {key}"}
    try:
        with httpx2.Client(base_url=url, headers=headers, timeout=15) as http:
            agent_id, created = _agent(http, agent_name)
            keyed = {"Idempotency-Key": str(uuid.uuid4())}
            body = {"agent_id": agent_id}
            session = _checked(http.post("/v1/sessions", json=body, headers=keyed), "creating the session")
    except httpx2.TransportError as error:
        raise SessionNotCreated(f"cannot reach the API at {url} ({error}); is `switchboard up` running?") from None
    return NewSession(str(session["id"]), str(session["session_token"]), agent_id, agent_name, created)
