"""The worker's own timeout of an ``extension.process`` effect, and a ``Cancel`` of it, in a
real worker process.

The effect's bound (``Execute.timeout_seconds``) is set here below each call's own
``timeoutSeconds``, so it is the worker's deadline that stops the effect: before the
invocation started nothing was invoked (failed, retryably); after, the extension may have
acted (uncertain). Either error names the extension, as the executor's own errors do. A
``Cancel`` (the coordinator's run cut short) is answered the same way: during the handshake,
a definitive ``cancelled_unsent`` failure; once the invocation started, uncertain.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from agentctl.mailbox import Cancel, Execute, Failure
from agentctl.mailbox.messages import is_cancelled_unsent
from tests.sleepy_extension import HANDSHAKE_MARKER, MARKER, PROTOCOL, SCRIPT
from tests.wire_messages import execute_msg
from tests.worker_process import open_worker


def _execute(ws: Path, handshake_s: str, invoke_s: str, timeout_s: float = 1.5) -> Execute:
    (ws / "ext.py").write_text(SCRIPT)
    request = {
        "workspace": str(ws),
        "command": sys.executable,
        "args": [str(ws / "ext.py"), handshake_s, invoke_s],
        "limits": {"timeoutSeconds": 60},  # each call's own bound: not what stops them here
        "protocolVersion": PROTOCOL,
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "capabilities": ["c"],
        "input": {},
    }
    return execute_msg(
        "extension.process",
        request,
        effect_id=f"effect-{handshake_s}-{invoke_s}",
        timeout=timeout_s,
        executor="agentctl.workers.executors.extension:execute_extension",
    )


@pytest.mark.parametrize(
    ("handshake_s", "invoke_s", "invoked"), [("60", "0", False), ("0", "60", True)]
)
async def test_the_workers_timeout_tells_a_handshake_from_an_invocation(
    tmp_path: Path, handshake_s: str, invoke_s: str, invoked: bool
) -> None:
    msg = _execute(tmp_path, handshake_s, invoke_s)
    async with open_worker() as worker:
        reply = await worker.call(msg)
    assert isinstance(reply, Failure), reply
    program = f"{os.path.basename(sys.executable)} {tmp_path / 'ext.py'}"
    expired = f"extension {program!r}: effect timed out after 1.5 s"
    assert (tmp_path / MARKER).exists() is invoked
    if invoked:  # the extension had the request: it may have acted
        assert reply.uncertain and reply.error.message == expired
    else:  # nothing was invoked: a definitive failure that a new attempt may retry
        assert not reply.uncertain and reply.error.retryable
        assert reply.error.message == f"{expired}, before its request was sent"


@pytest.mark.parametrize(
    ("handshake_s", "invoke_s", "started"), [("600", "0", HANDSHAKE_MARKER), ("0", "600", MARKER)]
)
async def test_a_cancel_tells_a_handshake_from_an_invocation(
    tmp_path: Path, handshake_s: str, invoke_s: str, started: str
) -> None:
    msg = _execute(tmp_path, handshake_s, invoke_s, timeout_s=600)
    async with open_worker() as worker:
        await worker.channel.send(msg)
        with trio.fail_after(120):  # a bound on waiting, not a speed assertion
            while not (tmp_path / started).exists():
                await trio.sleep(0.02)
        await worker.channel.send(Cancel(effect_id=msg.effect_id))
        reply = await worker.channel.receive()
    assert isinstance(reply, Failure), reply
    if started == MARKER:  # the extension had the request: it may have acted
        assert reply.uncertain and not is_cancelled_unsent(reply)
        assert reply.error.message == "effect cancelled after it started"
    else:  # nothing was invoked: the coordinator may record that nothing happened
        assert is_cancelled_unsent(reply) and not (tmp_path / MARKER).exists()
        program = f"{os.path.basename(sys.executable)} {tmp_path / 'ext.py'}"
        cancelled = f"extension {program!r}: effect cancelled before its request was sent"
        assert reply.error.message == cancelled
