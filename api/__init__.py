"""The HTTP API: FastAPI over the broker (`api.app.create_app`). Stateless; any number of replicas.

Importing the package imports nothing else, so the command line reads the API's settings
(`api/settings.py`) without loading the app."""
