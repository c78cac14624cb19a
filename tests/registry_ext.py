"""A throwaway action kind for tests: one registry entry plus one worker executor.

``MARKER`` appends ``with.text`` to ``with.marker`` (a workspace file) in a real worker
process and answers with the worker's pid, so a test can prove the effect ran exactly once,
out of process. Nothing in ``agentctl`` knows this kind: registering ``MARKER`` is all it takes.
"""

from __future__ import annotations

import os

import trio

from agentctl.core.builders import str_arg
from agentctl.core.effects import EffectClass, Idempotency, Predictability, Risk
from agentctl.core.operations import BuildInput, Built, Operation
from agentctl.mailbox.messages import Execute
from agentctl.workers.executors import ExecOutcome

KIND = "test.marker"
EXECUTOR = "tests.registry_ext:execute_marker"


def build_marker(b: BuildInput) -> Built:
    marker, text = str_arg(b, "marker"), str_arg(b, "text")
    recorded = {"marker": marker, "text": text}
    return Built(dict(recorded), {"workspace": b.run.workspace, **recorded})


def _append(path: str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text + "\n")


async def execute_marker(msg: Execute) -> ExecOutcome:
    req = msg.request
    path = os.path.join(str(req["workspace"]), str(req["marker"]))
    await trio.to_thread.run_sync(_append, path, str(req["text"]))
    return ExecOutcome(
        {"status": "changed", "changed": True, "wrote": req["text"], "pid": os.getpid()}
    )


MARKER = Operation(
    name=KIND,
    family="action",
    effect_class=EffectClass.EXTERNAL_MUTATE,
    risk=Risk.MEDIUM,
    idempotency=Idempotency.AT_MOST_ONCE,
    predictability=Predictability.REQUIRES_EXECUTION,
    placement="worker",
    policy_name="test.marker",
    builder=build_marker,
    executor=EXECUTOR,
    preview="stand_in",
)
