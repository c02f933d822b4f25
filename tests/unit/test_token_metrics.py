"""A step's token counts in the worker's Prometheus counter, by kind, provider, model and agent."""

from __future__ import annotations

import pytest

from workers.metrics import WorkerMetrics


def test_each_kind_counts_under_its_own_label() -> None:
    metrics = WorkerMetrics()
    metrics.tokens("prov-1", "qwen3", "agent-1", {"input_tokens": 100, "output_tokens": 7, "cached_input_tokens": 80})
    metrics.tokens("prov-1", "qwen3", "agent-1", {"input_tokens": 5, "reasoning_tokens": 2})
    metrics.tokens("prov-2", "qwen3", "agent-1", {"input_tokens": 1})

    def sample(kind: str, provider: str = "prov-1") -> float | None:
        labels = {"kind": kind, "provider": provider, "model": "qwen3", "agent": "agent-1"}
        return metrics.registry.get_sample_value("switchboard_model_tokens_total", labels)

    assert (sample("input"), sample("output"), sample("cached_input"), sample("reasoning")) == (105, 7, 80, 2)
    assert sample("input", "prov-2") == 1


def test_the_label_sets_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("workers.metrics.TOKEN_SERIES", 3)
    metrics = WorkerMetrics()
    for n in range(5):
        metrics.tokens("prov", f"model-{n}", "agent", {"output_tokens": 1})
    metrics.tokens("prov", "m" * 500, "agent", {"output_tokens": 1})
    samples = [s for m in metrics.registry.collect() for s in m.samples if s.name == "switchboard_model_tokens_total"]
    assert {s.labels["model"] for s in samples} == {"model-0", "model-1", "model-2", "other"}
    assert sum(s.value for s in samples if s.labels["model"] == "other") == 3
