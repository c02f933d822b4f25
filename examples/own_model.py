"""Your own model behind a Chat Completions endpoint (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, ...)
as an agent's model: the provider, an agent version on it, one session, one question, and what the run
cost. It uses plain HTTP (httpx2), since the Subako SDK lists only the formats its enum names.

    SWITCHBOARD_API_KEY=$(cat .switchboard/dev-api-key) MODEL=qwen3:8b .venv/bin/python examples/own_model.py

`SWITCHBOARD_URL` is the API (http://127.0.0.1:8000 by default), `SWITCHBOARD_API_KEY` the key
`switchboard up` printed. `MODEL_BASE_URL` is the server's OpenAI base URL (Ollama's,
http://127.0.0.1:11434/v1, by default; a loopback or private address needs
SWITCHBOARD_PROVIDER_ALLOW_PRIVATE=true on the API and the workers), `MODEL` the model's name there and
`MODEL_API_KEY` its key (Ollama takes any). It prints the answer and the tokens and exits 0, or says what
failed and exits 1.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import httpx2

RUN_ENDS = ("run_completed", "run_failed", "run_cancelled")
WAIT_S = 120.0


def checked(answer: httpx2.Response) -> Any:
    if answer.status_code >= 400:
        raise SystemExit(f"own_model.py: {answer.request.method} {answer.request.url.path}: {answer.text[:300]}")
    return answer.json()


def main() -> int:
    url = os.environ.get("SWITCHBOARD_URL", "http://127.0.0.1:8000").rstrip("/")
    key = os.environ.get("SWITCHBOARD_API_KEY") or sys.exit("own_model.py: set SWITCHBOARD_API_KEY")
    base_url = os.environ.get("MODEL_BASE_URL", "http://127.0.0.1:11434/v1")
    model = os.environ.get("MODEL", "qwen3:8b")
    with httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as admin:
        provider = checked(
            admin.post(
                "/v1/model-providers",
                json={
                    "format": "openai_chat",
                    "display_name": f"Chat Completions at {base_url}",
                    "base_url": base_url,
                    "api_key": os.environ.get("MODEL_API_KEY", "not-needed"),
                },
            )
        )
        agent = checked(admin.post("/v1/agents", json={"name": "own model"}))
        version = {
            "model_provider_id": provider["id"],
            "model": {"format": "openai_chat", "model": model, "max_tokens": 1024, "context_window": 32768},
            "system_prompt": "Answer in one short sentence.",
        }
        checked(admin.post(f"/v1/agents/{agent['id']}/versions", json=version))
        session = checked(admin.post("/v1/sessions", json={"agent_id": agent["id"]}))
        events = f"/v1/sessions/{session['id']}/events"
        checked(admin.post(events, json={"type": "input", "text": "Why is the sky blue?"}))
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            log = checked(admin.get(events, params={"order": "asc", "limit": 200}))["items"]
            ended = [e for e in log if e["type"] in RUN_ENDS]
            if ended:
                return report(log, ended[0])
            time.sleep(0.2)
    print(f"own_model.py: no answer within {WAIT_S:g} s", file=sys.stderr)  # noqa: T201
    return 1


def report(log: list[dict[str, Any]], ended: dict[str, Any]) -> int:
    if ended["type"] != "run_completed":
        print(f"own_model.py: the run ended with {ended['type']}: {ended.get('error', '')}", file=sys.stderr)  # noqa: T201
        return 1
    answer = [e for e in log if e["type"] == "message_assistant"][-1]["message"]
    print("answer:", "".join(b["data"]["text"] for b in answer["content"] if b["type"] == "text"))  # noqa: T201
    # An extension field: the tokens the run used, as the server counted them (absent if it sent none).
    usage = ended.get("usage") or {}
    print("tokens:", ", ".join(f"{name} {value}" for name, value in usage.items()) or "the server sent no counts")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
