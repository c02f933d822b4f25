"""Whether a process traces, read from the environment once at start (the OTel SDK reads the rest)."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class TracingSettings(BaseSettings):
    """Tracing is on when `SWITCHBOARD_TRACING` is true or an OTLP endpoint is named; the exporter and the
    resource are configured by the standard `OTEL_*` variables, which the SDK reads itself."""

    model_config = SettingsConfigDict(extra="ignore", frozen=True)

    switchboard_tracing: bool = False
    otel_exporter_otlp_endpoint: str = ""
    otel_exporter_otlp_traces_endpoint: str = ""
    otel_sdk_disabled: bool = False
    # The GenAI conventions' switch: prompts, arguments and results go on spans only when it is true.
    otel_instrumentation_genai_capture_message_content: bool = False

    @property
    def enabled(self) -> bool:
        if self.otel_sdk_disabled:
            return False
        return self.switchboard_tracing or bool(
            self.otel_exporter_otlp_endpoint or self.otel_exporter_otlp_traces_endpoint
        )
