"""The console shows what a completed run cost: its tokens, as the provider counted them (issue 26)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, expect

from tests.e2e.served import Served, api_and_worker
from tests.fakes import fake_provider
from tests.fakes_chat import chat_stream, chat_usage

pytestmark = [pytest.mark.processes, pytest.mark.browser, pytest.mark.timeout(120)]


@pytest.fixture
def served(redis_url: str, tmp_path: Path) -> Iterator[Served]:
    # The model server is on the loopback here.
    with api_and_worker(redis_url, tmp_path / "logs", provider_allow_private="true") as running:
        yield running


async def test_a_completed_runs_tokens_show_beside_run_completed(served: Served, browser: Browser) -> None:
    async with (
        fake_provider() as model,
        httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {served.key}"}) as admin,
    ):
        body = {"format": "openai_chat", "display_name": "local", "base_url": f"{model.url}/v1", "api_key": "k"}
        provider = (await admin.post("/v1/model-providers", json=body)).json()
        agent = (await admin.post("/v1/agents", json={"name": "counted"})).json()
        block = {"format": "openai_chat", "model": "qwen3", "max_tokens": 100, "context_window": 8000}
        version = {"model_provider_id": provider["id"], "model": block}
        assert (await admin.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
        session = (await admin.post("/v1/sessions", json={"agent_id": agent["id"]})).json()
        model.replies = [chat_stream("Counted.", usage=chat_usage(1834, 211, cached=1536, reasoning=64))]

        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        console = await context.new_page()
        await console.goto(f"{served.url}/console#key={served.key}&session={session['id']}")
        await expect(console.locator("#say")).to_be_visible(timeout=15_000)
        path = f"/v1/sessions/{session['id']}/events"
        assert (await admin.post(path, json={"type": "input", "text": "count me"})).status_code == 200
        await expect(console.locator("#transcript")).to_contain_text(
            "run completed · 1,834 tokens in (1,536 cached), 211 out (64 reasoning)", timeout=30_000
        )
        await context.close()
