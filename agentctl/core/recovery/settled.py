"""A source task that an applied reconciliation completed after its run had ended.

An operator may learn what an effect did only once its run stopped — ``effects
continue-remote`` observing a remote task to completion after ``--timeout-seconds`` cancelled
the run, or ``effects reconcile EFFECT --status applied --result-file …`` — and records the
effect ``applied`` with its result. A run still ``running`` resumes with that result
(``coordinator.execute.settle_recorded``); an ended one cannot, so retry and repair take the
task as the boundary resume would have committed: ``succeeded``, its output the recorded
result, the working-memory delta its operation writes, and the source plan's fingerprints.
The reuse rules (``checks.reuse_block``) then judge it like any succeeded task — the output
must still meet the contract, the definition must be unchanged — so a ``retry --failed``
reuses it and executes only what depends on it, and the effect is never repeated (executing
the task again would: ``checks.closure_effect_blocks`` refuses that until it is compensated).

Only an action task qualifies, and only when its latest attempt is exactly one effect: that
effect's result is the task's output, as resume delivers it. An agent's applied model or tool
call is one step of a loop whose output nothing recorded, so its task is left as it ended.

Invariants: pure — reads its arguments only and returns either ``task`` itself or a new
value (the recorded result is copied, never aliased).
"""

from __future__ import annotations

import copy
import dataclasses

from agentctl.core.canonical import v1_digest
from agentctl.core.contracts import output_contract_fingerprint
from agentctl.core.plan import PlannedTask
from agentctl.core.recovery.model import SourceTask

# A task that succeeded holds its own result; a skipped one never ran an effect.
_ENDED_WELL = frozenset({"succeeded", "skipped"})


def settle_applied(task: SourceTask, planned: PlannedTask | None) -> SourceTask:
    """``task`` as the succeeded boundary its applied reconciliation makes it, or unchanged.

    ``planned``: the task in the SOURCE run's plan (None when that plan cannot be read: the
    task is then left unchanged, since its fingerprints would be guesses)."""
    if planned is None or planned.kind != "action" or task.state in _ENDED_WELL:
        return task
    latest = [e for e in task.effects if e.attempt == task.attempt]
    if len(latest) != 1 or latest[0].reconciliation != "applied" or latest[0].applied is None:
        return task
    effect, applied = latest[0], latest[0].applied
    result = copy.deepcopy(applied.result)
    return dataclasses.replace(
        task,
        state="succeeded",
        output=result,
        definition_fingerprint=planned.definition_fingerprint or None,
        output_contract_fingerprint=output_contract_fingerprint(planned),
        output_digest=v1_digest(result),
        state_delta=copy.deepcopy(applied.state_delta),
        settled_by=effect.effect_id,
    )
