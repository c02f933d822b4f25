"""One API and one worker process per example test module, on the session's Redis."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.served import Served, api_and_worker


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # The default deadlines: an example runs at a person's pace, not at the unit tests' half second.
    with api_and_worker(redis_url, tmp_path_factory.mktemp("example-logs")) as running:
        yield running
