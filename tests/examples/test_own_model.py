"""examples/own_model.py, run as a reader would, against API and worker processes and a local server
that speaks Chat Completions."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator

import pytest

from tests.e2e.served import Served, api_and_worker
from tests.examples.support import EXAMPLES
from tests.fakes import fake_provider
from tests.fakes_chat import chat_stream, chat_usage

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120), pytest.mark.xdist_group("own_model")]


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    # The model server is on the loopback here, as a local Ollama would be.
    logs = tmp_path_factory.mktemp("own-model-logs")
    with api_and_worker(redis_url, logs, provider_allow_private="true") as running:
        yield running


async def own_model(**env: str) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHBOARD_", "MODEL"))}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLES / "own_model.py"),
        env={**base, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=90)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_it_prints_the_answer_and_what_the_run_cost(served: Served) -> None:
    async with fake_provider() as model:
        model.replies = [chat_stream("Rayleigh scattering.", usage=chat_usage(31, 5), model="qwen3:8b")]
        env = {"SWITCHBOARD_URL": served.url, "SWITCHBOARD_API_KEY": served.key}
        code, out, err = await own_model(**env, MODEL_BASE_URL=f"{model.url}/v1", MODEL="qwen3:8b")
        assert code == 0, out + err
        assert out.splitlines() == ["answer: Rayleigh scattering.", "tokens: input_tokens 31, output_tokens 5"]
        (sent,) = model.requests
        assert sent["model"] == "qwen3:8b"
        assert sent["messages"][0] == {"role": "system", "content": "Answer in one short sentence."}

        model.replies = [chat_stream("", finish="content_filter")]
        code, out, err = await own_model(**env, MODEL_BASE_URL=f"{model.url}/v1")
        assert code == 1
        assert "run_failed" in err
        assert "content_filter" in err
