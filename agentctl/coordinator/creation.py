"""What creating or re-entering a run needs besides the ledger: who owns it, which plan it runs.

Kept apart from ``service`` so the modules that create runs (``service``, ``recovery``,
``lineage``) share it without importing one another.

Invariants:
- a run's owner is this process, identified by pid and process start time (a reused pid with
  another start time is not the owner);
- the plan stored with a run is ``core.compiler.stored``'s exact JSON form; loading it gives
  back the plan the run was created with, and nothing is compiled unless the run predates
  schema v4 (no stored plan), in which case its stored workflow is compiled as before.
"""

from __future__ import annotations

import functools
import json
import os

from agentctl.coordinator.clock import Clock
from agentctl.core.compiler import compile_workflow
from agentctl.core.compiler.stored import (
    plan_from_stored,
    plan_to_stored_pieces,
    plan_to_stored_text,
)
from agentctl.core.plan import Plan
from agentctl.ledger import PlanText
from agentctl.ledger.model import Owner
from agentctl.ledger.owners import process_start_time
from agentctl.ledger.runs import RunRecord


def new_run_ids(clock: Clock, trace_id: str | None = None) -> tuple[str, str]:
    """A created run's id and its trace id (``trace_id``, the one the invocation minted
    already, else a new one). Every created run is a ``run-`` — repair, retry and compensation
    runs too: spec/cli.md §2's id kinds have no other for them (their mode says what they are);
    only replay and fork runs have kinds of their own (``lineage``)."""
    return clock.new_id("run"), trace_id or clock.new_id("trace")


def owner_identity() -> Owner:
    """This process as a lease owner (pid + start time, so a reused pid is not the owner)."""
    pid = os.getpid()
    return Owner(pid, process_start_time(pid))


def stored_plan_text(plan: Plan) -> str:
    """The compiled plan as the JSON text stored with a run."""
    return plan_to_stored_text(plan)


def stored_plan(plan: Plan) -> PlanText:
    """``stored_plan_text`` as pieces made while the ledger stores them: a new run's plan text
    is never held whole (6.5 MB at 10,000 tasks, at the peak of the run's creation)."""
    return PlanText(functools.partial(plan_to_stored_pieces, plan))


def load_plan(run: RunRecord) -> Plan:
    """The plan a run was created with.

    A run created before schema v4 has no stored plan: its stored workflow is compiled again
    (the same document compiles to the same plan, so its digests still match the run's).
    """
    if run.compiled_plan_json is None:
        return compile_workflow(run.workflow)
    return plan_from_stored(json.loads(run.compiled_plan_json))
