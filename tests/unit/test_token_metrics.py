"""A step's token counts in the worker's Prometheus counter, by kind, provider, model and agent."""

from __future__ import annotations

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
