"""The two drawings of the HTML run report, as inline SVG: the task graph and the timeline.

The task graph is laid out from the plan's dependencies (``needs``): a task's column is the
length of the longest dependency chain leading to it, its row its place in compiled order
within that column. The timeline puts every attempt (from the audit log) and every effect
(requested → started → completed) of each task on one shared time axis, run start to last
update.

Invariants: every text and attribute value passes through ``html.escape`` (task ids, errors
and operation names are user data); nothing refers to anything outside the document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from agentctl.cli_runview import fmt_duration
from agentctl.core.jsonvalue import JsonValue
from agentctl.ledger.report import RunReport
from agentctl.ledger.rows import parse_ts

# Beyond this many tasks the graph and the timeline show the first ones (the tables show all).
MAX_GRAPH_TASKS = 400
NODE_W, NODE_H, COL_GAP, ROW_GAP, PAD = 168, 40, 56, 14, 16
LABEL_W, PLOT_W, ROW_H = 170, 760, 24


@dataclass(frozen=True)
class Node:
    """One task's box in the report's graph: its state, attempt and grid cell."""

    task_id: str
    state: str
    attempt: int
    column: int
    row: int


def plan_needs(plan: JsonValue) -> dict[str, list[str]]:
    """``needs`` of each task in the run's printed plan (tasks as a list or keyed by id)."""
    tasks = plan.get("tasks") if isinstance(plan, dict) else None
    entries = list(tasks.values()) if isinstance(tasks, dict) else tasks
    found: dict[str, list[str]] = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            needs = entry.get("needs")
            names = [n for n in needs if isinstance(n, str)] if isinstance(needs, list) else []
            found[str(entry["id"])] = names
    return found


def _columns(order: Sequence[str], needs: Mapping[str, list[str]]) -> dict[str, int]:
    """Longest-chain depth of each task; a (corrupt) cycle is cut where it is met."""
    depth: dict[str, int] = {}
    visiting: set[str] = set()

    def visit(task: str) -> int:
        if task in depth:
            return depth[task]
        if task in visiting:
            return 0
        visiting.add(task)
        deps = [d for d in needs.get(task, []) if d in needs]
        depth[task] = 1 + max((visit(d) for d in deps), default=-1)
        visiting.discard(task)
        return depth[task]

    for task in order:
        visit(task)
    return depth


def graph_nodes(report: RunReport) -> list[Node]:
    tasks = report.inspection.tasks[:MAX_GRAPH_TASKS]
    needs = plan_needs(report.inspection.run.plan)
    known = {t.task_id: needs.get(t.task_id, []) for t in tasks}
    columns = _columns([t.task_id for t in tasks], known)
    rows: dict[int, int] = {}
    nodes = []
    for task in tasks:
        column = columns[task.task_id]
        rows[column] = rows.get(column, -1) + 1
        nodes.append(Node(task.task_id, task.state, task.attempt, column, rows[column]))
    return nodes


def _at(node: Node) -> tuple[int, int]:
    return PAD + node.column * (NODE_W + COL_GAP), PAD + node.row * (NODE_H + ROW_GAP)


def _edges(nodes: Sequence[Node], needs: Mapping[str, list[str]]) -> list[str]:
    where = {n.task_id: n for n in nodes}
    paths = []
    for node in nodes:
        x2, top = _at(node)
        y2 = top + NODE_H // 2
        for dep in needs.get(node.task_id, []):
            if dep not in where:
                continue
            left, dep_top = _at(where[dep])
            x1, y1 = left + NODE_W, dep_top + NODE_H // 2
            mid = (x1 + x2) // 2
            label = escape(f"{dep} → {node.task_id}")
            ends = f'data-from="{escape(dep)}" data-to="{escape(node.task_id)}"'
            paths.append(
                f'<path class="edge" {ends} d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2 - 4},{y2}"'
                f' marker-end="url(#arrow)"><title>{label}</title></path>'
            )
    return paths


def _node(node: Node) -> str:
    x, y = _at(node)
    name = node.task_id if len(node.task_id) <= 19 else node.task_id[:18] + "…"
    return (
        f'<g class="node state-{escape(node.state)}" data-task-id="{escape(node.task_id)}">'
        f"<title>{escape(node.task_id)}: {escape(node.state)}, attempt {node.attempt}</title>"
        f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6"/>'
        f'<text x="{x + 8}" y="{y + 16}" class="id">{escape(name)}</text>'
        f'<text x="{x + 8}" y="{y + 32}" class="sub">{escape(node.state)}'
        f" · #{node.attempt}</text></g>"
    )


def task_graph_svg(report: RunReport) -> str:
    nodes = graph_nodes(report)
    if not nodes:
        return '<p class="muted">This run has no tasks.</p>'
    needs = plan_needs(report.inspection.run.plan)
    width = PAD * 2 + (max(n.column for n in nodes) + 1) * (NODE_W + COL_GAP) - COL_GAP
    height = PAD * 2 + (max(n.row for n in nodes) + 1) * (NODE_H + ROW_GAP) - ROW_GAP
    arrow = (
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="8"'
        ' markerHeight="8" orient="auto"><path d="M0,0 L8,4 L0,8 z" class="arrow"/></marker>'
        "</defs>"
    )
    body = "".join([arrow, *_edges(nodes, needs), *(_node(n) for n in nodes)])
    return (
        f'<svg id="task-graph" xmlns="http://www.w3.org/2000/svg" width="{width}"'
        f' height="{height}" viewBox="0 0 {width} {height}" role="img"'
        f' aria-label="task graph">{body}</svg>'
    )


class Axis:
    """Maps timestamps onto the timeline's x axis (run creation at 0)."""

    def __init__(self, start: str, end: str) -> None:
        self.t0 = parse_ts(start)
        self.span = max((parse_ts(end) - self.t0).total_seconds(), 0.001)

    def x(self, ts: str) -> float:
        offset = (parse_ts(ts) - self.t0).total_seconds()
        return LABEL_W + max(0.0, min(offset / self.span, 1.0)) * PLOT_W


def _bar(axis: Axis, start: str, end: str, y: int, height: int, css: str, tip: str) -> str:
    x1, x2 = axis.x(start), axis.x(end)
    return (
        f'<rect class="{escape(css)}" x="{x1:.1f}" y="{y}" width="{max(x2 - x1, 2.0):.1f}"'
        f' height="{height}"><title>{escape(tip)}</title></rect>'
    )


def _task_bars(report: RunReport, axis: Axis, end: str) -> dict[str, list[str]]:
    bars: dict[str, list[str]] = {}
    for span in report.attempts():
        tip = f"{span.task_id} attempt {span.attempt}: {span.outcome}"
        tip += f", {fmt_duration(span.duration_seconds)}"
        stop = span.ended_at or end
        css = f"attempt state-{span.outcome}"
        bars.setdefault(span.task_id, []).append(_bar(axis, span.started_at, stop, 0, 12, css, tip))
    for e in report.inspection.effects:
        if e.requested_at and e.started_at:
            tip = f"{e.operation} {e.effect_id[:12]} waited (approval/queue)"
            wait = _bar(axis, e.requested_at, e.started_at, 14, 6, "wait", tip)
            bars.setdefault(e.task_id, []).append(wait)
        begun = e.started_at or e.requested_at
        if begun:
            tip = f"effect {e.operation} {e.effect_id[:12]}: {e.status}"
            css = f"effect status-{e.status}"
            bar = _bar(axis, begun, e.completed_at or end, 14, 6, css, tip)
            bars.setdefault(e.task_id, []).append(bar)
    return bars


def _ticks(axis: Axis, height: int) -> list[str]:
    found = []
    for i in range(5):
        x = LABEL_W + PLOT_W * i / 4
        label = fmt_duration(axis.span * i / 4)
        found.append(
            f'<line class="tick" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 14}"/>'
            f'<text class="sub" x="{x:.1f}" y="{height - 2}" text-anchor="middle">+{label}</text>'
        )
    return found


def timeline_svg(report: RunReport) -> str:
    run = report.inspection.run
    stamps = [run.updated_at, *(e.completed_at for e in report.inspection.effects)]
    end = max((s for s in stamps if s), key=parse_ts)
    axis = Axis(run.created_at, end)
    bars = _task_bars(report, axis, end)
    order = [t.task_id for t in report.inspection.tasks if t.task_id in bars][:MAX_GRAPH_TASKS]
    if not order:
        return '<p class="muted">Nothing ran in this run (its tasks were copied or skipped).</p>'
    height = len(order) * ROW_H + 20
    rows = []
    for i, task_id in enumerate(order):
        label = task_id if len(task_id) <= 24 else task_id[:23] + "…"
        rows.append(
            f'<g transform="translate(0,{i * ROW_H + 2})" data-task-id="{escape(task_id)}">'
            f'<text class="id" x="0" y="12">{escape(label)}</text>{"".join(bars[task_id])}</g>'
        )
    width = LABEL_W + PLOT_W + 30
    return (
        f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}"'
        f' height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="timeline">'
        f"{''.join(_ticks(axis, height))}{''.join(rows)}</svg>"
    )
