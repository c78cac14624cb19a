"""What an executor leaves to close after its effect's reply: each closer runs once, in order,
and one that fails does not keep the others from running."""

from __future__ import annotations

import os

import pytest

from agentctl.workers.executors import Dispatch


def test_a_failing_close_neither_skips_the_rest_nor_escapes() -> None:
    read_end, write_end = os.pipe()
    calls: list[str] = []

    def gone() -> None:
        calls.append("gone")
        os.close(read_end)
        os.close(read_end)  # already closed: EBADF, as a descriptor closed twice would be

    def pipe() -> None:
        calls.append("pipe")
        os.close(write_end)

    dispatch = Dispatch()
    dispatch.close_after_reply(gone)
    dispatch.close_after_reply(pipe)
    dispatch.run_closers()
    dispatch.run_closers()  # once only
    assert calls == ["gone", "pipe"]
    with pytest.raises(OSError):
        os.fstat(write_end)  # the second closer ran
