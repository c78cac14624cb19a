"""The executor registry: one operation name → one async function taking an ``Execute``.

Invariants:
- an executor returns an ``ExecOutcome`` or raises; an ``AgentctlError`` is a definitive
  failure (the effect did not happen, or failed visibly), ``UncertainEffect`` says it may have
  happened (timeout or cancellation after it started);
- modules are imported on first use, so a worker that only writes files never imports the
  container code.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from agentctl.errors import AgentctlError, ValidationError
from agentctl.mailbox.messages import Execute, WireModel


@dataclass(frozen=True)
class ExecOutcome:
    output: dict[str, Any]
    usage: dict[str, int] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)


class UncertainEffect(Exception):
    """Internal to workers: the effect may have happened; carries the error to report."""

    def __init__(self, error: AgentctlError) -> None:
        super().__init__(error.message)
        self.error = error


M = TypeVar("M", bound=WireModel)
Executor = Callable[[Execute], Awaitable[ExecOutcome]]

# operation → "module:function", resolved lazily.
_REGISTRY: dict[str, str] = {
    "builtin.read": "agentctl.workers.executors.files:execute_read",
    "builtin.write": "agentctl.workers.executors.files:execute_write",
    "builtin.shell.exec": "agentctl.workers.executors.shell:execute_shell",
    "container.preflight": "agentctl.workers.executors.shell:execute_preflight",
    "model.fake": "agentctl.workers.executors.models:execute_fake",
}


def operations() -> list[str]:
    return sorted(_REGISTRY)


def executor_for(operation: str) -> Executor:
    target = _REGISTRY.get(operation)
    if target is None:
        raise ValidationError(f"unsupported operation {operation!r} in a worker")
    module_name, func_name = target.split(":")
    func: Executor = getattr(importlib.import_module(module_name), func_name)
    return func


def parse_request(model: type[M], msg: Execute) -> M:
    """Validate ``msg.request`` as ``model``; a bad request is the sender's bug, not retryable."""
    try:
        return model.model_validate(msg.request)
    except pydantic.ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise ValidationError(f"invalid {msg.operation} request: {first}") from exc
