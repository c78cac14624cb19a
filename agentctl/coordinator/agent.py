"""Bounded agent tasks: the turn loop, with every model call and tool call its own effect.

The loop itself is deterministic and runs in the coordinator; the agent, its provider and tools
come from the compiled plan, and what each call is (operation, class, request, budget estimate,
output shape) from its registry entry. Each model call and each effectful tool call is
recorded (requested and started in one transaction, before dispatch), executed by a worker,
and finished at once, with its budget reserved before and settled after.

Invariants:
- effect ordinals number the calls of one attempt; the recorded input of a call is the whole
  conversation so far, so its identity is the same when a resumed loop reaches it again;
- a call whose effect already succeeded (or was reconciled applied) is reused, never resent;
  model calls are at-most-once: a lost answer leaves the effect uncertain;
- a tool call row commits with its effect row, and finishes with it;
- turns and tool calls are bounded by ``maxTurns`` / ``maxToolCalls``; exhausting them fails.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from agentctl.core import jsonschema, registry
from agentctl.core.effects import effect_id, input_digest
from agentctl.core.evaluate import TaskFailure
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.operations import BuildInput, Operation
from agentctl.core.plan import AgentConfig
from agentctl.core.policy import decide
from agentctl.crashpoints import CrashPoint, crash_point
from agentctl.errors import PolicyDeniedError, RunFailedError
from agentctl.ledger.effects import NewEffect
from agentctl.ledger.model import CallRecord, EffectOutcome
from agentctl.mailbox.messages import Execute, Result


@dataclass(frozen=True)
class AgentCall:
    """One effect of an agent: what is recorded and what the worker is sent."""

    operation: str
    recorded: dict[str, Any]
    request: dict[str, Any]
    effect_class: str
    risk: str
    idempotency: str
    reserve: dict[str, int]
    tool_call_id: str | None = None
    tool: str | None = None


class AgentRunner:
    """Runs one agent task attempt on behalf of the driver."""

    def __init__(self, driver: Any, task_id: str, attempt: int, agent_name: str, prompt: str):
        self.d = driver
        self.task_id = task_id
        self.attempt = attempt
        config: AgentConfig | None = driver.rs.plan.task(task_id).agent_config
        assert config is not None, f"agent task {task_id} ({agent_name}) carries no agent"
        self.config = config
        self.agent: Mapping[str, Any] = config.agent
        self.provider_name = config.provider_name
        self.tools: Mapping[str, Mapping[str, Any]] = config.tools
        self.policy: Mapping[str, Any] = driver.rs.plan.run.policy
        self.prompt = prompt
        self.ordinal = 0

    async def run(self) -> Any:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.agent.get("instructions") or ""},
            {"role": "user", "content": self.prompt},
        ]
        tool_calls = 0
        for _turn in range(int(self.agent["maxTurns"])):
            reply = await self._call(self._model_call(messages))
            if reply.get("finish") != "tool_calls":
                return self._final(reply)
            messages.append({"role": "assistant", "toolCalls": reply["toolCalls"]})
            for call in reply["toolCalls"]:
                tool_calls += 1
                if tool_calls > int(self.agent["maxToolCalls"]):
                    raise TaskFailure(f"agent exceeded maxToolCalls ({self.agent['maxToolCalls']})")
                result = await self._tool(call)
                answer = {"role": "tool", "toolCallId": call["id"], "name": call["name"]}
                messages.append({**answer, "content": result})
        raise TaskFailure(f"agent used all {self.agent['maxTurns']} turns without completing")

    # ---------------------------------------------------------------- model calls

    def _model_call(self, messages: list[dict[str, Any]]) -> AgentCall:
        entry = registry.model_operation(self.config.provider_kind)
        decision = decide(
            self.policy,
            name=self.provider_name,
            effect_class=str(entry.effect_class),
            risk=str(entry.risk),
            is_model=True,
            provider=self.provider_name,
        )
        if decision.denied:
            raise PolicyDeniedError(f"model call denied: {decision.reason}")
        config: JsonObject = {"agent": self.config.agent, "provider": self.config.provider}
        built = self._build(entry, self.provider_name, config, list(messages))
        counter = self.d.provider_calls.get(self.provider_name, 0) + 1
        self.d.provider_calls[self.provider_name] = counter
        request = {**built.request, "callNumber": counter}
        return AgentCall(
            entry.effect_operation,
            built.recorded,
            request,
            str(entry.effect_class),
            str(entry.risk),
            str(entry.idempotency),
            entry.estimate(built.request) if entry.estimate is not None else {},
        )

    def _build(self, entry: Operation, name: str, config: Any, args: Any) -> Any:
        if entry.builder is None:
            raise RunFailedError(f"{entry.name} cannot run in this version")
        context = self.d.rs.context
        return entry.builder(BuildInput(self.task_id, name, config, args, context))

    def _final(self, reply: Mapping[str, Any]) -> Any:
        text = str(reply.get("text") or "")
        schema = self.agent.get("structuredOutput")
        if schema is None:
            return {"text": text, "usage": {**reply.get("usage", {}), "costMicrousd": None}}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskFailure(
                f"agent's final text is not the JSON its structuredOutput needs: {exc}"
            ) from exc
        problems = jsonschema.validate(value, schema)
        if problems:
            raise TaskFailure(f"agent output violates structuredOutput: {'; '.join(problems[:3])}")
        return value

    # ---------------------------------------------------------------- tool calls

    async def _tool(self, call: Mapping[str, Any]) -> Any:
        name = str(call.get("name"))
        tool = self.tools.get(name)
        if tool is None:
            raise TaskFailure(f"the model called unknown tool {name!r}")
        args = call.get("arguments")
        problems = jsonschema.validate(args, tool["inputSchema"])
        if problems:
            raise TaskFailure(f"tool {name} input is invalid: {'; '.join(problems[:3])}")
        self._decide_tool(name, tool)
        output = await self._tool_effect(name, tool, args, str(call.get("id")))
        problems = jsonschema.validate(output, tool.get("outputSchema") or {"type": "object"})
        if problems:
            raise TaskFailure(f"tool {name} output is invalid: {'; '.join(problems[:3])}")
        return output

    def _decide_tool(self, name: str, tool: Mapping[str, Any]) -> None:
        decision = decide(
            self.policy,
            name=name,
            effect_class=str(tool["effectClass"]),
            risk=str(tool["risk"]),
            tool_approval=tool.get("approval") or "policy",
        )
        if decision.denied:
            raise PolicyDeniedError(f"tool {name} denied: {decision.reason}")
        if decision.needs_approval:
            raise PolicyDeniedError(
                f"tool {name} needs approval ({decision.reason}); approvals inside agent turns "
                "are not supported yet, so the call is refused"
            )

    async def _tool_effect(
        self, name: str, tool: Mapping[str, Any], args: Any, call_id: str
    ) -> Any:
        entry = registry.lookup(str(tool["kind"]))
        if entry.is_pure:
            return args
        built = self._build(entry, name, tool, args)
        agent_call = AgentCall(
            entry.effect_operation,
            built.recorded,
            built.request,
            str(tool["effectClass"]),
            str(tool["risk"]),
            str(tool["idempotency"]),
            entry.estimate(built.request) if entry.estimate is not None else {},
            f"{self.task_id}:{self.attempt}:{call_id}",
            name,
        )
        result = await self._call(agent_call)
        return entry.shape(args, result) if entry.shape is not None else result

    # ---------------------------------------------------------------- the effect protocol

    async def _call(self, call: AgentCall) -> Any:
        ordinal = self.ordinal
        self.ordinal += 1
        digest = input_digest(call.recorded)
        eid = effect_id(
            self.d.rs.run_id, self.task_id, self.attempt, ordinal, call.operation, digest
        )
        reused = await self.d.store.recorded_result(eid)
        if reused is not None:
            return reused
        new = NewEffect(
            run_id=self.d.rs.run_id,
            task_id=self.task_id,
            attempt=self.attempt,
            ordinal=ordinal,
            operation=call.operation,
            request=call.recorded,
            effect_class=call.effect_class,
            risk=call.risk,
            idempotency=call.idempotency,
            trace_id=self.d.trace_id,
        )
        record = CallRecord(new, call.reserve, self.d.clock.now(), call.tool_call_id, call.tool)
        refused = await self.d.store.record_and_start_call(record)
        if refused is not None:
            raise RunFailedError(
                f"budget {refused.get('dimension')} exceeded before {call.operation} "
                f"(limit {refused.get('limit')}, would reach {refused.get('attempted')}); "
                "nothing was dispatched"
            )
        crash_point(CrashPoint.AFTER_STARTED)
        return await self._dispatch(new, call, eid)

    async def _dispatch(self, new: NewEffect, call: AgentCall, eid: str) -> Any:
        msg = Execute(
            effect_id=eid,
            run_id=self.d.rs.run_id,
            task_id=self.task_id,
            attempt=self.attempt,
            operation=call.operation,
            request=call.request,
            timeout_seconds=float(self.agent.get("timeoutSeconds") or 120),
        )
        reply = await self.d.pool.execute(msg)
        crash_point(CrashPoint.AFTER_RESULT)
        ok = isinstance(reply, Result)
        status = "succeeded" if ok else ("uncertain" if reply.uncertain else "failed")
        output = reply.output if isinstance(reply, Result) else None
        error = None if isinstance(reply, Result) else reply.error.message
        spent = _spent(call, ok)
        outcome = EffectOutcome(new.run_id, eid, status, self.d.clock.now(), output, error, spent)
        await self.d.store.finish_effects([replace(outcome, tool_call_id=call.tool_call_id)])
        crash_point(CrashPoint.AFTER_OUTCOME)
        if isinstance(reply, Result):
            return reply.output
        if reply.uncertain:
            raise AgentUncertain(error or "lost")
        raise RunFailedError(f"{call.operation}: {error}", retryable=reply.error.retryable)


class AgentUncertain(Exception):
    """A call's outcome is unknown; the driver parks the task as waiting_for_effect."""


def _spent(call: AgentCall, ok: bool) -> dict[str, int]:
    if call.operation.startswith(registry.MODEL_PREFIX):
        tokens = 1 if ok else 0
        return {
            "providerRequests": 1,
            "turns": 1,
            "inputTokens": tokens,
            "outputTokens": tokens,
            "totalTokens": 2 * tokens,
        }
    return {"toolCalls": 1}
