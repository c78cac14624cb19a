"""The mid-effect door from an executor to the coordinator: persist a remote handle, then go on.

An executor that starts remote work with an identity of its own (an A2A task id) calls
``persist_remote_handle`` as soon as it knows it. The worker sends a ``RemoteHandle`` frame and
waits for the coordinator's ``RemoteHandleAck``, which comes only after the handle committed.

Invariants:
- an executor continues past ``persist_remote_handle`` only once the handle is durable; if the
  coordinator could not commit it, or the link is gone, it raises ``UncertainEffect`` (the
  remote work exists but nothing durable says where);
- one ``HandleLink`` per worker connection, shared by its concurrent effects and keyed by
  effect id; executors find it through a context variable set for the worker's tasks, so the
  executor signature stays ``(Execute) -> ExecOutcome``.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

import trio

from agentctl.errors import AgentctlError
from agentctl.mailbox.frames import FrameChannel, ProtocolError
from agentctl.mailbox.messages import RemoteHandle, RemoteHandleAck
from agentctl.workers.executors import UncertainEffect


@dataclass
class _Waiting:
    """An effect waiting for the coordinator to acknowledge its remote handle."""

    event: trio.Event = field(default_factory=trio.Event)
    ack: RemoteHandleAck | None = None


class HandleLink:
    """Sends handles over one worker channel and matches the coordinator's acknowledgements."""

    def __init__(self, channel: FrameChannel) -> None:
        self._channel = channel
        self._waiting: dict[str, _Waiting] = {}

    async def persist(self, handle: RemoteHandle) -> None:
        if handle.effect_id in self._waiting:
            raise AgentctlError(f"effect {handle.effect_id} already awaits a handle ack")
        waiting = self._waiting[handle.effect_id] = _Waiting()
        try:
            await self._channel.send(handle)
            await waiting.event.wait()
        except ProtocolError as exc:
            raise _unpersisted(handle, f"the coordinator is gone ({exc.message})") from exc
        finally:
            self._waiting.pop(handle.effect_id, None)
        ack = waiting.ack
        if ack is None or not ack.persisted:
            raise _unpersisted(handle, ack.error if ack is not None else None)

    def acknowledge(self, ack: RemoteHandleAck) -> None:
        """Wake the effect waiting for ``ack`` (an ack nobody waits for is dropped)."""
        waiting = self._waiting.get(ack.effect_id)
        if waiting is not None:
            waiting.ack = ack
            waiting.event.set()


def _unpersisted(handle: RemoteHandle, why: str | None) -> UncertainEffect:
    return UncertainEffect(
        AgentctlError(
            f"remote task {handle.remote_task_id} of peer {handle.peer} was started but could "
            f"not be recorded: {why or 'no reason given'}"
        )
    )


CURRENT_LINK: ContextVar[HandleLink | None] = ContextVar("agentctl_handle_link", default=None)


async def persist_remote_handle(handle: RemoteHandle) -> None:
    """Make ``handle`` durable through the coordinator before the executor goes on."""
    link = CURRENT_LINK.get()
    if link is None:
        raise _unpersisted(handle, "this executor runs outside a worker connection")
    await link.persist(handle)
