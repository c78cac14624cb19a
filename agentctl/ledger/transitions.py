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
    RunMode,
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
# What a stored row may hold; anything else is refused on read (``rows.checked_name``).
TASK_STATE_NAMES = frozenset(TASK_PREDECESSORS)
RUN_STATE_NAMES = frozenset(RUN_PREDECESSORS)
RUN_MODE_NAMES = frozenset(str(mode) for mode in RunMode)

__all__ = [
    "RUN_MODE_NAMES",
    "RUN_PREDECESSORS",
    "RUN_STATE_NAMES",
    "TASK_PREDECESSORS",
    "TASK_STATE_NAMES",
    "check_run_transition",
    "check_task_transition",
]
