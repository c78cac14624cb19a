"""The human views of stored runs: ``inspect RUN`` and ``runs list``.

Plain text laid out by hand rather than rich tables: the views must fit 80 columns while every
identifier stays whole and every suggested command pastes and runs as printed (rich folds cells
mid-word and draws boxes around them), and plain text costs no import at start-up. Invariants:
- no line is wider than the width (80 unless stdout is a wider terminal), except a table row
  whose identifiers alone are wider: identifiers are never cut, prose cells end in ``…``;
- a suggested command is never cut: it continues across lines with `` \\``;
- ANSI colour only on state words and only when ``Settings.use_color(stdout)`` says so;
- every command shown is what resolves the item under it, with this invocation's ``--db``.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import textwrap
from collections.abc import Iterable, Sequence

from agentctl.clikit import db_words
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.states import TERMINAL_RUN_STATES
from agentctl.ledger.effects import EffectRecord
from agentctl.ledger.report import RunReport
from agentctl.ledger.rows import parse_ts
from agentctl.render import Settings, paint_state

WIDTH = 80
WIDE = 110  # from this width on, ``runs list`` also shows when each run was created
GAP = "  "
LABEL = 9  # width of the header's label column
MIN_CELL = 6  # a shrinkable cell keeps at least this many characters
ERROR_LINES = 4  # a longer task error is cut (JSON output and the HTML report have it all)
_ENDED = frozenset(str(s) for s in TERMINAL_RUN_STATES)


def view_width() -> int:
    """80 columns, or the terminal's width when stdout is a wider terminal."""
    if sys.stdout.isatty():
        return max(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)
    return WIDTH


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def span_seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (parse_ts(end) - parse_ts(start)).total_seconds()


def run_took(state: str, created: str | None, updated: str | None) -> str:
    """How long a run took, creation to its last update, once it has ended. A queued, running
    or paused run has not taken anything yet: its last update is only its latest transition
    (a running run's is its start, so the span read "0.0s" while it ran), so it reads "-"."""
    if state not in _ENDED:
        return "-"
    return fmt_duration(span_seconds(created, updated))


def short_ts(text: str) -> str:
    """``2026-12-01T14:10:15.355Z`` → ``2026-12-01 14:10:15Z`` (seconds suffice to read)."""
    return text[:19].replace("T", " ") + "Z"


class Painter:
    """Colours a state word when colour is on; pads before colouring so columns stay aligned."""

    def __init__(self, settings: Settings) -> None:
        self.on = settings.use_color(sys.stdout)

    def state(self, word: str, pad: int = 0) -> str:
        return paint_state(word, self.on, pad)


def cut_line(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` with ``…`` when longer."""
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= width else one_line[: max(width - 1, 0)] + "…"


def fit_widths(
    headers: Sequence[str], rows: Sequence[Sequence[str]], width: int, fixed: Iterable[int] = (0,)
) -> list[int]:
    """Natural column widths, the widest shrinkable one cut a character at a time until the
    row fits ``width``. ``fixed`` columns hold identifiers and are never cut (an id that does
    not fit makes the line run long rather than become uncopyable), and no column is cut
    narrower than its header, which is printed whole: the cells stay under their header."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    least = [max(MIN_CELL, len(h)) for h in headers]
    budget = width - len(GAP) * (len(headers) - 1) - 2
    keep = set(fixed)
    while sum(widths) > budget:
        free = [i for i in range(len(widths)) if i not in keep and widths[i] > least[i]]
        if not free:
            break
        widths[max(free, key=lambda i: widths[i])] -= 1
    return widths


def text_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    settings: Settings,
    state_col: int | None = None,
    fixed: Iterable[int] = (0,),
) -> list[str]:
    """Left-aligned columns, long cells cut with ``…``; the state column is coloured."""
    widths = fit_widths(headers, rows, view_width(), fixed)
    painter = Painter(settings)
    lines = ["  " + GAP.join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        cells = [cut_line(c, w).ljust(w) for c, w in zip(row, widths, strict=True)]
        if state_col is not None:
            cells[state_col] = painter.state(row[state_col].strip(), widths[state_col])
        lines.append("  " + GAP.join(cells).rstrip())
    return lines


def command(*words: str, db: str, width: int = WIDTH) -> list[str]:
    """A shell-ready command (``--db`` only when this invocation named another database),
    continued with `` \\`` across lines so that it fits ``width`` and still pastes as is.
    An option stays on the line of its value."""
    chunks: list[str] = []
    for word in ("agentctl", *words, *db_words(db)):
        quoted = shlex.quote(word)
        if chunks and chunks[-1].startswith("--") and " " not in chunks[-1]:
            chunks[-1] += " " + quoted  # every option here takes a value
        else:
            chunks.append(quoted)
    lines = ["    $ " + chunks[0]]
    for chunk in chunks[1:]:
        if len(lines[-1]) + len(chunk) + 3 > width:
            lines[-1] += " \\"
            lines.append("        " + chunk)
        else:
            lines[-1] += " " + chunk
    return lines


def reconcile_commands(effect_id: str, db: str, width: int, *, approved: bool) -> list[str]:
    """The two ways to settle an unresolved effect. ``applied`` names the result the task
    carries on with (the ledger refuses it without one), and both carry ``--approved`` when
    the run's policy gives the reconciliation only with it (``approved``), so the printed
    command runs once its placeholders are filled in."""
    verb = ("effects", "reconcile", effect_id, "--status")
    flag = ("--approved",) if approved else ()
    result = ("--result-file", "<result.json>")
    applied = command(*verb, "applied", "--reason", "<why>", *result, *flag, db=db, width=width)
    return applied + command(*verb, "not-applied", "--reason", "<why>", *flag, db=db, width=width)


def _lineage_lines(report: RunReport, width: int) -> list[str]:
    run = report.inspection.run
    found: list[str] = []
    # A retry/repair names its source as its parent too: say it once, as the source.
    if run.parent_run_id and run.parent_run_id != run.source_run_id:
        found.append(f"parent {run.parent_run_id}")
    if run.source_run_id:
        found.append(f"source {run.source_run_id}")
    found += _reuse_tokens(report, width)
    for child in report.children():
        line, what = f"child  {child.run_id}", f"({child.mode}, {child.state})"
        fits = LABEL + len(line) + 1 + len(what) <= width
        found += [f"{line} {what}"] if fits else [line, f"       {what}"]
    return found or ["(first of its lineage, nothing derived from it)"]


def _reuse_tokens(report: RunReport, width: int) -> list[str]:
    """A derived run's ``source=RUN reused=T,… executed=T,…``: the original's tokens, which
    its scripts grep; ``-`` for an empty list. Wrapped only between tokens, never inside one."""
    run = report.inspection.run
    source = run.source_run_id or run.parent_run_id
    if not source:
        return []
    tasks = report.inspection.tasks

    def named(disposition: str) -> str:
        return ",".join(t.task_id for t in tasks if t.disposition == disposition) or "-"

    text = f"source={source} reused={named('reused')} executed={named('executed')}"
    wrap = textwrap.TextWrapper(
        width - LABEL, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )
    return wrap.wrap(text)


def _budget_lines(report: RunReport, width: int) -> list[str]:
    """One line per limited dimension (use against limit), then what else was metered."""
    budget = report.inspection.budget
    usage = report.inspection.budget_usage()
    lines: list[str] = []
    for dim, limit in sorted(budget.limits.items()):
        used = usage.get(dim, 0)
        share = f"{100 * used // limit}%" if limit else "-"
        lines.append(f"{dim} {used} / {limit} ({share})")
    others = [f"{d} {v}" for d, v in sorted(usage.items()) if v and d not in budget.limits]
    if others:
        text = "no limit: " + ", ".join(others)
        lines += textwrap.wrap(text, width - LABEL, subsequent_indent="  ")
    if budget.exceeded:
        over = budget.exceeded
        lines.append(
            f"exceeded {over.get('dimension')} (limit {over.get('limit')},"
            f" attempted {over.get('attempted')})"
        )
    return lines or ["nothing metered"]


def _header(report: RunReport, painter: Painter, width: int) -> list[str]:
    run = report.inspection.run
    took = run_took(run.state, run.created_at, run.updated_at)
    rows: list[tuple[str, list[str]]] = [
        ("run", [f"{run.run_id}  {painter.state(run.state)}"]),
        ("mode", [f"{run.mode}   workflow {run.workflow_name}"]),
        ("lineage", _lineage_lines(report, width)),
        ("created", [f"{short_ts(run.created_at)}   updated {short_ts(run.updated_at)}"]),
        ("duration", [took + ("  (cancellation requested)" if run.cancellation_requested else "")]),
        ("budget", _budget_lines(report, width)),
    ]
    lines: list[str] = []
    for label, values in rows:
        for i, value in enumerate(values):
            lines.append((label if i == 0 else "").ljust(LABEL) + value)
    return lines


def _task_rows(report: RunReport) -> list[list[str]]:
    spans: dict[str, list[float | None]] = {}
    for span in report.attempts():
        spans.setdefault(span.task_id, []).append(span.duration_seconds)
    rows = []
    for task in report.inspection.tasks:
        took = spans.get(task.task_id, [])
        known = [s for s in took if s is not None]
        duration = fmt_duration(sum(known)) if known else "-"
        disposition = task.disposition or "-"
        rows.append([task.task_id, task.state, str(task.attempt), disposition, duration])
    return rows


def _effect_rows(report: RunReport) -> list[list[str]]:
    recs: dict[str, list[str]] = {}
    for rec in report.inspection.reconciliations:
        recs.setdefault(rec.effect_id, []).append(rec.status)
    rows = []
    for e in report.inspection.effects:
        took = fmt_duration(span_seconds(e.started_at, e.completed_at))
        reconciled = ", ".join(recs.get(e.effect_id, [])) or "-"
        rows.append([e.effect_id[:12], e.task_id, e.operation, e.status, took, reconciled])
    return rows


def _session_lines(report: RunReport, settings: Settings) -> list[str]:
    """Each agent attempt's provider session (none: no section, a run without agents)."""
    rows = []
    for ps in report.inspection.provider_sessions:
        tokens = f"{ps.usage.get('inputTokens', 0)}/{ps.usage.get('outputTokens', 0)}"
        where = f"{ps.provider} ({ps.model})" if ps.model else ps.provider
        rows.append([ps.task_id, str(ps.attempt), where, ps.status, str(ps.calls), tokens])
    if not rows:
        return []
    heads = ["task", "attempt", "provider", "status", "calls", "tokens in/out"]
    return ["", "provider sessions", *text_table(heads, rows, settings, 3, (0, 3))]


def _errors(report: RunReport, width: int) -> list[str]:
    failed = [t for t in report.inspection.tasks if t.error]
    if not failed:
        return []
    lines = ["", "errors"]
    for task in failed:
        text = " ".join(f"{task.task_id}: {task.error}".split())
        wrapped = textwrap.wrap(text, width - 4, subsequent_indent="  ", max_lines=ERROR_LINES)
        lines += ["  " + line for line in wrapped]
    return lines


def unresolved(report: RunReport) -> list[EffectRecord]:
    """Effects no operator has reconciled and nobody can know the outcome of: uncertain ones,
    and started ones when no live coordinator drives the run (resume would mark them
    uncertain and refuse). They block resume."""
    reconciled = {r.effect_id for r in report.inspection.reconciliations}
    unknown = ("uncertain",) if report.driven else ("started", "uncertain")
    return [
        e
        for e in report.inspection.effects
        if e.status in unknown and e.effect_id not in reconciled
    ]


def _remote(report: RunReport) -> set[str]:
    return {h.effect_id for h in report.inspection.remote_handles}


def attention(report: RunReport, db: str, width: int) -> list[str]:
    run = report.inspection.run
    lines: list[str] = []
    for a in report.inspection.approvals:
        what = f"  approval {a.approval_id}  task {a.task_id}"
        why = cut_line(f"{a.capability or a.tool or '-'} ({a.risk}): {a.reason or ''}", width - 4)
        lines += ["", what, "    " + why]
        for verb in ("approve", "reject"):
            lines += command(
                "approvals", verb, a.approval_id, "--reason", "<why>", db=db, width=width
            )
    remote = _remote(report)
    for e in unresolved(report):
        lines += ["", f"  {e.status} effect {e.effect_id}", f"    task {e.task_id}  {e.operation}"]
        if e.effect_id in remote:
            lines += command("effects", "continue-remote", e.effect_id, db=db, width=width)
        approved = e.effect_id in report.approvals_to_reconcile
        lines += reconcile_commands(e.effect_id, db, width, approved=approved)
    if not lines:
        return []
    if run.state == "paused" or (run.state == "running" and not report.driven):
        lines += ["", "  then", *command("resume", run.run_id, db=db, width=width)]
    return ["", "needs an operator (approve or reject; for effects, say what happened)", *lines]


def inspect_text(report: RunReport, db: str, settings: Settings) -> str:
    width = view_width()
    lines = _header(report, Painter(settings), width)
    task_heads = ["task", "state", "attempt", "disposition", "took"]
    lines += ["", "tasks", *text_table(task_heads, _task_rows(report), settings, 1, (0, 1))]
    lines += _errors(report, width)
    effects = _effect_rows(report)
    heads = ["effect", "task", "operation", "status", "took", "reconciled"]
    lines += ["", "effects"]
    lines += text_table(heads, effects, settings, 3, (0, 1, 3)) if effects else ["  (none)"]
    lines += _session_lines(report, settings)
    lines += attention(report, db, width)
    return "\n".join(lines) + "\n"


def runs_text(data: JsonObject, settings: Settings) -> str:
    """``runs list``: one line per run with how long it ran (created → last update, once it
    ended); the creation time only when the terminal is wide enough (JSON output always has
    it)."""
    runs = data.get("runs")
    entries = [r for r in runs if isinstance(r, dict)] if isinstance(runs, list) else []
    wide = view_width() >= WIDE
    rows = []
    for r in entries:
        created, updated = str(r.get("createdAt") or ""), str(r.get("updatedAt") or "")
        row = [str(r.get(k)) for k in ("runId", "state", "mode", "workflow")]
        row.append(run_took(str(r.get("state")), created, updated))
        rows.append([*row, short_ts(created)] if wide else row)
    if not rows:
        return "no runs\n"
    heads = ["run", "state", "mode", "workflow", "took", *(["created"] if wide else [])]
    return "\n".join(text_table(heads, rows, settings, 1, (0, 1, 2, 4))) + "\n"
