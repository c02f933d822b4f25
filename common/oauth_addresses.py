"""Where an MCP grant's OAuth flow reaches this deployment, under `SWITCHBOARD_PUBLIC_URL`: the page the
authorization server sends the browser back to, and the Client ID Metadata Document whose own address is
the client id (used as one only when the public URL is https, as the MCP authorization specification
requires)."""

from __future__ import annotations

from pydantic import HttpUrl

CALLBACK_PATH = "/v1/mcp/oauth/callback"
CLIENT_METADATA_PATH = "/v1/mcp/oauth/client-metadata.json"


def _under(public_url: HttpUrl, path: str) -> str:
    return str(public_url).rstrip("/") + path


def callback_url(public_url: HttpUrl) -> str:
    return _under(public_url, CALLBACK_PATH)


def client_metadata_url(public_url: HttpUrl) -> str:
    return _under(public_url, CLIENT_METADATA_PATH)
