"""A real worker subprocess on a socketpair, for tests that drive one frame by frame."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from agentctl.mailbox import (
    Execute,
    Failure,
    FrameChannel,
    Hello,
    Result,
    StreamAck,
    StreamFragment,
)


class Worker:
    def __init__(self, proc: trio.Process, channel: FrameChannel) -> None:
        self.proc = proc
        self.channel = channel
        self.fragments: list[StreamFragment] = []  # every fragment acknowledged, in order

    async def call(self, msg: Execute) -> Result | Failure:
        """Send ``msg`` and wait for its reply, acknowledging stream fragments on the way as
        the coordinator does (the worker waits for each acknowledgement)."""
        await self.channel.send(msg)
        while True:
            reply = await self.channel.receive()
            if not isinstance(reply, StreamFragment):
                break
            self.fragments.append(reply)
            await self.channel.send(StreamAck(effect_id=reply.effect_id, index=reply.index))
        assert isinstance(reply, Result | Failure)
        return reply


@asynccontextmanager
async def open_worker(env: dict[str, str] | None = None) -> AsyncIterator[Worker]:
    """``python -m agentctl.workers`` on a socketpair; ``env`` is added to ours."""
    parent, child = socket.socketpair()
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "agentctl.workers", "--fd", str(child.fileno())],
        pass_fds=(child.fileno(),),
        env={**os.environ, **(env or {})},
    )
    child.close()
    channel = FrameChannel(trio.SocketStream(trio.socket.from_stdlib_socket(parent)))
    try:
        hello = await channel.receive()
        assert isinstance(hello, Hello) and hello.pid == proc.pid
        yield Worker(proc, channel)
    finally:
        await channel.aclose()
        with trio.move_on_after(10):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
