"""The human views of effects: ``effects list``, ``effects inspect`` and what ``effects
reconcile`` / ``continue-remote`` recorded.

The JSON envelope carries every field; these views answer the operator's questions at a glance —
which effects a run made, which are unresolved, what was concluded about each and by whom, and
the command that comes next. Invariants (those of ``cli_runview``): effect ids are printed whole,
on a line of their own, so they can be copied into the next command; a suggested command pastes
and runs as printed, with this invocation's ``--db``; prose is cut to the view's width.
"""

from __future__ import annotations

from collections.abc import Callable

from agentctl.cli_runview import (
    Painter,
    command,
    cut_line,
    fmt_duration,
    reconcile_commands,
    short_ts,
    span_seconds,
    view_width,
)
from agentctl.core.canonical import canonical_json
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list, as_object
from agentctl.render import Settings

_UNRESOLVED = ("started", "uncertain")
RESULT_CHARS = 300  # a longer result is cut here (`--output json` has it whole)


def _text(obj: JsonObject, key: str) -> str:
    value = obj.get(key)
    return "-" if value is None else str(value)


def _reconciliation_line(rec: JsonObject, width: int) -> str:
    who = f"{_text(rec, 'status')} by {_text(rec, 'actor')}"
    return "    " + cut_line(f"reconciled {who}: {_text(rec, 'reason')}", width - 4)


def _effect_block(
    effect: JsonObject, recs: list[JsonObject], painter: Painter, width: int
) -> list[str]:
    status = _text(effect, "status")
    took = fmt_duration(span_seconds(_str(effect, "startedAt"), _str(effect, "completedAt")))
    where = f"task {_text(effect, 'taskId')}  attempt {_text(effect, 'attempt')}"
    kind = f"{_text(effect, 'effectClass')}, risk {_text(effect, 'risk')}"
    what = f"{_text(effect, 'operation')} ({kind})"
    lines = [f"  {_text(effect, 'effectId')}"]
    lines.append("    " + cut_line(f"{where}  {what}", width - 4))
    confirmed = "confirmed" if effect.get("confirmed") else "not confirmed"
    lines.append(f"    {painter.state(status)}  {confirmed}  took {took}")
    if effect.get("remoteTaskId"):  # an A2A delegation's task: what continue-remote observes
        lines.append("    " + cut_line(f"remote task {_text(effect, 'remoteTaskId')}", width - 4))
    if effect.get("error"):
        lines.append("    " + cut_line(f"error: {_text(effect, 'error')}", width - 4))
    lines += [_reconciliation_line(r, width) for r in recs]
    return lines


def _str(obj: JsonObject, key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def _by_effect(reconciliations: JsonValue) -> dict[str, list[JsonObject]]:
    found: dict[str, list[JsonObject]] = {}
    for item in as_list(reconciliations):
        rec = as_object(item)
        found.setdefault(_text(rec, "effectId"), []).append(rec)
    return found


def _next_steps(
    effect: JsonObject, recs: list[JsonObject], db: str, width: int, needs: frozenset[str]
) -> list[str]:
    """How to settle an effect nobody has concluded about yet (none for a settled one);
    ``needs``: the effects whose reconciliation takes ``--approved``."""
    if _text(effect, "status") not in _UNRESOLVED or recs:
        return []
    short = _text(effect, "effectId")[:12]
    # A started effect may still be running under a live coordinator: only after a crash is
    # there something to settle (``inspect`` tells the two apart).
    when = " once nothing drives its run (a crash)," if effect.get("status") == "started" else ""
    lines = ["", f"  to settle {short}…{when} say what happened:"]
    if effect.get("remoteTaskId"):  # as ``inspect`` says: observe the remote task again first
        lines += command(
            "effects", "continue-remote", _text(effect, "effectId"), db=db, width=width
        )
    effect_id = _text(effect, "effectId")
    return lines + reconcile_commands(effect_id, db, width, approved=effect_id in needs)


def effect_list_view(
    data: JsonObject, db: str, needs: frozenset[str] = frozenset()
) -> Callable[[Settings], str]:
    """``effects list RUN``: one block per effect, its reconciliations under it; ``needs``:
    the effects whose reconciliation takes ``--approved``."""

    def human(settings: Settings) -> str:
        width, painter = view_width(), Painter(settings)
        effects = [as_object(e) for e in as_list(data.get("effects"))]
        recs = _by_effect(data.get("reconciliations"))
        scope = f"  task {data['taskId']}" if data.get("taskId") else ""
        lines = [f"run {_text(data, 'runId')}{scope}  {len(effects)} effect(s)"]
        for effect in effects:
            lines += [
                "",
                *_effect_block(effect, recs.get(_text(effect, "effectId"), []), painter, width),
            ]
        for effect in effects:
            found = recs.get(_text(effect, "effectId"), [])
            lines += _next_steps(effect, found, db, width, needs)
        return "\n".join(lines) + "\n"

    return human


def effect_inspection_view(
    data: JsonObject, db: str, needs: frozenset[str] = frozenset()
) -> Callable[[Settings], str]:
    """``effects inspect EFFECT``: the effect, its result, its reconciliation history;
    ``needs`` as for ``effect_list_view``."""

    def human(settings: Settings) -> str:
        width = view_width()
        effect = as_object(data.get("effect"))
        recs = [as_object(r) for r in as_list(data.get("reconciliations"))]
        lines = [f"effect of run {_text(effect, 'runId')}"]
        lines += _effect_block(effect, recs, Painter(settings), width)
        for key in ("requestedAt", "startedAt", "completedAt"):
            at = _str(effect, key)
            lines.append(f"    {key[:-2]:<10} {short_ts(at) if at else '-'}")
        if effect.get("result") is not None:
            shown = cut_line(canonical_json(effect["result"]), min(RESULT_CHARS, width * 4))
            lines.append("    result: " + shown)
        effective = as_object(data.get("effectiveReconciliation"))
        if effective:
            lines.append(f"    in effect: {_text(effective, 'reconciliationId')}")
        lines += _next_steps(effect, recs, db, width, needs)
        return "\n".join(lines) + "\n"

    return human


def reconciliation_view(data: JsonObject, db: str) -> Callable[[Settings], str]:
    """What ``effects reconcile`` / ``continue-remote`` appended, and that a resume follows."""

    def human(_settings: Settings) -> str:
        width = view_width()
        head = f"effect {_text(data, 'effectId')}"
        lines = [head, f"  reconciled {_text(data, 'status')}  ({_text(data, 'reconciliationId')})"]
        lines.append(
            "  " + cut_line(f"by {_text(data, 'actor')}: {_text(data, 'reason')}", width - 2)
        )
        if data.get("supersedesId"):
            lines.append(f"  supersedes {_text(data, 'supersedesId')}")
        if data.get("compensationEffectId"):
            lines.append(f"  compensated by effect {_text(data, 'compensationEffectId')}")
        if data.get("status") in ("applied", "not_applied"):
            # A run that has ended is not resumed: its recovery is a derived run.
            lines += ["", "  a paused or interrupted run carries on with it when resumed:"]
            lines += command("resume", _text(data, "runId"), db=db, width=width)
            lines.append("  (a run that has ended: retry, repair or compensate it instead)")
        return "\n".join(lines) + "\n"

    return human
