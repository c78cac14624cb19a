"""``agentctl inspect RUN``'s delivery and its HTML run report (``--html FILE``).

The report is ONE self-contained file to attach to a ticket: inline CSS and SVG, no script,
no font, no image, nothing fetched. A Content-Security-Policy of ``default-src 'none'`` makes
a browser refuse any fetch even if some value slipped through unescaped — but nothing should:
every value (task ids, outputs, errors, audit payloads are user data) is escaped with
``html.escape`` where it is written. The report shows what ``inspect`` reads from the ledger,
which stores values already redacted, and nothing more.

Sections: header, lineage (every ancestor and descendant run), budget, task graph, timeline,
what needs an operator, tasks, effects with reconciliations, approvals (all, resolved too),
audit events.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import NoReturn

from agentctl import __version__
from agentctl.cli_report_svg import task_graph_svg, timeline_svg
from agentctl.cli_runview import (
    WIDTH,
    attention,
    fmt_duration,
    run_took,
    short_ts,
    span_seconds,
)
from agentctl.clikit import deliver
from agentctl.core.jsonvalue import JsonValue
from agentctl.ledger.report import LineageRun, RunReport
from agentctl.render import Outcome, dump_json

MAX_VALUE_CHARS = 4000  # an output or payload longer than this is cut in the report
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d232a;background:#fbfbfc}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd}
code,pre,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-all;background:#f1f3f5;padding:8px;margin:4px 0}
table{border-collapse:collapse;margin:4px 0}th,td{padding:3px 8px;text-align:left;
vertical-align:top;border-bottom:1px solid #e4e6e8}th{background:#eef0f2}
.muted{color:#6b7280}.badge{--c:#6b7280;padding:1px 7px;border-radius:9px;background:var(--c);
color:#fff}
.scroll{overflow-x:auto;border:1px solid #e4e6e8;background:#fff;padding:6px}
.state-succeeded,.state-approved{--c:#2f9e44}.state-failed,.state-rejected{--c:#e03131}
.state-cancelled{--c:#ae3ec9}
.state-paused,.state-waiting_for_approval,.state-waiting_for_effect,.state-retry_scheduled,
.state-running{--c:#f08c00}.state-pending,.state-ready,.state-skipped{--c:#adb5bd}
.node rect{fill:#fff;stroke:var(--c,#888);stroke-width:2.5}.node .id{font-weight:600}
svg text{font:12px system-ui,sans-serif;fill:#1d232a}svg text.sub{fill:#555;font-size:11px}
.edge{fill:none;stroke:#868e96;stroke-width:1.4}.arrow{fill:#868e96}.tick{stroke:#eee}
rect.attempt{fill:var(--c,#888)}rect.wait{fill:#ffe8a3}rect.effect{fill:#495057}
rect.status-failed,rect.status-uncertain{fill:#e03131}rect.status-succeeded{fill:#1971c2}
li.rel-self{font-weight:600}
"""


def _text(value: object) -> str:
    return escape(str(value))


def _value(value: JsonValue) -> str:
    """A JSON value for a table cell: escaped, cut when long, folded when multi-line."""
    if value is None:
        return '<span class="muted">-</span>'
    text = value if isinstance(value, str) else dump_json(value, indent=2)
    if len(text) > MAX_VALUE_CHARS:
        text = text[:MAX_VALUE_CHARS] + f"… ({len(text) - MAX_VALUE_CHARS} more characters)"
    if "\n" not in text and len(text) <= 80:
        return f"<code>{escape(text)}</code>"
    return f"<details><summary>{escape(text[:60])}…</summary><pre>{escape(text)}</pre></details>"


def _badge(state: str) -> str:
    return f'<span class="badge state-{escape(state)}">{escape(state)}</span>'


def _table(css_id: str, heads: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``rows`` hold cells that are already HTML (escaped where they came from)."""
    if not rows:
        return '<p class="muted">none</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in heads)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{css_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _run_link(run_id: str | None) -> str:
    if not run_id:
        return '<span class="muted">-</span>'
    return f'<a class="run-link mono" href="#lineage-{escape(run_id)}">{escape(run_id)}</a>'


def _header(report: RunReport) -> str:
    run = report.inspection.run
    took = run_took(run.state, run.created_at, run.updated_at)
    children = " ".join(_run_link(c.run_id) for c in report.children()) or "-"
    facts = [
        ("mode", _text(run.mode)),
        ("workflow", _text(run.workflow_name)),
        ("parent run", _run_link(run.parent_run_id)),
        ("source run", _run_link(run.source_run_id)),
        ("derived runs", children),
        ("created", _text(run.created_at)),
        ("updated", _text(run.updated_at)),
        ("duration", _text(took)),
        ("coordinator", "a live one drives it" if report.driven else "none"),
        ("trace", f'<span class="mono">{_text(run.trace_id)}</span>'),
        ("reason", _text(run.reason or "-")),
    ]
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{v}</td></tr>" for k, v in facts)
    return (
        f'<header><h1>Run <span class="mono" id="run-id">{_text(run.run_id)}</span> '
        f"{_badge(run.state)}</h1><table>{rows}</table></header>"
    )


def _lineage_item(run: LineageRun) -> str:
    relation = {"self": "this run", "ancestor": "earlier", "descendant": "derived later"}
    made = run.derived_from
    via = f" from {_run_link(made)}" if made and run.relation != "self" else ""
    return (
        f'<li class="lineage-run rel-{escape(run.relation)}" id="lineage-{escape(run.run_id)}"'
        f' data-run-id="{escape(run.run_id)}"><span class="mono">{_text(run.run_id)}</span> '
        f"{_badge(run.state)} {_text(run.mode)}{via} · {_text(short_ts(run.created_at))}"
        f" · {_text(fmt_duration(run.duration_seconds))}"
        f' <span class="muted">({escape(relation.get(run.relation, run.relation))})</span>'
        "</li>"
    )


def _lineage(report: RunReport) -> str:
    items = "".join(_lineage_item(r) for r in report.lineage)
    note = (
        '<p class="muted">Each run has its own report: <code>agentctl inspect RUN --html'
        " FILE</code>.</p>"
    )
    return f'<ol id="lineage">{items}</ol>{note}'


def _budget(report: RunReport) -> str:
    budget = report.inspection.budget
    usage = report.inspection.budget_usage()
    rows = []
    for dim in sorted(set(budget.limits) | set(usage)):
        limit = budget.limits.get(dim)
        used = usage.get(dim, 0)
        share = f"{100 * used // limit}%" if limit else "-"
        cells = [_text(dim), _text(used), _text(limit if limit is not None else "no limit")]
        rows.append([*cells, _text(share), _text(budget.reserved.get(dim, 0))])
    exceeded = f"<p>Exceeded: {_value(budget.exceeded)}</p>" if budget.exceeded else ""
    return _table("budget", ["dimension", "used", "limit", "share", "reserved"], rows) + exceeded


def _tasks(report: RunReport) -> str:
    took: dict[str, float] = {}
    for span in report.attempts():
        took[span.task_id] = took.get(span.task_id, 0.0) + (span.duration_seconds or 0.0)
    rows = []
    for t in report.inspection.tasks:
        duration = fmt_duration(took[t.task_id]) if t.task_id in took else "-"
        rows.append(
            [
                f'<span class="mono task-id">{_text(t.task_id)}</span>',
                _badge(t.state),
                _text(t.attempt),
                _text(t.disposition or "-"),
                _text(duration),
                _value(t.error),
                _value(t.output),
            ]
        )
    heads = ["task", "state", "attempt", "disposition", "took", "error", "output"]
    return _table("tasks", heads, rows)


def _effects(report: RunReport) -> str:
    recs: dict[str, list[str]] = {}
    for rec in report.inspection.reconciliations:
        line = f"{rec.status} by {rec.actor}: {rec.reason}"
        recs.setdefault(rec.effect_id, []).append(escape(line))
    rows = []
    for e in report.inspection.effects:
        took = fmt_duration(span_seconds(e.started_at, e.completed_at))
        rows.append(
            [
                f'<span class="mono" title="{_text(e.effect_id)}">{_text(e.effect_id[:12])}</span>',
                _text(e.task_id),
                _text(f"{e.operation} (attempt {e.attempt}, #{e.ordinal})"),
                _badge(e.status),
                _text(took),
                "<br>".join(recs.get(e.effect_id, [])) or "-",
                _value(e.error),
            ]
        )
    heads = ["effect", "task", "operation", "status", "took", "reconciliations", "error"]
    return _table("effects", heads, rows)


def _approvals(report: RunReport) -> str:
    rows = []
    for a in report.approval_history:
        resolved = f"{a.resolved_by or ''} {a.resolved_at or ''} {a.resolution_reason or ''}"
        rows.append(
            [
                f'<span class="mono">{_text(a.approval_id)}</span>',
                _text(a.task_id),
                _text(f"{a.capability or a.tool or '-'} ({a.risk})"),
                _badge(a.status),
                _text(a.reason or "-"),
                _text(resolved.strip() or "-"),
            ]
        )
    heads = ["approval", "task", "capability", "status", "reason", "resolved"]
    return _table("approvals", heads, rows)


def _audit(report: RunReport) -> str:
    rows = [
        [
            _text(e.sequence),
            _text(e.created_at),
            _text(e.event_type),
            _text(e.task_id or "-"),
            _value(e.payload),
        ]
        for e in report.inspection.audit
    ]
    return _table("audit", ["#", "time", "event", "task", "payload"], rows)


def _attention(report: RunReport, db: str) -> str:
    lines = attention(report, db, WIDTH)
    if not lines:
        return '<p class="muted">Nothing waits for an operator.</p>'
    return f'<pre id="attention">{escape(chr(10).join(lines[1:]).strip(chr(10)))}</pre>'


def report_html(report: RunReport, db: str) -> str:
    run = report.inspection.run
    sections = [
        ("Lineage", _lineage(report)),
        ("Budget", _budget(report)),
        ("Task graph", f'<div class="scroll">{task_graph_svg(report)}</div>'),
        ("Timeline", f'<div class="scroll">{timeline_svg(report)}</div>'),
        ("Needs an operator", _attention(report, db)),
        ("Tasks", _tasks(report)),
        ("Effects", _effects(report)),
        ("Approvals", _approvals(report)),
        ("Audit events", _audit(report)),
    ]
    body = "".join(f"<section><h2>{escape(t)}</h2>{html}</section>" for t, html in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>agentctl run {_text(run.run_id)} ({_text(run.state)})</title>"
        f"<style>{STYLE}</style></head><body>{_header(report)}{body}"
        f'<footer class="muted"><p>agentctl {escape(__version__)} run report</p></footer>'
        "</body></html>\n"
    )


def deliver_inspection(run_ref: str, db: str, html: Path | None) -> NoReturn:
    """``inspect RUN``: the ``RunInspection`` envelope (unchanged) or the human view; with
    ``--html``, the report file too. One read snapshot feeds all of them."""
    from agentctl.cli_runview import inspect_text
    from agentctl.coordinator import api

    report = api.run_report(run_ref, db=db, html=html)
    data = report.inspection.to_json()
    if html is None:
        deliver(Outcome("RunInspection", data, human=lambda s: inspect_text(report, db, s)))
    from agentctl.cli_docs import _write as write_atomically

    write_atomically(html, report_html(report, db))
    written = f"wrote the report of {report.inspection.run.run_id} to {html}"
    deliver(Outcome("RunInspection", data, human=lambda _s: written))
