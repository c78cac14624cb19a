"""The worker's effect timeout and the uncertainty boundary of a model call.

A timeout that expires while the request is still being connected (nothing left the worker)
fails the call definitively and retryably; once request bytes may have left, the same
timeout leaves it uncertain (``test_provider_adapters.test_slow_answer_times_out_uncertain``).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from agentctl.mailbox import Failure
from tests.providers.fixtures import FixtureServer
from tests.providers.test_provider_adapters import ASK, BY_KIND, execute, request_for
from tests.worker_process import open_worker


@contextmanager
def stuck_listener() -> Iterator[int]:
    """A 127.0.0.1 port whose connects hang: its one-slot accept queue is already full, so
    the kernel drops further SYNs and a client waits in ``connect``."""
    listener = socket.socket()
    filler = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        filler.connect(("127.0.0.1", port))  # never accepted: it fills the queue
        yield port
    finally:
        filler.close()
        listener.close()


async def test_timeout_before_the_request_left_is_definitive(server: FixtureServer) -> None:
    d = BY_KIND["openai"]
    with stuck_listener() as port:
        endpoint = f"http://127.0.0.1:{port}/v1/responses"
        request = request_for(d, server, ASK, endpoint=endpoint, network={"allowedPorts": [port]})
        async with open_worker() as worker:
            reply = await worker.call(execute(d, request, timeout=1))
    assert isinstance(reply, Failure), reply
    assert not reply.uncertain and reply.error.retryable
    assert "before its request was sent" in reply.error.message
    assert server.seen == []
