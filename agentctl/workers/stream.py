"""The awaited sink a streaming executor hands each fragment of a model answer to.

``serve.py`` binds a ``SinkSource`` per running effect (a context variable, so an executor
finds its own with ``current_sink()``, made on that first call: an effect that streams nothing
costs no sink); ``emit`` sends a ``StreamFragment`` to the coordinator
and returns only when the coordinator's ``StreamAck`` says it is persisted. ``Fragments`` is
what a streaming executor (the fake provider, the HTTP adapters) keeps of its deltas for the
answer itself: each emitted first, at most ``MAX_FRAGMENTS`` kept, the rest counted.

Invariants:
- an executor calls ``emit`` before it reads more of the provider's answer, so a fragment is
  durable (or refused) before the next one is read: the stream is paced by the ledger;
- at most one fragment per effect is in flight; indexes count 0, 1, 2, … per effect;
- a refused fragment, or a lost coordinator, fails the call as uncertain (``UncertainEffect``):
  the request was already sent, so it may have happened.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

import trio

from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import ProviderError
from agentctl.mailbox.frames import FrameChannel, ProtocolError
from agentctl.mailbox.messages import (
    MAX_FRAGMENT_CHARS,
    FragmentKind,
    StreamAck,
    StreamFragment,
)
from agentctl.workers.executors import UncertainEffect


class StreamSink:
    """One effect's way to the coordinator for its stream fragments."""

    def __init__(self, channel: FrameChannel, effect_id: str) -> None:
        self._channel = channel
        self._effect_id = effect_id
        self._next = 0
        self._waiting: trio.Event | None = None
        self._ack: StreamAck | None = None

    async def emit(
        self, kind: FragmentKind, text: str, provider_sequence: int | None = None
    ) -> None:
        """Send one delta and wait until the coordinator persisted it (a delta longer than one
        frame may carry goes as several fragments, each acknowledged before the next)."""
        for start in range(0, max(len(text), 1), MAX_FRAGMENT_CHARS):
            await self._emit_one(kind, text[start : start + MAX_FRAGMENT_CHARS], provider_sequence)

    async def _emit_one(self, kind: FragmentKind, text: str, provider_sequence: int | None) -> None:
        fragment = StreamFragment(
            effect_id=self._effect_id,
            index=self._next,
            kind=kind,
            text=text,
            provider_sequence=provider_sequence,
        )
        self._waiting, self._ack = trio.Event(), None
        try:
            await self._channel.send(fragment)
        except ProtocolError as exc:
            raise _lost(f"the coordinator is gone ({exc.message})") from None
        await self._waiting.wait()
        ack, self._waiting = self._ack, None
        if ack is None or not ack.accepted:
            reason = ack.error if ack is not None else "no acknowledgement"
            raise _lost(f"stream fragment {self._next} was not persisted: {reason}")
        self._next += 1

    def acknowledge_nowait(self, ack: StreamAck) -> None:
        """The coordinator's answer for the fragment in flight (others are ignored)."""
        if self._waiting is not None and ack.index == self._next:
            self._ack = ack
            self._waiting.set()


def _lost(message: str) -> UncertainEffect:
    return UncertainEffect(ProviderError(f"streamed answer interrupted: {message}"))


class SinkSource(Protocol):
    """Makes (once) and gives the sink of one running effect."""

    def sink(self) -> StreamSink: ...


# Set by ``serve.py`` for the rest of the effect's trio task, before each effect runs (effects
# answered at once may run one after another in one reader task, each binding its own).
CURRENT_SINK_SOURCE: ContextVar[SinkSource | None] = ContextVar(
    "agentctl_stream_sink", default=None
)


def current_sink() -> StreamSink | None:
    """The sink of the effect running in this task, if the worker bound one."""
    source = CURRENT_SINK_SOURCE.get()
    return None if source is None else source.sink()


MAX_FRAGMENTS = 1024  # a stream longer than this keeps its text, not every delta


class Fragments:
    """The deltas of one streamed answer, in order, bounded to ``limit`` entries.

    Each delta first goes through the effect's stream sink (when the worker bound one), which
    returns only once the coordinator persisted it: call ``add`` before reading further.
    """

    def __init__(self, limit: int = MAX_FRAGMENTS) -> None:
        self.limit = limit
        self.items: list[JsonObject] = []
        self.dropped = 0
        self.sink = current_sink()

    async def add(
        self, kind: FragmentKind, text: str, provider_sequence: int | None = None
    ) -> None:
        if not text:
            return
        if self.sink is not None:
            await self.sink.emit(kind, text, provider_sequence)
        if len(self.items) >= self.limit:
            self.dropped += 1  # the final text still carries it; only the event is dropped
            return
        self.items.append({"index": len(self.items), "kind": kind, "text": text})
