"""Effect-free recovery planning: retry, repair and compensation (spec/cli.md §5).

The coordinator snapshots a terminal source run into ``SourceRun`` values and asks these pure
planners what a new run would reuse, execute or refuse; it executes the answer. A task that
an applied reconciliation completed after its run ended enters the snapshot as the succeeded
boundary it makes (``settle_applied``). Nothing here
performs I/O: artifact integrity is asked through the caller's ``artifact_ok`` probe.
"""

from __future__ import annotations

from agentctl.core.contracts import output_contract_fingerprint
from agentctl.core.recovery.compensation import (
    COMPENSATION_PLAN_API,
    CompensationPlan,
    CompensationStep,
    compensates_automatically,
    compensation_document,
    compensation_task_id,
    plan_compensation,
    step_bindings,
)
from agentctl.core.recovery.model import (
    AppliedResult,
    Block,
    OpenInverse,
    SourceEffect,
    SourceRun,
    SourceTask,
    effective_outcome,
)
from agentctl.core.recovery.planner import plan_repair, plan_retry, rebuild_memory
from agentctl.core.recovery.plans import REPAIR_PLAN_API, RETRY_PLAN_API, RecoveryPlan
from agentctl.core.recovery.settled import settle_applied

__all__ = [
    "COMPENSATION_PLAN_API",
    "REPAIR_PLAN_API",
    "RETRY_PLAN_API",
    "AppliedResult",
    "Block",
    "CompensationPlan",
    "CompensationStep",
    "OpenInverse",
    "RecoveryPlan",
    "SourceEffect",
    "SourceRun",
    "SourceTask",
    "compensates_automatically",
    "compensation_document",
    "compensation_task_id",
    "effective_outcome",
    "output_contract_fingerprint",
    "plan_compensation",
    "plan_repair",
    "plan_retry",
    "rebuild_memory",
    "settle_applied",
    "step_bindings",
]
