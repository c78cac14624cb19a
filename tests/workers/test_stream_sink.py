"""The worker's awaited stream sink, frame by frame against a real worker process.

A streaming model call sends one ``StreamFragment`` and then waits for its ``StreamAck``: the
next fragment (or the result) exists only after the coordinator acknowledged the one before.
"""

from __future__ import annotations

from agentctl.mailbox import Cancel, Execute, Failure, Result, StreamAck, StreamFragment
from tests.worker_process import open_worker


def _fake_stream(effect_id: str, text: str) -> Execute:
    request = {
        "provider": "sim",
        "model": "m",
        "messages": [{"role": "user", "content": "go"}],
        "tools": [],
        "maxOutputTokens": 16,
        "options": {"finalText": text},
        "stream": True,
        "callNumber": 1,
    }
    return Execute(
        effect_id=effect_id,
        run_id="run-1",
        task_id="t",
        attempt=1,
        operation="fake",
        request=request,
        timeout_seconds=30,
        executor="agentctl.workers.executors.models:execute_fake",
    )


async def test_nothing_follows_a_fragment_until_it_is_acknowledged() -> None:
    async with open_worker() as worker:
        await worker.channel.send(_fake_stream("e1", "alpha beta gamma"))
        first = await worker.channel.receive()
        assert isinstance(first, StreamFragment) and (first.index, first.text) == (0, "alpha ")
        # Unacknowledged, the call cannot go on: cancelling it now is answered before any
        # second fragment or result, and the call is uncertain (it had started).
        await worker.channel.send(Cancel(effect_id="e1"))
        after = await worker.channel.receive()
        assert isinstance(after, Failure) and after.uncertain


async def test_acknowledged_fragments_arrive_in_order_then_the_result() -> None:
    async with open_worker() as worker:
        reply = await worker.call(_fake_stream("e2", "alpha beta gamma"))
    assert isinstance(reply, Result) and reply.output["text"] == "alpha beta gamma"
    assert [(f.index, f.kind, f.text) for f in worker.fragments] == [
        (0, "text", "alpha "),
        (1, "text", "beta "),
        (2, "text", "gamma"),
    ]


async def test_a_refused_fragment_makes_the_call_uncertain() -> None:
    async with open_worker() as worker:
        await worker.channel.send(_fake_stream("e3", "alpha beta"))
        first = await worker.channel.receive()
        assert isinstance(first, StreamFragment)
        refusal = StreamAck(effect_id="e3", index=0, accepted=False, error="disk full")
        await worker.channel.send(refusal)
        reply = await worker.channel.receive()
    assert isinstance(reply, Failure) and reply.uncertain
    assert "not persisted: disk full" in reply.error.message
