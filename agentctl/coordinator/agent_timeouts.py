"""The timeouts of an agent attempt's calls, and its task's deadline over all of them.

Three layers bound an agent task (spec/dsl.md §4, §5; spec/cli.md: `--timeout-seconds` is a
fourth, over the whole run):
- each model call: the agent's ``timeoutSeconds`` (per provider call, default 120,
  ``core.timeouts``);
- each tool call: the tool's own ``timeoutSeconds`` when it declares one, else its kind's
  (``Operation.call_timeout``: an MCP tool's server ``timeoutSeconds``), else the agent's;
  an MCP listing is bounded by its server's the same way;
- the attempt as a whole: the task's own ``timeoutSeconds`` when the task gives one
  (``PlannedTask.agent_timeout_seconds``), a deadline counted from when this drive of the
  attempt starts its loop. The runtime default (``runtime.defaultTimeoutSeconds``) does not
  bound an agent task: its turns are bounded by ``maxTurns`` and each call by its own timeout.

Invariants:
- a call is never started once the deadline has passed: the task fails then, with nothing in
  flight — a definite failure the task's ``retry`` does not repeat (spec/dsl.md §4: it repeats
  only retryable provider errors and local I/O errors; a timeout is neither);
- a call's timeout is min(its own, what is left to the deadline), so a call the deadline cuts
  short ends as any timed-out call does (a model call ``uncertain``, never resent), its error
  saying that the task's timeout cut it;
- the deadline is read on the coordinator's injected clock (``Clock.monotonic``); a resumed
  attempt (after an approval, a crash or a reconciliation) starts a new deadline with the
  drive that resumes it, reusing its confirmed calls as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agentctl.core.jsonvalue import JsonValue
from agentctl.core.operations import Operation, RunContext
from agentctl.errors import RunFailedError


@dataclass(frozen=True)
class CallLimit:
    """One call's timeout in seconds, and whether its task's deadline cut it short."""

    seconds: float
    cut: bool = False

    def explained(self, message: str) -> str:
        """``message`` (a timed-out call's error), saying why the call had so little time."""
        if not self.cut:
            return message
        return f"{message} (the task's timeoutSeconds left the call {self.seconds:.3f} s)"


def own_seconds(value: JsonValue) -> float | None:
    """A declared ``timeoutSeconds`` as seconds; None when none is declared."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def tool_seconds(
    entry: Operation,
    name: str,
    config: Mapping[str, JsonValue],
    run: RunContext,
    agent_seconds: float,
) -> float:
    """A tool call's (or an agent's internal call's) own timeout: the declared
    ``timeoutSeconds``, else the kind's, else the agent's."""
    declared = own_seconds(config.get("timeoutSeconds"))
    if declared is not None:
        return declared
    kinds = entry.call_timeout(name, config, run) if entry.call_timeout is not None else None
    return kinds if kinds is not None else agent_seconds


class TaskDeadline:
    """An agent attempt's deadline, from its task's own ``timeoutSeconds`` (None: no bound)."""

    def __init__(self, task_seconds: int | None, now: Callable[[], float]) -> None:
        self.task_seconds = task_seconds
        self.now = now
        self.at = None if task_seconds is None else now() + task_seconds

    def limit(self, seconds: float, what: str) -> CallLimit:
        """The timeout of the next call (``what``, for the error), whose own is ``seconds``;
        ``RunFailedError`` when the deadline has already passed (the call is not made)."""
        if self.at is None:
            return CallLimit(seconds)
        left = self.at - self.now()
        if left <= 0:
            raise RunFailedError(
                f"the task's timeoutSeconds ({self.task_seconds} s) passed before the agent's "
                f"next {what}; nothing was in flight"
            )
        return CallLimit(left, cut=True) if left < seconds else CallLimit(seconds)
