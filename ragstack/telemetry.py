"""OpenTelemetry setup: spans always (trace ids are real), an exporter only when configured."""

from __future__ import annotations

from opentelemetry import trace

from ragstack.config import TelemetryConfig

_configured = False


def setup_tracing(cfg: TelemetryConfig) -> None:
    """Installs the SDK tracer provider once per process; OTLP/gRPC export when an endpoint is set.

    Without an endpoint no exporter runs (a missing collector would stall shutdown for seconds).
    """
    global _configured
    if _configured:
        return
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(resource=Resource.create({"service.name": cfg.service_name}))
    if cfg.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=cfg.otlp_endpoint, insecure=True))
        )
    trace.set_tracer_provider(provider)
    _configured = True


def current_trace_id() -> str:
    """The current span's trace id as 32 hex characters ("" when there is no span)."""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.trace_id else ""
