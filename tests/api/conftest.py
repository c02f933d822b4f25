"""What the API tests share: a local server speaking the model providers' wires (tests/fakes.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.fakes import FakeProvider, fake_provider


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with fake_provider() as provider:
        yield provider
