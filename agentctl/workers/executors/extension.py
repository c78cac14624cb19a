"""``extension.process``: a team's own program, spoken to in the process-extension protocol.

Two runs of the configured process (same sandbox as ``builtin.shell.exec``: argv only, cleared
environment, process allowlist, output limits, kill and reap, optional container):

1. ``CMD ARGS --agentctl-handshake`` prints one JSON object ``{protocolVersion, name?,
   inputSchema, outputSchema, capabilities}``, which must equal what the workflow declared
   (capabilities in the declared order; ``name``, the program's own name, is optional text);
2. ``CMD ARGS --agentctl-invoke`` reads ``{protocolVersion, effectId, input}`` on stdin and
   prints ``{protocolVersion, effectId, output}``; ``output`` must match ``outputSchema``.

Both printed objects are closed: a key the protocol does not define is a protocol error.

Invariants:
- nothing is invoked unless the handshake matched: a bad handshake is a definitive failure,
  and one that ran to its exit keeps what it printed as the failed effect's result, in the
  shape of a failed ``builtin.shell.exec`` (``changed: false``: nothing was invoked);
- each call is bounded by ``timeoutSeconds`` on its own (``ProcessLimits``); a handshake that
  timed out failed retryably (nothing was invoked, so a new attempt repeats nothing), and
  so does an effect the worker's own timeout stops before the invocation started, and a
  ``Cancel`` then (a run cut short) answers that nothing was sent: the executor tells the
  worker (``watch_dispatch``) when the invocation starts;
- once the invocation started, anything short of a valid reply leaves the effect uncertain
  (the extension may have acted before it timed out, crashed, overflowed its output limits or
  answered badly): never a plain failure, which ``retry --failed`` would invoke again;
- a bad reply is reported naming the extension and quoting (a bounded, redacted part of)
  what it said.
"""

from __future__ import annotations

import json
import os

from agentctl.core import jsonschema
from agentctl.core.canonical import canonical_json
from agentctl.core.jsonvalue import JsonObject
from agentctl.errors import RunFailedError
from agentctl.mailbox.messages import Execute
from agentctl.mailbox.requests import ExtensionRequest
from agentctl.sandbox.process import ProcessResult
from agentctl.workers.executors import (
    ExecOutcome,
    FailedEffect,
    UncertainEffect,
    parse_request,
    watch_dispatch,
)
from agentctl.workers.executors.shell import (
    Phase,
    exited_report,
    redacted_head,
    redacted_tail,
    run_configured,
)

HANDSHAKE_FLAG = "--agentctl-handshake"
INVOKE_FLAG = "--agentctl-invoke"
# The protocol's messages are closed: a key the protocol does not define is a protocol
# error (the program speaks some other version of it), never silently dropped.
# ``name`` is the program naming itself (the original's published extensions all send it):
# it is checked to be text and otherwise only described, never compared with the workflow.
_HANDSHAKE_KEYS = ("protocolVersion", "name", "inputSchema", "outputSchema", "capabilities")
_REPLY_KEYS = ("protocolVersion", "effectId", "output")
_QUOTE = 200  # characters of a bad reply quoted in the error


class _Said:
    """What one run of the extension printed, and how to name it in errors."""

    def __init__(self, req: ExtensionRequest, phase: str, result: ProcessResult) -> None:
        self.name = f"{_extension(req)} ({phase})"
        self.result = result
        self.secrets = [v for v in req.env.values() if v]

    def fail(self, problem: str) -> RunFailedError:
        shown = redacted_head(self.result.stdout, self.secrets, _QUOTE)
        said = f"; it said: {shown!r}" if shown else ""
        return RunFailedError(f"{self.name}: {problem}{said}")

    def refused(self, error: RunFailedError) -> FailedEffect:
        """The definitive failure of a refused handshake, with what the process printed
        (redacted; within its limits) when it ran to its exit — the same report as a shell
        step's that exits non-zero, for the operator to see why. A process stopped by a
        limit reports none of its bytes, as a shell step does."""
        if self.result.outcome == "timed_out":
            # Nothing was invoked: trying again cannot act twice.
            return FailedEffect(RunFailedError(error.message, retryable=True))
        if self.result.outcome != "exited":
            return FailedEffect(error)
        # The handshake only describes the extension, and the invocation never ran.
        done = exited_report(self.result, self.secrets, status="failed", changed=False)
        return FailedEffect(error, outcome=done)

    def reply(self) -> JsonObject:
        """The one JSON object printed on stdout, after a clean exit."""
        if self.result.outcome != "exited":
            raise RunFailedError(f"{self.name} was stopped: {self.result.detail}")
        if self.result.exit_code != 0:
            tail = redacted_tail(self.result.stderr, self.secrets)
            where = f"; stderr ends: {tail}" if tail else ""
            raise RunFailedError(f"{self.name} exited with code {self.result.exit_code}{where}")
        try:
            value = json.loads(self.result.stdout.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise self.fail("its reply is not one JSON object") from None
        if not isinstance(value, dict):
            raise self.fail("its reply is not a JSON object")
        return value

    def closed(self, reply: JsonObject, what: str, keys: tuple[str, ...]) -> None:
        """``reply`` holds none but ``keys``; else the error names the first unknown key."""
        unknown = sorted(key for key in reply if key not in keys)
        if unknown:
            allowed = ", ".join(keys)
            raise self.fail(f"its {what} has the unknown key {unknown[0]!r} (it takes {allowed})")


def _extension(req: ExtensionRequest) -> str:
    """The extension as errors name it: the program as the workflow runs it (an interpreter
    alone names no extension)."""
    program = " ".join([os.path.basename(req.command), *req.args[:1]])
    return f"extension {program!r}"


def _check_handshake(req: ExtensionRequest, said: _Said) -> None:
    reply = said.reply()
    expected = {
        "protocolVersion": req.protocol_version,
        "inputSchema": req.input_schema,
        "outputSchema": req.output_schema,
    }
    for key, value in expected.items():
        if canonical_json(reply.get(key)) != canonical_json(value):
            raise said.fail(f"its handshake {key} differs from the workflow's declaration")
    capabilities = reply.get("capabilities")
    if not isinstance(capabilities, list) or not capabilities:
        raise said.fail("its handshake declares no capabilities")
    if len(set(map(str, capabilities))) != len(capabilities):
        raise said.fail("its handshake lists a capability twice")
    # The list is compared in order, as the protocol says ("the ordered capability list must
    # exactly match the action"): a program that reorders them is not the one declared.
    if capabilities != req.capabilities:
        raise said.fail("its handshake capabilities differ from the workflow's declaration")
    name = reply.get("name", "")
    if not isinstance(name, str):
        raise said.fail("its handshake name is not text")
    # Last: another protocol version's handshake is reported as that, not as its extra keys.
    said.closed(reply, "handshake", _HANDSHAKE_KEYS)


def _check_reply(req: ExtensionRequest, msg: Execute, said: _Said) -> JsonObject:
    reply = said.reply()
    if reply.get("protocolVersion") != req.protocol_version:
        raise said.fail(f"it answered protocol {reply.get('protocolVersion')!r}")
    said.closed(reply, "reply", _REPLY_KEYS)
    if reply.get("effectId") != msg.effect_id:
        raise said.fail(f"it answered for effect {reply.get('effectId')!r}, not this one")
    if "output" not in reply:
        raise said.fail("its reply has no output")
    output = reply["output"]
    problems = jsonschema.validate(output, req.output_schema)
    if problems:
        raise said.fail(f"its output breaks outputSchema: {'; '.join(problems[:3])}")
    if not isinstance(output, dict):
        raise said.fail("its output is not a JSON object")
    return output


async def execute_extension(msg: Execute) -> ExecOutcome:
    req = parse_request(ExtensionRequest, msg)
    invoked = False
    watch_dispatch(lambda: invoked, _extension(req))
    shake = await run_configured(msg, req, Phase((HANDSHAKE_FLAG,), suffix="-handshake"))
    said = _Said(req, "handshake", shake)
    try:
        _check_handshake(req, said)
    except RunFailedError as exc:
        raise said.refused(exc) from None
    payload = {"protocolVersion": req.protocol_version, "effectId": msg.effect_id}
    stdin = json.dumps({**payload, "input": req.input}).encode("utf-8")
    invoked = True  # from here on, the extension may have acted
    ran = await run_configured(msg, req, Phase((INVOKE_FLAG,), stdin=stdin))
    said = _Said(req, "invoke", ran)
    if ran.outcome == "timed_out":
        raise UncertainEffect(RunFailedError(f"{said.name} {ran.detail}"))
    try:
        output = _check_reply(req, msg, said)
    except RunFailedError as exc:
        # The process ran with the request in hand: whatever it printed, it may have acted.
        raise UncertainEffect(exc) from None
    used = len(shake.stdout) + len(shake.stderr) + len(ran.stdout) + len(ran.stderr)
    return ExecOutcome(output, usage={"processOutputBytes": used})
