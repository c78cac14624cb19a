"""A SIGINT that Python wrapped in another exception is still an interrupt (exit 130).

Python 3.11 turns a KeyboardInterrupt raised inside a descriptor's ``__set_name__`` — which
happens when the signal lands while a lazily imported module defines its dataclasses or
models — into ``RuntimeError: Error calling __set_name__``; inside a drive, a trio nursery
then gathers it into an exception group. The CLI must report the interrupt, not an internal
error, whichever of the two wrappings it went through.
"""

from __future__ import annotations

import pytest
import trio

from agentctl.coordinator.launch import run_trio
from agentctl.errors import was_interrupted


class _Interrupting:
    def __set_name__(self, owner: type, name: str) -> None:
        raise KeyboardInterrupt


def _build_interrupted_class() -> None:
    type("Victim", (), {"field": _Interrupting()})


def _wrapped_by_python() -> BaseException:
    """The exception Python itself raises when a class body's descriptor is interrupted."""
    try:
        _build_interrupted_class()
    except BaseException as exc:  # exactly what Python raised, whatever its type
        return exc
    raise AssertionError("building the class did not fail")


def test_an_interrupt_wrapped_by_class_creation_is_an_interrupt() -> None:
    exc = _wrapped_by_python()
    if isinstance(exc, KeyboardInterrupt):
        pytest.skip("this Python re-raises the interrupt itself (3.12+)")
    assert isinstance(exc, RuntimeError)
    assert was_interrupted(exc)


async def _drive_with_a_task_that_imports() -> None:
    async def lazy_import() -> None:
        await trio.sleep(0)
        _build_interrupted_class()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lazy_import)
        nursery.start_soon(trio.sleep, 5)


def test_an_interrupt_wrapped_inside_a_nursery_leaves_run_trio_as_one() -> None:
    with pytest.raises(BaseException) as caught:
        run_trio(_drive_with_a_task_that_imports)
    assert was_interrupted(caught.value), repr(caught.value)


def test_an_ordinary_failure_is_not_an_interrupt() -> None:
    try:
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as exc:
        assert not was_interrupted(exc)
