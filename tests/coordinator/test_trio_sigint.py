"""Inside ``trio.run`` trio owns SIGINT: ``run_trio`` sets agentctl's recording handler aside
for the call (trio installs its own only over Python's default handler) and puts it back."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
import trio

from agentctl.coordinator.launch import run_trio
from agentctl.sigint import raise_interrupt


@pytest.fixture
def agentctl_handler() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, raise_interrupt)  # as entry.main leaves it
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


async def _handler_inside() -> object:
    await trio.lowlevel.checkpoint()
    return signal.getsignal(signal.SIGINT)


async def _fails() -> None:
    await trio.lowlevel.checkpoint()
    raise RuntimeError("boom")


def test_trio_installs_its_own_handler_inside_the_run(agentctl_handler: None) -> None:
    inside = run_trio(_handler_inside)
    assert inside is not raise_interrupt and inside is not signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is raise_interrupt


def test_agentctl_s_handler_is_back_after_a_run_that_failed(agentctl_handler: None) -> None:
    with pytest.raises(RuntimeError):
        run_trio(_fails)
    assert signal.getsignal(signal.SIGINT) is raise_interrupt
