"""``extension.process`` requests: a process action plus the process-extension protocol.

The worker runs the configured process twice (handshake, then invocation; see
``agentctl.workers.executors.extension``); this module builds what it is sent and what the
ledger records.

Invariants:
- the rendered ``with`` is the extension's input, checked against the declared
  ``inputSchema`` here, before any effect row exists (a bad input is the task's failure);
- the recorded input carries the input and the declared protocol (so the effect identity
  changes with either), never a secret value (env references resolve in the coordinator);
- the budget reserves the combined output limit twice: handshake and invocation;
- ``timeoutSeconds`` bounds each call (the process limits carry it); the worker's bound of
  the whole effect (``effect_timeout``) allows for both calls and their start and reaping, so
  a call that overruns is stopped, and reported, by the executor that knows which call it was;
- an operator's ``applied`` result stands for the extension's output, so it must meet the
  ``outputSchema`` the effect was invoked under, as a reply would.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentctl.core import jsonschema
from agentctl.core.builders import build_shell, shell_estimate
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_object
from agentctl.core.operations import BuildInput, Built
from agentctl.errors import RunFailedError

PROTOCOL_VERSION = "agentctl.dev/process-extension/v1"
OPERATION = "extension.process"
# Beyond its two calls' own bounds, what one effect may spend starting, killing and reaping
# them (and asking a container engine whether it is there): the worker's bound covers this
# too, so that it never cuts a call short of its own timeout.
CALLS_MARGIN_SECONDS = 10.0


def build_extension(b: BuildInput) -> Built:
    shell = build_shell(b)
    schema = as_object(b.config.get("inputSchema"))
    problems = jsonschema.validate(b.args, schema)
    if problems:
        raise RunFailedError(
            f"task {b.task_id}: extension input breaks its inputSchema: {'; '.join(problems[:3])}"
        )
    protocol: JsonObject = {
        "protocolVersion": b.config.get("protocolVersion"),
        "inputSchema": schema,
        "outputSchema": as_object(b.config.get("outputSchema")),
        "capabilities": b.config.get("capabilities"),
        "input": b.args,
    }
    return Built(
        {**shell.recorded, **protocol}, {**shell.request, **protocol}, secret_env=shell.secret_env
    )


def effect_timeout(call_seconds: float) -> float:
    """The worker's bound of one extension effect: its two calls, each bounded by the task's
    ``timeoutSeconds`` (``call_seconds``), and the margin around them."""
    return 2 * call_seconds + CALLS_MARGIN_SECONDS


def extension_estimate(request: Mapping[str, JsonValue]) -> dict[str, int]:
    """Output of the handshake and of the invocation, each up to the combined limit."""
    return {k: 2 * v for k, v in shell_estimate(request).items()}


def applied_result_problems(operation: str, request: JsonValue, result: JsonValue) -> list[str]:
    """Why ``result`` cannot be recorded as an ``extension.process`` effect's applied outcome
    (none for other operations): a resumed task takes it as the extension's output."""
    if operation != OPERATION:
        return []
    if not isinstance(result, dict):
        return ["an extension's output is a JSON object"]
    return jsonschema.validate(result, as_object(as_object(request).get("outputSchema")))
