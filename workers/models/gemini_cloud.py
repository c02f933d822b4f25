"""Gemini on Vertex AI: the project, the region and the credentials of a provider's `cloud` options."""

from __future__ import annotations

import json
from typing import Any

from google.auth.credentials import Credentials
from google.oauth2 import credentials as oauth2_credentials
from google.oauth2 import service_account

from workers.models.base import Endpoint, ModelError, provider_text

# A service account key names where its signed assertion is traded for a token: only Google's own, or the
# key's author would choose where this worker sends an assertion signed with the key.
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"  # noqa: S105 (a URL, not a secret)
_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def vertex_credentials(given: dict[str, str] | None) -> Credentials | None:
    """The provider's credentials: an OAuth access token, or a service account key (its JSON text);
    None: the worker's environment's (Application Default Credentials)."""
    if not given:
        return None
    if given.get("access_token"):
        # A bare token: nothing to refresh it with, so the run fails when it expires.
        return oauth2_credentials.Credentials(given["access_token"])  # type: ignore[no-untyped-call]
    if given.get("service_account"):
        try:
            info = json.loads(given["service_account"])
        except ValueError:
            raise ModelError("the Vertex AI service account key is not JSON") from None
        if not isinstance(info, dict):
            raise ModelError("the Vertex AI service account key is not a JSON object")
        if info.get("token_uri") != GOOGLE_TOKEN_URI:
            uri = provider_text(info.get("token_uri"), "none", limit=100)
            raise ModelError(f"the Vertex AI service account key's token_uri must be {GOOGLE_TOKEN_URI}, not {uri}")
        try:
            # Its token is fetched (and refreshed) by google-auth from GOOGLE_TOKEN_URI, the one request
            # that does not go through the provider's client.
            return service_account.Credentials.from_service_account_info(info, scopes=_SCOPES)  # type: ignore[no-untyped-call,no-any-return]
        except (ValueError, KeyError) as error:
            raise ModelError(f"the Vertex AI service account key is not usable: {error}") from None
    raise ModelError("the Vertex AI credentials are neither an access_token nor a service_account key")


def vertex_client_args(endpoint: Endpoint) -> tuple[dict[str, Any], str]:
    """The `google.genai.Client` arguments for Vertex AI, and the region's default base URL."""
    cloud = endpoint.cloud or {}
    project, location = cloud.get("project"), cloud.get("location")
    if not isinstance(project, str) or not project or not isinstance(location, str) or not location:
        raise ModelError("a Vertex AI provider needs its cloud's project and location")
    credentials = vertex_credentials(dict(endpoint.credentials) if endpoint.credentials else None)
    host = "aiplatform.googleapis.com" if location == "global" else f"{location}-aiplatform.googleapis.com"
    args = {"vertexai": True, "project": project, "location": location, "credentials": credentials}
    return args, f"https://{host}"
