"""When the store's inline short transactions yield to the scheduler: at least every
``YIELD_EVERY_S``, counted afresh from the drive's last real wait (``Store.waited``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from agentctl.coordinator import store as store_module
from agentctl.coordinator.store import Store
from agentctl.ledger.opening import open_ledger


class _Steps(trio.abc.Instrument):
    """Counts the steps one task takes: a step ends where the task yields to the scheduler."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.ended = 0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.ended += 1


async def _yielded_during(store: Store) -> bool:
    """Whether one inline call gave the scheduler a pass before it returned."""
    steps = _Steps(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(steps)
    try:
        await store._run_short(lambda: None)
    finally:
        trio.lowlevel.remove_instrument(steps)
    return steps.ended > 0


@pytest.fixture(autouse=True)
def _long_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    # An interval no loaded machine runs past between two calls of one test.
    monkeypatch.setattr(store_module, "YIELD_EVERY_S", 3600.0)


async def test_an_inline_call_yields_once_the_interval_is_over(tmp_path: Path) -> None:
    with open_ledger(str(tmp_path / "runtime.db")) as ledger:
        store = Store(ledger)
        assert await _yielded_during(store)  # a fresh store's interval is over at once
        assert not await _yielded_during(store)  # within the interval: no scheduler pass


async def test_after_a_real_wait_the_next_call_does_not_yield_again(tmp_path: Path) -> None:
    with open_ledger(str(tmp_path / "runtime.db")) as ledger:
        store = Store(ledger)
        store.waited()  # e.g. a lone effect parked until its worker's reply
        assert not await _yielded_during(store)


SHELL_CHAIN = """
apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: shell-pair}
spec:
  policy: {approval: never, processAllowlist: ["true"]}
  actions:
    t: {kind: builtin.shell.exec, command: /bin/true}
  tasks:
    - {id: a, uses: action:t}
    - {id: b, uses: action:t, needs: [a]}
"""


def test_a_drive_reports_each_lone_worker_effect_s_wait_to_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real coordinator and a real worker: each of a chain's worker effects waits alone
    for its reply, and the drive tells its store so (two shell steps: two reports)."""
    from registry_helpers import start_text_run

    reports: list[Store] = []
    real = Store.waited

    def counted(self: Store) -> None:
        reports.append(self)
        real(self)

    monkeypatch.setattr(Store, "waited", counted)
    outcome = start_text_run(tmp_path, SHELL_CHAIN)
    assert outcome.state == "succeeded"
    assert len(reports) == 2
