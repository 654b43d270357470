"""OpenTelemetry setup: spans always (trace ids are real), an exporter only when configured."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from ragstack.config import TelemetryConfig
from ragstack.errors import Cancelled

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


@contextmanager
def stoppable_span(
    tracer: trace.Tracer, name: str, attributes: Mapping[str, int | str] | None = None
) -> Iterator[trace.Span]:
    """A span for work that a cancel may stop: Cancelled ends it with a `cancelled` event and no
    error status (a cancel is not a failure to whoever reads the trace); any other exception is
    recorded as an error, as OpenTelemetry's own spans do."""
    with tracer.start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            yield span
        except Cancelled:
            span.add_event("cancelled")
            raise
        except Exception as err:
            span.record_exception(err)
            span.set_status(Status(StatusCode.ERROR, f"{type(err).__name__}: {err}"))
            raise


# The request id of the call being served: set by the gateway (X-Request-ID) and by every gRPC
# server from the `x-request-id` metadata its callers pass on; in every log line and JSON trace.
REQUEST_ID: ContextVar[str] = ContextVar("request_id", default="")


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, and the error if any."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", ""),
        }
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def setup_logging(level: int, fmt: str = "text") -> None:
    """The root logger: text (with the request id when there is one) or JSON lines."""
    from ragstack.redact import RedactingFilter, install_log_redaction

    handler = logging.StreamHandler()
    handler.addFilter(_RequestIdFilter())
    handler.addFilter(RedactingFilter())  # no URL password or secret parameter in any log line
    handler.setFormatter(
        JsonFormatter()
        if fmt == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s")
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    install_log_redaction()
