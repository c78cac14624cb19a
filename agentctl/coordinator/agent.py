"""Bounded agent tasks: the turn loop, with every model call and tool call its own effect.

The loop itself is deterministic and runs in the coordinator; each model call and each
effectful tool call is recorded (requested and started in one transaction, before dispatch),
executed by a worker, and finished at once, with its budget reserved before and settled after.

Invariants:
- effect ordinals number the calls of one attempt; the recorded input of a call is the whole
  conversation so far, so its identity is the same when a resumed loop reaches it again;
- a call whose effect already succeeded (or was reconciled applied) is reused, never resent;
  model calls are at-most-once: a lost answer leaves the effect uncertain;
- a tool call row commits with its effect row, and finishes with it;
- turns and tool calls are bounded by ``maxTurns`` / ``maxToolCalls``; exhausting them fails.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from agentctl.core import jsonschema
from agentctl.core.effects import effect_id, input_digest
from agentctl.core.evaluate import TaskFailure
from agentctl.core.policy import decide
from agentctl.crashpoints import crash_point
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


def agent_prompt(given: Any) -> str:
    """The user message: ``with.prompt`` when it is a string, else the JSON of ``with``."""
    if isinstance(given, Mapping) and isinstance(given.get("prompt"), str):
        return str(given["prompt"])
    return json.dumps(given, sort_keys=True, ensure_ascii=False)


class AgentRunner:
    """Runs one agent task attempt on behalf of the driver."""

    def __init__(self, driver: Any, task_id: str, attempt: int, agent_name: str, prompt: str):
        self.d = driver
        self.task_id = task_id
        self.attempt = attempt
        spec = driver.rs.spec
        self.agent: Mapping[str, Any] = spec["agents"][agent_name]
        self.provider_name = str(self.agent["provider"])
        self.provider: Mapping[str, Any] = spec["providers"][self.provider_name]
        self.tools = {name: spec["tools"][name] for name in self.agent.get("tools") or []}
        self.policy: Mapping[str, Any] = spec["policy"]
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
                messages.append(
                    {"role": "tool", "toolCallId": call["id"], "name": call["name"],
                     "content": result}
                )  # fmt: skip
        raise TaskFailure(f"agent used all {self.agent['maxTurns']} turns without completing")

    # ---------------------------------------------------------------- model calls

    def _model_call(self, messages: list[dict[str, Any]]) -> AgentCall:
        kind = str(self.provider["kind"])
        decision = decide(self.policy, name=self.provider_name, effect_class="model",
                          risk="medium", is_model=True, provider=self.provider_name)  # fmt: skip
        if decision.denied:
            raise PolicyDeniedError(f"model call denied: {decision.reason}")
        recorded = {
            "provider": self.provider_name,
            "model": self.agent["model"],
            "messages": messages,
            "tools": list(self.tools),
            "maxOutputTokens": self.agent["maxOutputTokens"],
            "options": dict(self.agent.get("providerOptions") or {}),
        }
        counter = self.d.provider_calls.get(self.provider_name, 0) + 1
        self.d.provider_calls[self.provider_name] = counter
        estimate = len(json.dumps(messages)) // 4 + 1
        out_tokens = int(self.agent["maxOutputTokens"])
        reserve = {"providerRequests": 1, "turns": 1, "inputTokens": estimate,
                   "outputTokens": out_tokens, "totalTokens": estimate + out_tokens}  # fmt: skip
        return AgentCall(f"model.{kind}", recorded, {**recorded, "callNumber": counter},
                         "model", "medium", "at_most_once", reserve)  # fmt: skip

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
        decision = decide(
            self.policy, name=name, effect_class=str(tool["effectClass"]),
            risk=str(tool["risk"]), tool_approval=tool.get("approval") or "policy",
        )  # fmt: skip
        if decision.denied:
            raise PolicyDeniedError(f"tool {name} denied: {decision.reason}")
        if decision.needs_approval:
            raise PolicyDeniedError(
                f"tool {name} needs approval ({decision.reason}); approvals inside agent turns "
                "are not supported yet, so the call is refused"
            )
        output = await self._tool_effect(name, tool, args, str(call.get("id")))
        problems = jsonschema.validate(output, tool.get("outputSchema") or {"type": "object"})
        if problems:
            raise TaskFailure(f"tool {name} output is invalid: {'; '.join(problems[:3])}")
        return output

    async def _tool_effect(
        self, name: str, tool: Mapping[str, Any], args: Any, call_id: str
    ) -> Any:
        kind = str(tool["kind"])
        if kind == "builtin.echo":
            return args
        ws = self.d.rs.workspace
        if kind == "builtin.workspace.read":
            op, request = "builtin.read", {"workspace": ws, "path": args["path"]}
        else:
            roots = list(self.policy.get("writableRoots") or [])
            op = "builtin.write"
            request = {"workspace": ws, "writableRoots": roots, "path": args["path"],
                       "content": args["content"]}  # fmt: skip
        recorded = {"tool": name, "arguments": args}
        agent_call = AgentCall(op, recorded, request, str(tool["effectClass"]), str(tool["risk"]),
                               str(tool["idempotency"]), {"toolCalls": 1},
                               f"{self.task_id}:{self.attempt}:{call_id}", name)  # fmt: skip
        result = await self._call(agent_call)
        content = result.get("content")
        text = content if isinstance(content, str) else str(args.get("content", ""))
        raw = text.encode("utf-8")
        shaped = {
            "path": args["path"],
            "bytes": len(raw),
            "sha256": hashlib.sha256(raw).hexdigest(),
        }
        return {**shaped, "content": text} if kind == "builtin.workspace.read" else shaped

    # ---------------------------------------------------------------- the effect protocol

    async def _call(self, call: AgentCall) -> Any:
        ordinal = self.ordinal
        self.ordinal += 1
        eid = effect_id(self.d.rs.run_id, self.task_id, self.attempt, ordinal, call.operation,
                        input_digest(call.recorded))  # fmt: skip
        reused = await self.d.store.recorded_result(eid)
        if reused is not None:
            return reused
        new = NewEffect(
            run_id=self.d.rs.run_id, task_id=self.task_id, attempt=self.attempt,
            ordinal=ordinal, operation=call.operation, request=call.recorded,
            effect_class=call.effect_class, risk=call.risk, idempotency=call.idempotency,
            trace_id=self.d.trace_id,
        )  # fmt: skip
        record = CallRecord(new, call.reserve, self.d.clock.now(), call.tool_call_id, call.tool)
        refused = await self.d.store.record_and_start_call(record)
        if refused is not None:
            raise RunFailedError(
                f"budget {refused.get('dimension')} exceeded before {call.operation} "
                f"(limit {refused.get('limit')}, would reach {refused.get('attempted')}); "
                "nothing was dispatched"
            )
        crash_point("coordinator.after_started")
        msg = Execute(effect_id=eid, run_id=self.d.rs.run_id, task_id=self.task_id,
                      attempt=self.attempt, operation=call.operation, request=call.request,
                      timeout_seconds=float(self.agent.get("timeoutSeconds") or 120))  # fmt: skip
        reply = await self.d.pool.execute(msg)
        ok = isinstance(reply, Result)
        status = "succeeded" if ok else ("uncertain" if reply.uncertain else "failed")
        output = reply.output if isinstance(reply, Result) else None
        error = None if isinstance(reply, Result) else reply.error.message
        spent = _spent(call, ok)
        outcome = EffectOutcome(new.run_id, eid, status, self.d.clock.now(), output, error, spent)
        await self.d.store.finish_effects([replace(outcome, tool_call_id=call.tool_call_id)])
        crash_point("coordinator.after_outcome")
        if isinstance(reply, Result):
            return reply.output
        if reply.uncertain:
            raise AgentUncertain(error or "lost")
        raise RunFailedError(f"{call.operation}: {error}", retryable=reply.error.retryable)


class AgentUncertain(Exception):
    """A call's outcome is unknown; the driver parks the task as waiting_for_effect."""


def _spent(call: AgentCall, ok: bool) -> dict[str, int]:
    if call.operation.startswith("model."):
        return {"providerRequests": 1, "turns": 1, "inputTokens": 1 if ok else 0,
                "outputTokens": 1 if ok else 0, "totalTokens": 2 if ok else 0}  # fmt: skip
    return {"toolCalls": 1}
