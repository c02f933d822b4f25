"""Gemini on Vertex AI: the project, the region and the credentials of a provider's `cloud` options."""

from __future__ import annotations

from typing import Any

from google.auth.credentials import Credentials
from google.oauth2 import credentials as oauth2_credentials

from workers.models.base import Endpoint, ModelError
from workers.models.clouds import service_account


def vertex_credentials(given: dict[str, str] | None) -> Credentials | None:
    """The provider's credentials: an OAuth access token, or a service account key (its JSON text, read
    as the anthropic Vertex client's is); None: the worker's environment's (Application Default
    Credentials)."""
    if given is None:
        return None
    if given.get("access_token"):
        # A bare token: nothing to refresh it with, so the run fails when it expires.
        return oauth2_credentials.Credentials(given["access_token"])  # type: ignore[no-untyped-call]
    if given.get("service_account"):
        return service_account(given["service_account"])
    raise ModelError("the Vertex AI credentials are neither an access_token nor a service_account key")


def vertex_client_args(endpoint: Endpoint) -> tuple[dict[str, Any], str]:
    """The `google.genai.Client` arguments for Vertex AI, and the region's default base URL."""
    cloud = endpoint.cloud or {}
    project, location = cloud.get("project"), cloud.get("location")
    if not isinstance(project, str) or not project or not isinstance(location, str) or not location:
        raise ModelError("a Vertex AI provider needs its cloud's project and location")
    credentials = vertex_credentials(None if endpoint.credentials is None else dict(endpoint.credentials))
    host = "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
    args = {"vertexai": True, "project": project, "location": location, "credentials": credentials}
    return args, f"https://{host}"
