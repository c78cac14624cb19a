"""Executors: one async function per worker-placed operation, taking an ``Execute``.

Which function runs an operation is the registry's business (``agentctl.core.registry``): the
coordinator names it in ``Execute.executor`` as ``"module:function"``; a message without one
is looked up by its operation in the worker's own registry.

Invariants:
- an executor returns an ``ExecOutcome`` or raises; an ``AgentctlError`` is a definitive
  failure (the effect did not happen, or failed visibly), ``UncertainEffect`` says it may have
  happened (timeout or cancellation after it started); ``FailedEffect`` is a definitive failure
  that carries evidence: protocol evidence (a remote peer answered with an error) or the
  output it still produced (a process that exited non-zero), recorded as the effect's result;
- protocol evidence (``agentctl.core.protocols``) travels with the outcome or the failure, so
  what was said on the wire is recorded even when the effect failed or was lost;
- modules are imported on first use, so a worker that only writes files never imports the
  container code;
- an executor that can tell whether its request left (a network call through a
  ``SendTracker``, an extension before its invocation) says so with ``watch_dispatch``; the
  worker's timeout then fails an effect whose request never left definitively (retryable),
  and a ``Cancel`` of one answers that it never left (``cancelled_unsent``: a stopped run's
  action ends ``cancelled``), leaving every other one uncertain; its error names whom the
  effect was talking to (the ``owner`` given there: a provider, an MCP server, an
  extension), as the executor's own do;
- what an executor closes only once the effect's reply is sent (``closing_after_reply``: a
  finished child's descriptors) the worker closes then, whatever became of the reply.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import pydantic

from agentctl.core.jsonvalue import JsonObject
from agentctl.core.protocols import ProtocolEvidence
from agentctl.errors import AgentctlError, ValidationError
from agentctl.mailbox.messages import Execute, Failure, WireModel, failure_from_error

if TYPE_CHECKING:  # the type only: an executor that spawns nothing does not load the sandbox
    from agentctl.sandbox.process import Defer


@dataclass(frozen=True)
class ExecOutcome:
    """What an executor returns: the output, usage, artifacts and protocol evidence."""

    output: JsonObject
    usage: dict[str, int] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)
    protocol: ProtocolEvidence | None = None


class UncertainEffect(Exception):
    """Internal to workers: the effect may have happened; carries the error to report."""

    def __init__(self, error: AgentctlError, protocol: ProtocolEvidence | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.protocol = protocol


class FailedEffect(Exception):
    """Internal to workers: a definitive failure that carries evidence for the record —
    protocol evidence (what a remote peer answered), or the output the effect still produced
    (a process that exited non-zero: its exit code and redacted output) and its usage."""

    def __init__(
        self,
        error: AgentctlError,
        protocol: ProtocolEvidence | None = None,
        *,
        outcome: ExecOutcome | None = None,
    ) -> None:
        super().__init__(error.message)
        self.error = error
        self.protocol = protocol
        self.outcome = outcome

    def reply(self, effect_id: str) -> Failure:
        """The definitive ``Failure`` that carries this failure's evidence."""
        done = self.outcome
        return failure_from_error(
            effect_id,
            self.error.to_wire(),
            protocol=self.protocol,
            output=None if done is None else done.output,
            usage=None if done is None else done.usage,
        )


class Dispatch:
    """What one effect's executor tells its worker: whether the effect's request may have
    left the worker, as far as it knows, and what to close once the reply is sent.

    Unknown (no executor report) counts as "may have left": only a positive report that
    nothing was sent lets a timeout fail the effect definitively.
    """

    def __init__(self) -> None:
        self._sent: Callable[[], bool] | None = None
        self.owner: str | None = None
        self.closers: list[Callable[[], None]] | None = None

    def watch(self, sent: Callable[[], bool] | None, owner: str) -> None:
        self._sent = sent
        self.owner = owner

    def close_after_reply(self, closer: Callable[[], None]) -> None:
        """Have ``closer`` called once the effect's reply is sent (``run_closers``)."""
        if self.closers is None:
            self.closers = [closer]
        else:
            self.closers.append(closer)

    def run_closers(self) -> None:
        """Call what ``close_after_reply`` was given (in that order), once. A close that fails
        (an ``OSError``) neither skips the others nor takes the worker down: the effect is
        answered already, and a descriptor that will not close has nothing left to lose."""
        closers, self.closers = self.closers, None
        for closer in closers or ():
            with contextlib.suppress(OSError):
                closer()

    @property
    def known_unsent(self) -> bool:
        return self._sent is not None and not self._sent()


CURRENT_DISPATCH: ContextVar[Dispatch | None] = ContextVar("agentctl_dispatch", default=None)


def watch_dispatch(sent: Callable[[], bool] | None, owner: str) -> None:
    """Report how to tell whether the running effect's request left (``sent()`` true once a
    request byte may have been written; None: it cannot tell) and whom it is talking to
    (``owner``, as its errors name it: ``provider openai``, ``MCP server notes``)."""
    dispatch = CURRENT_DISPATCH.get()
    if dispatch is not None:
        dispatch.watch(sent, owner)


def closing_after_reply() -> Defer | None:
    """Where the running effect's executor hands a closer of what may wait for the effect's
    reply (the worker calls it once the reply is sent: closing is then off the reply's path);
    None outside a worker's effect, where the caller closes at once."""
    dispatch = CURRENT_DISPATCH.get()
    return None if dispatch is None else dispatch.close_after_reply


M = TypeVar("M", bound=WireModel)
Executor = Callable[[Execute], Awaitable[ExecOutcome]]


def executor_for(msg: Execute) -> Executor:
    """The executor ``msg`` names, else the one the registry holds for its operation."""
    target = msg.executor
    if target is None:
        # Imported here: the coordinator names the executor, so a worker rarely needs the
        # whole registry (every built-in kind), and its start-up does not pay for it. (As
        # ``import … as``: ``from … import`` calls importlib's Python ``_handle_fromlist``.)
        import agentctl.core.registry as registry

        target = registry.executor_for_operation(msg.operation)
    if target is None:
        raise ValidationError(f"unsupported operation {msg.operation!r} in a worker")
    return _load(target, msg.operation)


_loaded: dict[str, Executor] = {}


def _load(target: str, operation: str) -> Executor:
    # Remembered by target: "module:function" always names the same function once imported
    # (a module is imported once), and the lookup is on every effect's path.
    func = _loaded.get(target)
    if func is not None:
        return func
    module_name, _, func_name = target.partition(":")
    try:
        loaded: Executor = getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as exc:
        raise ValidationError(f"executor {target!r} of {operation} cannot be loaded") from exc
    _loaded[target] = loaded
    return loaded


def parse_request(model: type[M], msg: Execute) -> M:
    """Validate ``msg.request`` as ``model``; a bad request is the sender's bug, not retryable."""
    try:
        return model.model_validate(msg.request)
    except pydantic.ValidationError as exc:
        first = str(exc).splitlines()[0]
        raise ValidationError(f"invalid {msg.operation} request: {first}") from exc
