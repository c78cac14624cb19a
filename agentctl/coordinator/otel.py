"""Optional OpenTelemetry export: a finished run's spans, built from its audit log.

When ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set, a
drive that leaves its run terminal exports the run as one trace over OTLP/HTTP: a span for the
run, one per task (child of the run) and one per effect (child of its task), with the run,
task and effect ids as attributes. The spans are read from the committed audit events (never
from the driver's memory), so they say what the ledger says, and the audit log stays the
record: the export is a copy of it.

Invariants:
- the OTel trace id is the run's own trace id (its ``run.created`` event) and every span id is
  derived from what it stands for (an effect's is its id's first 16 hex digits, the span id
  its provider request carried as ``traceparent``), so exporting a run again yields the same
  spans, not a second trace;
- ``opentelemetry`` is imported only when an endpoint is configured (extra ``[otel]``);
- a failed export is reported on stderr and never changes the run's outcome or exit code.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import trio

from agentctl.core.states import is_terminal_run
from agentctl.ledger.audit import AuditEvent

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from agentctl.coordinator.store import Store

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_FAILED = {"failed", "uncertain", "cancelled"}


@dataclass
class SpanPlan:
    """One span to export, before OpenTelemetry is involved (ids are hex strings)."""

    name: str
    span_id: str
    parent_id: str | None
    start: str
    end: str
    attributes: dict[str, str | int] = field(default_factory=dict)
    status: str = ""  # the last state or status seen; "failed"-like ones mark an error

    def stretch(self, event: AuditEvent) -> None:
        self.start, self.end = min(self.start, event.created_at), max(self.end, event.created_at)


def otel_configured(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return any(env.get(name) for name in ENDPOINT_VARIABLES)


def _hex_id(text: str, size: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def trace_hex(run_id: str, audit: Sequence[AuditEvent]) -> str:
    """The run's OTel trace id: its first trace id's 32 hex digits (else derived from it)."""
    first = next((e.trace_id for e in audit if e.trace_id), None)
    digits = (first or "").removeprefix("trace-").replace("-", "").lower()
    return digits if len(digits) == 32 else _hex_id(f"trace:{run_id}", 32)


def plan_spans(run_id: str, audit: Sequence[AuditEvent]) -> list[SpanPlan]:
    """The run's spans: run, then tasks and effects in the order they first appear."""
    if not audit:
        return []
    root = SpanPlan("run", _hex_id(f"run:{run_id}", 16), None, audit[0].created_at, "")
    root.attributes = {"agentctl.run_id": run_id}
    tasks: dict[str, SpanPlan] = {}
    effects: dict[str, SpanPlan] = {}
    for event in audit:
        root.stretch(event)
        if event.event_type.startswith("run."):
            root.status = event.event_type.removeprefix("run.")
        if event.task_id is None:
            continue
        task = _task_span(tasks, root, run_id, event)
        if event.event_type.startswith("task."):
            task.status = event.event_type.removeprefix("task.")
        elif event.event_type.startswith("effect.") and isinstance(event.payload, dict):
            _effect_event(effects, task, run_id, event)
    return [root, *tasks.values(), *effects.values()]


def _task_span(
    tasks: dict[str, SpanPlan], root: SpanPlan, run_id: str, event: AuditEvent
) -> SpanPlan:
    task_id = event.task_id or ""
    span = tasks.get(task_id)
    if span is None:
        span_id = _hex_id(f"task:{run_id}:{task_id}", 16)
        span = SpanPlan(f"task {task_id}", span_id, root.span_id, event.created_at, "")
        span.attributes = {"agentctl.run_id": run_id, "agentctl.task_id": task_id}
        tasks[task_id] = span
    span.stretch(event)
    return span


def _effect_event(
    effects: dict[str, SpanPlan], task: SpanPlan, run_id: str, event: AuditEvent
) -> None:
    payload = event.payload
    assert isinstance(payload, dict)
    effect_id, status = payload.get("effectId"), payload.get("status")
    if not isinstance(effect_id, str) or event.event_type == "effect.reconciled":
        return
    span = effects.get(effect_id)
    if span is None:
        operation = str(payload.get("operation"))
        span = SpanPlan(operation, effect_id[:16], task.span_id, event.created_at, "")
        span.attributes = {
            "agentctl.run_id": run_id,
            "agentctl.task_id": event.task_id or "",
            "agentctl.effect_id": effect_id,
            "agentctl.operation": operation,
            "agentctl.attempt": int(str(payload.get("attempt") or 0)),
        }
        effects[effect_id] = span
    span.stretch(event)
    span.status = str(status)


def _nanos(stamp: str) -> int:
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1_000_000) * 1000


def export_spans(trace: str, plans: Sequence[SpanPlan], exporter: SpanExporter) -> bool:
    """Hand the planned spans to ``exporter`` as finished OpenTelemetry spans; whether it
    accepted them."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

    resource = Resource.create({"service.name": "agentctl"})
    flags = TraceFlags(TraceFlags.SAMPLED)

    def context(span_id: str) -> SpanContext:
        return SpanContext(int(trace, 16), int(span_id, 16), is_remote=False, trace_flags=flags)

    spans = [
        ReadableSpan(
            name=plan.name,
            context=context(plan.span_id),
            parent=context(plan.parent_id) if plan.parent_id else None,
            resource=resource,
            attributes={**plan.attributes, "agentctl.status": plan.status},
            status=Status(StatusCode.ERROR if plan.status in _FAILED else StatusCode.OK),
            start_time=_nanos(plan.start),
            end_time=_nanos(plan.end),
        )
        for plan in plans
    ]
    from opentelemetry.sdk.trace.export import SpanExportResult

    return exporter.export(spans) == SpanExportResult.SUCCESS


class _SdkLog(logging.Handler):
    """What the OpenTelemetry SDK logs while it exports: the only place it says why an export
    failed. Kept for our one warning instead of reaching stderr as the SDK's own lines."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def reason(self) -> str:
        """The first thing it said (the cause; what follows are its consequences), on one
        bounded line; empty when it said nothing."""
        first = self.lines[0].strip().splitlines()[0] if self.lines else ""
        return f": {first[:200]}" if first else ""


def _export_otlp(trace: str, plans: Sequence[SpanPlan]) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    sdk, said = logging.getLogger("opentelemetry"), _SdkLog()
    sdk.addHandler(said)
    sdk.propagate, propagated = False, sdk.propagate
    try:
        exporter = OTLPSpanExporter()  # endpoint, headers and timeout from the OTEL_* variables
        try:
            if not export_spans(trace, plans, exporter):
                raise OSError(f"the OTLP endpoint did not accept the spans{said.reason()}")
        finally:
            exporter.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
    finally:
        sdk.removeHandler(said)
        sdk.propagate = propagated


async def export_run(store: Store, run_id: str, state: str) -> None:
    """Export a run that ``state`` left terminal, if an OTLP endpoint is configured."""
    if not otel_configured() or not is_terminal_run(state):
        return
    try:
        audit = await store.audit_after(run_id, 0)
        plans = plan_spans(run_id, audit)
        await trio.to_thread.run_sync(_export_otlp, trace_hex(run_id, audit), plans)
    except Exception as exc:  # the run's outcome stands; the trace is a copy
        sys.stderr.write(f"warning: OpenTelemetry export of {run_id} failed: {exc}\n")
