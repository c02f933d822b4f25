"""What the API tests share: a local server speaking the model providers' wires (tests/fakes.py), and the
OpenAPI document the API serves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.api_client import Api
from tests.fakes import FakeProvider, fake_provider


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with fake_provider() as provider:
        yield provider


@pytest.fixture
async def document(api: Api) -> dict[str, Any]:
    answer = await api.key.get("/openapi.json")
    assert answer.status_code == 200
    loaded: dict[str, Any] = answer.json()
    return loaded
