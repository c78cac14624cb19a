"""A throwaway action kind for test_worker_fork.py: it answers, from the worker it runs in,
what that worker's Python holds that a parent could have left it (logging handlers, the
command line it believes it has), after logging one warning."""

from __future__ import annotations

import logging
import os
import sys

from agentctl.core.effects import EffectClass, Idempotency, Predictability, Risk
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.operations import BuildInput, Built, Operation
from agentctl.mailbox.messages import Execute
from agentctl.workers.executors import ExecOutcome

KIND = "test.worker_state"


def build_state(b: BuildInput) -> Built:
    return Built({}, {})


async def execute_state(msg: Execute) -> ExecOutcome:
    logging.getLogger("agentctl.test").warning("logged in the worker")
    handlers: list[JsonValue] = [type(h).__name__ for h in logging.getLogger().handlers]
    return ExecOutcome({"handlers": handlers, "argv": " ".join(sys.argv), "pid": os.getpid()})


STATE = Operation(
    name=KIND,
    family="action",
    effect_class=EffectClass.OBSERVE,
    risk=Risk.LOW,
    idempotency=Idempotency.IDEMPOTENT,
    predictability=Predictability.REQUIRES_EXECUTION,
    placement="worker",
    policy_name=KIND,
    builder=build_state,
    executor="tests.coordinator.fork_probe_ext:execute_state",
    preview="stand_in",
)
