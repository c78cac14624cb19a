"""OpenTelemetry export (issue 16 item 4): one trace per run, a span per task and effect.

The run is real (the CLI in a fresh directory, a retried provider failure and a file write);
its spans are built from the committed audit log and handed to the SDK's in-memory exporter,
then, through the CLI with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, posted as OTLP/HTTP protobuf
to a collector stand-in on 127.0.0.1 that decodes them with the official ``opentelemetry-proto``.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentctl.coordinator.otel import export_spans, plan_spans, trace_hex
from agentctl.ledger import open_ledger
from tests.conftest import Cli

WORKFLOW = """apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: traced }
spec:
  policy: { approval: never, writableRoots: [out] }
  providers:
    sim: { kind: fake }
  agents:
    w: { provider: sim, model: m, instructions: echo, maxTurns: 1, providerOptions: { failFirst: 1 } }
  actions:
    save: { kind: builtin.write }
  tasks:
    - { id: first, uses: "agent:w", with: { prompt: one }, retry: { maxAttempts: 2, backoffMs: 10 } }
    - { id: save, uses: "action:save", needs: [first], with: { path: out/a.txt, content: hi } }
"""


def _run(cli: Cli, tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=env)
    assert done.rc == 0, done.stderr
    return dict(done.data)


def _record(cli: Cli, run_id: str) -> dict[str, Any]:
    return dict(cli("--output", "json", "inspect", run_id, "--db", "r.db").data)


def _attr(span: ReadableSpan, key: str) -> str:
    return str((span.attributes or {}).get(key))


def test_one_trace_per_run_with_a_span_per_task_and_effect(cli: Cli, tmp_path: Path) -> None:
    outcome = _run(cli, tmp_path)
    run_id = outcome["runId"]
    with open_ledger(tmp_path / "r.db") as ledger:
        audit = ledger.audit_after(run_id, 0)
    exporter = InMemorySpanExporter()
    assert export_spans(trace_hex(run_id, audit), plan_spans(run_id, audit), exporter)
    spans = exporter.get_finished_spans()
    record = _record(cli, run_id)

    assert {s.context.trace_id for s in spans} == {
        int(outcome["traceId"].removeprefix("trace-").replace("-", ""), 16)
    }
    [root] = [s for s in spans if s.parent is None]
    assert _attr(root, "agentctl.run_id") == run_id
    tasks = {_attr(s, "agentctl.task_id"): s for s in spans if s.name.startswith("task ")}
    assert set(tasks) == {t["taskId"] for t in record["tasks"]}
    for task in tasks.values():
        assert task.parent is not None and task.parent.span_id == root.context.span_id
    effects = [s for s in spans if "agentctl.effect_id" in (s.attributes or {})]
    assert sorted(_attr(s, "agentctl.effect_id") for s in effects) == sorted(
        e["effectId"] for e in record["effects"]
    )
    for span in effects:
        task = tasks[_attr(span, "agentctl.task_id")]
        assert span.parent is not None and span.parent.span_id == task.context.span_id
        assert span.start_time is not None and span.end_time is not None
        assert root.start_time is not None and root.start_time <= span.start_time <= span.end_time
    failed = [s for s in effects if s.status.status_code == StatusCode.ERROR]
    assert [_attr(s, "agentctl.status") for s in failed] == ["failed"]
    assert len(spans) == 1 + len(record["tasks"]) + len(record["effects"])


class _Collector(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        return


@pytest.fixture
def collector() -> Iterator[tuple[int, list[tuple[str, bytes]]]]:
    received: ClassVar[list[tuple[str, bytes]]] = []
    handler = type("Collector", (_Collector,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], received
    finally:
        server.shutdown()
        server.server_close()


def test_the_cli_exports_a_finished_run_over_otlp_http(
    cli: Cli, tmp_path: Path, collector: tuple[int, list[tuple[str, bytes]]]
) -> None:
    port, received = collector
    outcome = _run(cli, tmp_path, env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"})
    [(path, body)] = received
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    record = _record(cli, outcome["runId"])
    assert len(spans) == 1 + len(record["tasks"]) + len(record["effects"])
    assert {s.trace_id.hex() for s in spans} == {
        outcome["traceId"].removeprefix("trace-").replace("-", "")
    }
    by_id = {s.span_id: s for s in spans}
    for span in spans:
        if span.parent_span_id:
            assert span.parent_span_id in by_id  # every parent is in the same export
    effect_ids = {
        a.value.string_value for s in spans for a in s.attributes if a.key == "agentctl.effect_id"
    }
    assert effect_ids == {e["effectId"] for e in record["effects"]}


def test_a_failed_export_is_one_warning_naming_its_cause(cli: Cli, tmp_path: Path) -> None:
    """A collector nobody listens on: the run's outcome stands (exit 0, its JSON intact) and
    stderr holds our one warning, with the SDK's reason in it — not the SDK's own lines."""
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2",
    }
    (tmp_path / "wf.yaml").write_text(WORKFLOW)
    done = cli("--output", "json", "run", "wf.yaml", "--db", "r.db", env=env)
    assert done.rc == 0 and done.data["state"] == "succeeded"
    [line] = done.stderr.splitlines()
    assert line.startswith(f"warning: OpenTelemetry export of {done.data['runId']} failed: ")
    assert "127.0.0.1" in line  # the SDK's cause, on our line
