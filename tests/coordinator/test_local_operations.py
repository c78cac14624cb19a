"""Every operation the registry places in the coordinator has a coordinator-side executor.

Registry entries placed ``coordinator`` (working and long-term memory) are executed by
``agentctl.coordinator.local``; an entry without an executor would fail only when a run
reaches it, and an executor without an entry is dead code. Both fail here.
"""

from __future__ import annotations

import inspect

from agentctl.coordinator.local import LOCAL_OPERATIONS
from agentctl.core import registry


def _coordinator_operations() -> set[str]:
    return {
        op.effect_operation
        for op in registry.entries()
        if op.placement == "coordinator" and op.runnable
    }


def test_every_coordinator_entry_has_a_local_executor() -> None:
    assert _coordinator_operations() <= set(LOCAL_OPERATIONS)


def test_every_local_executor_has_an_entry() -> None:
    assert set(LOCAL_OPERATIONS) <= _coordinator_operations()


def test_local_executors_are_coroutines_of_request_and_host() -> None:
    for name, local in LOCAL_OPERATIONS.items():
        assert inspect.iscoroutinefunction(local.execute), name
        assert list(inspect.signature(local.execute).parameters) == ["request", "host"], name
