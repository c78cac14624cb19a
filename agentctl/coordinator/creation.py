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

from agentctl.core.compiler import compile_workflow
from agentctl.core.compiler.stored import (
    plan_from_stored,
    plan_to_stored_pieces,
    plan_to_stored_text,
)
from agentctl.core.plan import Plan
from agentctl.ledger import PlanText
from agentctl.ledger.model import Owner
from agentctl.ledger.runs import RunRecord


def owner_identity() -> Owner:
    """This process as a lease owner (pid + start time, so a reused pid is not the owner)."""
    pid = os.getpid()
    return Owner(pid, _start_time(pid))


def _start_time(pid: int) -> float:
    """``psutil.Process(pid).create_time()``, read from /proc where there is one: importing
    psutil was ~5 ms of every run's start. The same figures by the same formula (the start
    in clock ticks since boot ÷ ticks per second + the boot time), so the lease checks,
    which read the owner's start with psutil, compare equal."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        with open("/proc/stat", "rb") as fh:
            boot = next(line for line in fh if line.startswith(b"btime")).split()[1]
        ticks = stat[stat.rfind(b")") + 2 :].split()[19]  # field 22, ``starttime``
        return float(ticks) / os.sysconf("SC_CLK_TCK") + float(boot)
    except (OSError, ValueError, IndexError, StopIteration):
        import psutil  # no procfs (macOS): psutil reads it its own way

        return psutil.Process(pid).create_time()


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
