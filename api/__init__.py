"""The HTTP API: FastAPI over the broker. Stateless; any number of replicas."""

from api.app import create_app

__all__ = ["create_app"]
