"""Predecessor sets for the guarded state updates, derived from ``agentctl.core.states``.

The legal-transition tables live in core; the ledger turns them around so each guarded
``UPDATE … WHERE state IN (predecessors)`` is a single statement, and falls back to the core
check only to explain a refused update.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from agentctl.core.states import (
    RUN_TRANSITIONS,
    TASK_TRANSITIONS,
    check_run_transition,
    check_task_transition,
)


def _predecessors(table: Mapping[StrEnum, frozenset[StrEnum]]) -> dict[str, tuple[str, ...]]:
    return {
        str(target): tuple(sorted(str(src) for src, nxt in table.items() if target in nxt))
        for target in table
    }


TASK_PREDECESSORS = _predecessors(TASK_TRANSITIONS)  # type: ignore[arg-type]
RUN_PREDECESSORS = _predecessors(RUN_TRANSITIONS)  # type: ignore[arg-type]

__all__ = [
    "RUN_PREDECESSORS",
    "TASK_PREDECESSORS",
    "check_run_transition",
    "check_task_transition",
]
