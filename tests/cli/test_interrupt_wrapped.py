"""A SIGINT that Python wrapped in another exception is still an interrupt (exit 130).

Python 3.11 turns a KeyboardInterrupt raised inside a descriptor's ``__set_name__`` — which
happens when the signal lands while a lazily imported module defines its dataclasses or
models — into ``RuntimeError: Error calling __set_name__``; the CLI must report the interrupt,
not an internal error.
"""

from __future__ import annotations

import pytest

from agentctl.cli_main import was_interrupted


class _Interrupting:
    def __set_name__(self, owner: type, name: str) -> None:
        raise KeyboardInterrupt


def _wrapped_by_python() -> BaseException:
    """The exception Python itself raises when a class body's descriptor is interrupted."""
    try:
        type("Victim", (), {"field": _Interrupting()})
    except BaseException as exc:  # exactly what Python raised, whatever its type
        return exc
    raise AssertionError("building the class did not fail")


def test_an_interrupt_wrapped_by_class_creation_is_an_interrupt() -> None:
    exc = _wrapped_by_python()
    if isinstance(exc, KeyboardInterrupt):
        pytest.skip("this Python re-raises the interrupt itself (3.12+)")
    assert isinstance(exc, RuntimeError)
    assert was_interrupted(exc)


def test_an_ordinary_failure_is_not_an_interrupt() -> None:
    try:
        try:
            raise ValueError("inner")
        except ValueError as inner:
            raise RuntimeError("outer") from inner
    except RuntimeError as exc:
        assert not was_interrupted(exc)
