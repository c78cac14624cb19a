"""How a ``WorkerPool.execute`` waits: its reply slot, the one timer behind every call's
hung-worker deadline, and the replies a call gets when no worker answers it.

Invariants:
- a ``PendingReply`` is resolved at most once; waking its caller is a bare reschedule of the
  parked task (no ``Event``), for its answer (``resolve``) or to take over reading
  (``nudge``);
- every pending call has a deadline (its effect's timeout plus the pool's grace, from when the
  call was recorded); ``HangWatch`` is asleep until the earliest deadline it was told of, never
  later, then asks its owner to lose the workers that are overdue and sleeps until the next
  deadline still pending. One timer per pool instead of a cancel scope per call: a call costs a
  comparison, and the timer wakes about once per effect timeout while effects run.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

import trio

from agentctl.errors import RunFailedError
from agentctl.mailbox.messages import (
    Failure,
    RemoteHandle,
    Result,
    StreamFragment,
    WireError,
    failure_from_error,
)

WORKER_LOST = "WorkerLost"

# Persists one fragment of a streaming effect; raises AgentctlError when it cannot.
FragmentSink = Callable[[StreamFragment], Awaitable[None]]
# Persists a worker's mid-effect ``RemoteHandle`` durably; raises AgentctlError if it cannot.
HandleSink = Callable[[RemoteHandle], Awaitable[None]]
# Takes a worker's answer to a cancelled call (``WorkerPool.execute``'s ``on_cut``).
CutSink = Callable[[Result | Failure], None]


def lost_failure(effect_id: str, pid: int, reason: str) -> Failure:
    error = WireError(type=WORKER_LOST, message=f"worker {pid} was lost: {reason}")
    return Failure(effect_id=effect_id, error=error, uncertain=True)


def unsent_failure(effect_id: str, reason: str) -> Failure:
    """The effect reached no worker (each one tried had died before it): it did not run."""
    err = RunFailedError(f"no worker could take the effect: {reason}", retryable=True)
    return failure_from_error(effect_id, err.to_wire())


def oversized_failure(effect_id: str, reason: str) -> Failure:
    """The effect's request is too large for one frame: it reached no worker, and trying
    again sends the same request (not retryable)."""
    err = RunFailedError(f"effect request too large to send to a worker: {reason}")
    return failure_from_error(effect_id, err.to_wire())


class PendingReply:
    """One ``execute``'s slot: its reply once known, its sinks, its deadline, and its task
    while it waits."""

    __slots__ = ("_task", "deadline", "limit", "on_fragment", "on_handle", "value")

    def __init__(
        self, on_fragment: FragmentSink | None, on_handle: HandleSink | None, limit: float
    ) -> None:
        self.value: Result | Failure | None = None
        self.on_fragment = on_fragment
        self.on_handle = on_handle
        self.limit = limit  # seconds the worker has to answer, once the call is recorded
        self.deadline = math.inf
        self._task: trio.lowlevel.Task | None = None

    def resolve(self, value: Result | Failure) -> None:
        if self.value is None:
            self.value = value
            self.nudge()

    def nudge(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    async def park(self) -> None:
        """Wait until resolved or nudged (or cancelled)."""
        self._task = trio.lowlevel.current_task()

        def abort(_: object) -> trio.lowlevel.Abort:
            self._task = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)


class HangWatch:
    """The pool's one timer: ``expire(now)`` runs at or after every deadline it was told of.

    ``expire`` loses the overdue workers and returns the earliest deadline still pending
    (``math.inf`` for none); it must not await, so no call is recorded while it looks.
    """

    def __init__(self, expire: Callable[[float], float]) -> None:
        self._expire = expire
        self._next = math.inf
        self._scope = trio.CancelScope()
        self._clock: trio.abc.Clock | None = None  # the run's, once the timer started

    def expect(self, reply: PendingReply, nursery: trio.Nursery) -> None:
        """Give ``reply`` its deadline and make sure the timer wakes by then."""
        # The run's clock, asked directly: ``trio.current_time()`` is three Python calls
        # deep, and this runs once per call. (The pool, so its timer, lives in one run.)
        clock = self._clock
        if clock is None:
            clock = self._clock = trio.lowlevel.current_clock()
            nursery.start_soon(self._run)
        reply.deadline = deadline = clock.current_time() + reply.limit
        if deadline < self._next:  # else the timer wakes earlier anyway (the usual case)
            self._next = self._scope.deadline = deadline

    async def _run(self) -> None:
        while True:
            with self._scope:
                await trio.sleep_forever()
            self._next = self._expire(trio.current_time())
            self._scope = trio.CancelScope(deadline=self._next)
