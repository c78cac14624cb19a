"""The drive's reference to its worker pool, which a run without worker-placed effects never opens.

A plan whose tasks name no worker-placed operation (``core.workload``: the registry says where
each kind runs, for actions, agents' model calls and agents' tools alike) is driven with no
pool at all, so neither the pool nor the wire it speaks (``mailbox``) is imported: a pure run
starts sooner. The driver's parts hold ``WorkerPool | None`` and reach it only through
``workers``.

Invariant: ``None`` is handed to a drive only for a plan with no worker-placed task, so
``workers`` finding none is a broken invariant; it fails the run with a message instead of
reaching a worker that was never started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentctl.errors import RunFailedError

if TYPE_CHECKING:
    from agentctl.coordinator.workerpool import WorkerPool


def workers(pool: WorkerPool | None) -> WorkerPool:
    """The pool an effect about to go to a worker uses."""
    if pool is None:
        raise RunFailedError("internal: a worker effect in a run whose plan has no worker tasks")
    return pool
