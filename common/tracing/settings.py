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
    # Only OTLP over HTTP with protobuf is carried; another protocol named is warned of, not honoured.
    otel_exporter_otlp_protocol: str = ""
    otel_exporter_otlp_traces_protocol: str = ""
    # The GenAI conventions' switch: prompts, arguments and results go on spans only when it is true.
    otel_instrumentation_genai_capture_message_content: bool = False

    @property
    def other_protocol(self) -> str:
        """A protocol asked for that is not `http/protobuf` ('' for none)."""
        asked = self.otel_exporter_otlp_traces_protocol or self.otel_exporter_otlp_protocol
        return asked if asked not in ("", "http/protobuf") else ""

    @property
    def enabled(self) -> bool:
        if self.otel_sdk_disabled:
            return False
        return self.switchboard_tracing or bool(
            self.otel_exporter_otlp_endpoint or self.otel_exporter_otlp_traces_endpoint
        )
