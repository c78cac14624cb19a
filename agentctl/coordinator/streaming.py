"""The coordinator's end of durable streaming: keep each fragment, then let the worker go on.

A streaming model call's worker sends every delta as a ``StreamFragment`` and waits; the pool
hands it to this call's ``FragmentKeeper``, which redacts it, has the ledger bound and append
it as a stream event, tells the live listener (``--output jsonl``) and returns — only then is
the fragment acknowledged and the worker reads more of the answer.

Invariants:
- a fragment is persisted before it is acknowledged and before anyone is shown it, so what a
  user saw live is always in ``inspect``'s ``streamEvents``;
- resolved secret values never reach the ledger or the listener (they are redacted first),
  even one split across fragments: a fragment's tail that may begin a secret is held back
  and kept with the next fragment of its kind, or by ``flush`` when the answer has ended;
- the listener is called in order, once per persisted event; events past the attempt's cap
  are acknowledged but neither stored nor shown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentctl.coordinator.clock import Clock
from agentctl.coordinator.store import Store
from agentctl.core.redact import PieceRedaction
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
    redaction: PieceRedaction
    listener: StreamListener | None = None

    async def __call__(self, fragment: StreamFragment) -> None:
        text = self.redaction.piece(fragment.kind, fragment.text)
        await self._keep(fragment.kind, text, fragment.provider_sequence)

    async def flush(self) -> None:
        """Keep what redaction held back at the stream's end (the start of no whole secret):
        one more event of each kind that has some."""
        for kind, text in self.redaction.flush().items():
            await self._keep(kind, text, None)

    async def _keep(self, kind: str, text: str, sequence: int | None) -> None:
        event = NewStreamEvent(
            run_id=self.run_id,
            task_id=self.task_id,
            attempt=self.attempt,
            effect_id=self.effect_id,
            event_type=f"{kind}.delta",
            text=text,
            provider_sequence=sequence,
            now=self.clock.now(),
        )
        record = await self.store.append_stream_event(event)
        crash_point(CrashPoint.STREAM_AFTER_EVENT)
        if record is not None and self.listener is not None:
            self.listener(record)
