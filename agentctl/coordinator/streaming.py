"""The coordinator's end of durable streaming: keep each fragment, then let the worker go on.

A streaming model call's worker sends every delta as a ``StreamFragment`` and waits; the pool
hands it to this call's ``FragmentKeeper``, which redacts it, has the ledger bound and append
it as a stream event, tells the live listener (``--output jsonl``) and returns — only then is
the fragment acknowledged and the worker reads more of the answer.

Invariants:
- a fragment is persisted before it is acknowledged and before anyone is shown it, so what a
  user saw live is always in ``inspect``'s ``streamEvents``;
- resolved secret values never reach the ledger or the listener (they are redacted first);
- the listener is called in order, once per persisted event; events past the attempt's cap
  are acknowledged but neither stored nor shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.store import Store
from agentctl.core.redact import Redactor
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.ledger.streams import NewStreamEvent, StreamEventRecord

if TYPE_CHECKING:  # the wire comes with the pool, which a pure run never opens
    from agentctl.mailbox.messages import StreamFragment

StreamListener = Callable[[StreamEventRecord], None]


@dataclass(frozen=True)
class FragmentKeeper:
    """The fragment sink of one streaming model effect (see ``WorkerPool.execute``)."""

    store: Store
    clock: Clock
    run_id: str
    task_id: str
    attempt: int
    effect_id: str
    redactor: Redactor
    listener: StreamListener | None = None

    async def __call__(self, fragment: StreamFragment) -> None:
        event = NewStreamEvent(
            run_id=self.run_id,
            task_id=self.task_id,
            attempt=self.attempt,
            effect_id=self.effect_id,
            event_type=f"{fragment.kind}.delta",
            text=self.redactor.redact_text(fragment.text),
            provider_sequence=fragment.provider_sequence,
            now=self.clock.now(),
        )
        record = await self.store.append_stream_event(event)
        crash_point(CrashPoint.STREAM_AFTER_EVENT)
        if record is not None and self.listener is not None:
            self.listener(record)
