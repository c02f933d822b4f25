"""The /v1 routers and the operational routes."""
