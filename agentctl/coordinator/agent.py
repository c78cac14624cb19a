"""Bounded agent tasks: the turn loop, with every model call and tool call its own effect.

The loop is deterministic and runs in the coordinator. It decides what to call — the model
with the conversation so far, then each tool the model asked for — and hands every call to a
``Gateway`` (``calls.CallGateway`` in a run), which owns the effect protocol. The loop never
touches the ledger, the workers or the driver's state.

Invariants:
- effect ordinals number the calls of one attempt; the recorded input of a model call is the
  whole conversation so far, so its identity is the same when a resumed loop reaches it again
  (the gateway then returns the confirmed result instead of calling again);
- a model call offers the agent's tools; its secret references are resolved for the worker
  only (``modelcalls``), the recorded input keeping their source and digest;
- tool inputs and outputs are validated against the tool's schemas; policy decides each call;
  a call that needs an approval is handed to the gateway with its reason, which holds it
  durably and pauses the task (the loop re-runs on ``resume``, reusing every confirmed call);
- an agent with MCP tools first lists each of their servers' tools (``tools/list``, one
  recorded effect per server), each listing decided by policy before anything reaches the
  server (``decide_listing``: denied, allowed, or held for an approval like a tool call): the
  model sees, and inputs are checked against, the schemas the server listed then; a resumed
  attempt reuses the recorded listing, so its model calls keep their identity. Descriptions
  and annotations are the server's claims, never trusted for policy or idempotency (those
  come from the workflow's tool declaration);
- turns and tool calls are bounded by ``maxTurns`` / ``maxToolCalls``; exhausting them fails;
- each call's timeout is its own (a model call the agent's ``timeoutSeconds``, a tool call the
  tool's, its kind's or the agent's), cut to what is left of the task's own ``timeoutSeconds``
  when it gives one; past that deadline no call starts and the task fails (``agent_timeouts``);
- a pure tool's call (``builtin.echo``) is answered here, without an effect; its tool-call row
  and its budget unit (one ``toolCalls``, reserved and settled with the row) ride the
  attempt's next call (``AgentCall.answered``) or, when none follows, the task's completion
  (``unrecorded``): it never costs a commit of its own, and its answer reaches no model before
  the budget granted it (the call carrying it is refused with it);
- a pure tool's call that needs an approval is the exception: it has an effect, held like any
  other (``AgentCall.pure``), and the gateway answers it once approved.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Mapping
from typing import Protocol

from agentctl.coordinator import modelcalls
from agentctl.coordinator.agent_timeouts import CallLimit, TaskDeadline, tool_seconds
from agentctl.coordinator.calls import AgentCall, AgentUncertain
from agentctl.coordinator.clock import Clock
from agentctl.coordinator.steps import RunningAgent, verdict
from agentctl.core import jsonschema, registry
from agentctl.core.evaluate import TaskFailure
from agentctl.core.jsonvalue import JsonObject, JsonValue, as_list, as_object
from agentctl.core.mcp import LIST_OPERATION, listed_tool
from agentctl.core.operations import BuildInput, Operation, RunContext
from agentctl.core.plan import AgentConfig
from agentctl.core.policy import Decision, decide, decide_listing, tool_approval
from agentctl.core.pricing import COST_KEY, add_token_counts, price_for
from agentctl.core.timeouts import AGENT_CALL_TIMEOUT_SECONDS
from agentctl.core.tool_result import output_problems
from agentctl.errors import PolicyDeniedError, RunFailedError
from agentctl.ledger.sessions import ProviderTurn
from agentctl.ledger.tool_calls import AnsweredToolCall
from agentctl.sandbox.confine import confine

Message = JsonObject
# Finishes that end a turn without a usable answer (spec/dsl.md §5: they fail the task).
UNFINISHED = {
    "max_tokens": "it stopped at maxOutputTokens (finish max_tokens)",
    "refusal": "the model refused (finish refusal)",
}


@dataclasses.dataclass(frozen=True)
class CallDecision:
    """The policy's answer for one call, as if someone could be asked, and — when nobody can
    and ``nonInteractive`` denies what needs an approval — that denial, which the gateway
    applies to a call not yet recorded only (a resumed loop reaches its recorded calls again:
    they were decided when recorded)."""

    decision: Decision
    unattended_denial: str | None = None


def _decided(judge: Callable[[bool], Decision], interactive: bool, denied: str) -> CallDecision:
    """``judge(asked)`` — the policy's decision as if someone could be asked, or not — as a
    ``CallDecision``: a denial by the policy's lists raises ``PolicyDeniedError`` here;
    ``nonInteractive``'s (nobody can be asked) is kept aside for the gateway."""
    decision = judge(interactive)
    if not decision.denied:
        return CallDecision(decision)
    asked = judge(True)
    if asked.denied:
        raise PolicyDeniedError(f"{denied}: {decision.reason}")
    return CallDecision(asked, unattended_denial=decision.reason)


class Gateway(Protocol):
    """All an agent loop may ask of the run: its context, call numbers and performing calls."""

    @property
    def context(self) -> RunContext: ...

    @property
    def clock(self) -> Clock: ...

    def next_call_number(self, provider: str) -> int: ...

    async def perform(self, call: AgentCall) -> JsonValue: ...


class AgentRunner:
    """Runs one agent task attempt through a ``Gateway``."""

    def __init__(self, step: RunningAgent, gateway: Gateway) -> None:
        task = step.task
        assert task.agent_config is not None, f"agent task {task.id} carries no agent"
        self.task = task
        self.attempt = step.attempt
        self.prompt = step.prompt
        self.instructions = step.instructions  # rendered for this task (``prepare``)
        self.gateway = gateway
        self.config: AgentConfig = task.agent_config
        self.agent: Mapping[str, JsonValue] = task.agent_config.agent
        self.policy: Mapping[str, JsonValue] = gateway.context.policy
        self.ordinal = 0
        # The agent's tools by name; MCP tools gain their listed schema in ``_list_mcp_tools``.
        self.tools: dict[str, JsonObject] = dict(task.agent_config.tools)
        self.rates: Mapping[str, int] | None = None  # the model's price, once a call made it
        # The attempt's usage: every answer's counters summed, and their cost (None: unpriced).
        self.used: dict[str, int] = {}
        self.cost: int | None = 0
        self.answered: list[AnsweredToolCall] = []  # pure tool calls no call carried yet
        self.call_ids: dict[str, int] = {}  # how often the model gave each tool-call id
        self.agent_seconds = float(
            _int(self.agent.get("timeoutSeconds") or AGENT_CALL_TIMEOUT_SECONDS)
        )
        # Counted from here, this drive's start of the attempt's loop (``agent_timeouts``).
        self.deadline = TaskDeadline(task.agent_timeout_seconds, gateway.clock.monotonic)

    async def run(self) -> JsonValue:
        messages: list[JsonValue] = [
            {"role": "system", "content": self.instructions},
            {"role": "user", "content": self.prompt},
        ]
        tool_calls = 0
        await self._list_mcp_tools()
        for _turn in range(_int(self.agent["maxTurns"])):
            limit = self.deadline.limit(self.agent_seconds, "model call")
            reply = as_object(await self._perform(self._model_call(messages, limit), limit))
            self._add_usage(as_object(reply.get("usage") or {}))
            finish = reply.get("finish")
            if finish in UNFINISHED:
                raise TaskFailure(f"the model's answer is incomplete: {UNFINISHED[str(finish)]}")
            if finish != "tool_calls":
                return self._final(reply)
            requested = as_list(reply.get("toolCalls"))
            messages.append({"role": "assistant", "toolCalls": requested})
            for call in map(as_object, requested):
                tool_calls += 1
                if tool_calls > _int(self.agent["maxToolCalls"]):
                    raise TaskFailure(f"agent exceeded maxToolCalls ({self.agent['maxToolCalls']})")
                result = await self._tool(call)
                answer: Message = {"role": "tool", "toolCallId": call["id"], "name": call["name"]}
                messages.append({**answer, "content": result})
        raise TaskFailure(f"agent used all {self.agent['maxTurns']} turns without completing")

    def _call(
        self,
        entry: Operation,
        built: modelcalls.ResolvedCall,
        limit: CallLimit,
        *,
        declared: Mapping[str, JsonValue] | None = None,
        tool_call_id: str | None = None,
        rates: Mapping[str, int] | None = None,
    ) -> AgentCall:
        """The next call of this attempt (the ordinal advances with every call made).

        A tool call is recorded with the tool's own declared class, risk and idempotency
        (``declared``); a model call with its registry entry's.
        """
        given = declared or {}
        estimate = entry.estimate(built.request) if entry.estimate is not None else {}
        answered = self.unrecorded()
        self.answered.clear()
        call = AgentCall(
            task_id=self.task.id,
            attempt=self.attempt,
            ordinal=self.ordinal,
            operation=entry.effect_operation,
            recorded=built.recorded,
            request=built.request,
            effect_class=str(given.get("effectClass") or entry.effect_class),
            risk=str(given.get("risk") or entry.risk),
            idempotency=str(given.get("idempotency") or entry.idempotency),
            reserve=modelcalls.with_cost(estimate, rates),
            timeout_s=limit.seconds,
            tool_call_id=tool_call_id,
            tool=str(given["name"]) if "name" in given else None,
            rates=rates,
            secrets=built.secrets,
            answered=answered,
        )
        self.ordinal += 1
        return call

    def unrecorded(self) -> tuple[AnsweredToolCall, ...]:
        """Pure tool calls answered since the attempt's last call (none carried them yet)."""
        return tuple(self.answered)

    def _build(
        self, entry: Operation, name: str, config: JsonObject, args: JsonValue, limit: CallLimit
    ) -> modelcalls.ResolvedCall:
        """The call, built by its registry entry, its secret references resolved for the worker
        (the recorded form keeps each one's source + SHA-256)."""
        if entry.builder is None:
            raise RunFailedError(f"{entry.name} cannot run in this version")
        context = self.gateway.context
        timeout = limit.seconds
        given = BuildInput(self.task.id, name, config, args, context, timeout_seconds=timeout)
        return modelcalls.resolve_secret_refs(
            entry.builder(given), context, f"task {self.task.id}: {name}"
        )

    # ---------------------------------------------------------------- MCP tool listings

    async def _list_mcp_tools(self) -> None:
        """``tools/list`` of each server the agent's MCP tools name, in the agent's order."""
        servers: dict[str, list[str]] = {}
        for tool in self.tools.values():
            if tool.get("kind") == "mcp.tool":
                servers.setdefault(str(tool["server"]), []).append(str(tool["tool"]))
        entry = registry.lookup(LIST_OPERATION)
        for server, remote in servers.items():
            decided = self._decide_listing(entry, server)  # before anything reaches it
            config: JsonObject = {"tools": list[JsonValue](remote)}
            limit = self._limit(entry, server, config, f"tools/list of MCP server {server}")
            built = self._build(entry, server, config, None, limit)
            call = self._listing_call(self._call(entry, built, limit), server, decided)
            listing = await self._perform(call, limit)
            for name, tool in self.tools.items():
                if tool.get("kind") == "mcp.tool" and tool.get("server") == server:
                    self.tools[name] = _with_listing(name, tool, listing)

    def _decide_listing(self, entry: Operation, server: str) -> CallDecision:
        """The listing judged as its own effect: denied by its name in ``toolsDeny`` or when
        every tool of ``server`` this agent has is denied; held where approval is needed."""
        names = [
            name
            for name, tool in self.tools.items()
            if tool.get("kind") == "mcp.tool" and tool.get("server") == server
        ]

        def judged(asked: bool) -> Decision:
            return decide_listing(
                self.policy,
                name=LIST_OPERATION,
                tools=names,
                effect_class=str(entry.effect_class),
                risk=str(entry.risk),
                interactive=asked,
            )

        what = f"tools/list of MCP server {server} denied"
        return _decided(judged, self.gateway.context.interactive, what)

    def _listing_call(self, call: AgentCall, server: str, decided: CallDecision) -> AgentCall:
        """The listing with its decision; one needing an approval is held as a tool call is
        (its tool-call row keyed ``TASK:ATTEMPT:tools/list:SERVER``, named ``mcp.list_tools``)."""
        decision = decided.decision
        call = dataclasses.replace(
            call, policy=verdict(decision), unattended_denial=decided.unattended_denial
        )
        if not decision.needs_approval:
            return call
        return dataclasses.replace(
            call,
            approval_reason=decision.reason,
            tool=LIST_OPERATION,
            tool_call_id=f"{self.task.id}:{self.attempt}:tools/list:{server}",
            arguments={"server": server},
            agent=self.task.agent,
            capability=LIST_OPERATION,
        )

    # ---------------------------------------------------------------- model calls

    def _limit(self, entry: Operation, name: str, config: JsonObject, what: str) -> CallLimit:
        """A tool's (or MCP listing's) call timeout, cut to what is left of the deadline."""
        own = tool_seconds(entry, name, config, self.gateway.context, self.agent_seconds)
        return self.deadline.limit(own, what)

    async def _perform(self, call: AgentCall, limit: CallLimit) -> JsonValue:
        """The gateway's answer to ``call``. One refused by policy gives back the pure tool
        calls it carried, for the task's failure to record (``unrecorded``): refused before
        anything was recorded, they are not in the ledger yet; refused later (a worker's
        egress denial), their rows exist and writing them again keeps them as they are. An
        unknown outcome says so when the task's deadline cut the call's time short."""
        try:
            return await self.gateway.perform(call)
        except PolicyDeniedError:
            self.answered[:0] = call.answered
            raise
        except AgentUncertain as exc:
            if not limit.cut:
                raise
            raise AgentUncertain(limit.explained(str(exc))) from exc

    def _model_call(self, messages: list[JsonValue], limit: CallLimit) -> AgentCall:
        entry = registry.model_operation(self.config.provider_kind)
        name = self.config.provider_name

        def judged(asked: bool) -> Decision:
            return decide(
                self.policy,
                name=name,
                effect_class=str(entry.effect_class),
                risk=str(entry.risk),
                is_model=True,
                provider=name,
                interactive=asked,
            )

        decided = _decided(judged, self.gateway.context.interactive, "model call denied")
        config: JsonObject = {
            "agent": dict(self.agent),
            "provider": dict(self.config.provider),
            "tools": dict[str, JsonValue](self.tools),
        }
        built = self._build(entry, name, config, list(messages), limit)
        number = self.gateway.next_call_number(name)
        request = {**built.request, "callNumber": number}
        model = str(self.agent.get("model"))
        self.rates = price_for(self.gateway.context.pricing, name, self.config.provider_kind, model)
        called = modelcalls.ResolvedCall(built.recorded, request, built.secrets)
        turn = ProviderTurn(name, self.config.provider_kind, model)
        call = self._call(entry, called, limit, rates=self.rates)
        decision = decided.decision
        return dataclasses.replace(
            call,
            policy=verdict(decision),
            turn=turn,
            agent=self.task.agent,
            approval_reason=decision.reason if decision.needs_approval else None,
            unattended_denial=decided.unattended_denial,
        )

    def _add_usage(self, usage: JsonObject) -> None:
        """Add one answer's usage (and cost) to the attempt's total; fail once the total
        passes a ``usageLimit``.

        The total is the attempt's (the original's agent output sums every answer's usage),
        and the limit bounds the whole attempt (spec/dsl.md §8: checked after each
        response), so a reused answer on resume counts again exactly as it did the first time.
        """
        add_token_counts(self.used, usage)
        cost = modelcalls.reply_cost(usage, self.rates)  # None: no price for the model
        self.cost = None if cost is None or self.cost is None else self.cost + cost
        limits = as_object(self.agent.get("usageLimit") or {})
        for key, counter in (
            ("maxInputTokens", "inputTokens"),
            ("maxOutputTokens", "outputTokens"),
        ):
            limit, total = limits.get(key), self.used.get(counter, 0)
            if isinstance(limit, int) and total > limit:
                raise TaskFailure(
                    f"agent exceeded usageLimit.{key} ({limit}): its answers used {total} {counter}"
                )

    def _final(self, reply: JsonObject) -> JsonValue:
        text = str(reply.get("text") or "")
        schema = self.agent.get("structuredOutput")
        if schema is None:
            usage = dict[str, JsonValue](self.used)
            return {"text": text, "usage": {**usage, COST_KEY: self.cost}}
        try:
            value: JsonValue = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskFailure(
                f"agent's final text is not the JSON its structuredOutput needs: {exc}"
            ) from exc
        problems = jsonschema.validate(value, as_object(schema))
        if problems:
            raise TaskFailure(f"agent output violates structuredOutput: {'; '.join(problems[:3])}")
        return value

    # ---------------------------------------------------------------- tool calls

    async def _tool(self, call: JsonObject) -> JsonValue:
        name = str(call.get("name"))
        tool = self.tools.get(name)
        if tool is None:
            raise TaskFailure(f"the model called unknown tool {name!r}")
        args = call.get("arguments")
        problems = jsonschema.validate(args, as_object(tool["inputSchema"]))
        if problems:
            raise TaskFailure(f"tool {name} input is invalid: {'; '.join(problems[:3])}")
        decided = self._decide_tool(name, tool)
        output = await self._tool_effect(name, dict(tool), args, str(call.get("id")), decided)
        problems = output_problems(tool, output)
        if problems:
            raise TaskFailure(f"tool {name} output is invalid: {'; '.join(problems[:3])}")
        return output

    def _call_key(self, call_id: str) -> str:
        """The call's key in the run, ``TASK:ATTEMPT:ID``. A model may give an id twice in one
        attempt (Gemini sends none, so every answer's first call is ``call-1``): a repeat
        gets ``#N``, counted in call order, which a resumed attempt repeats identically."""
        seen = self.call_ids.get(call_id, 0) + 1
        self.call_ids[call_id] = seen
        key = f"{self.task.id}:{self.attempt}:{call_id}"
        return key if seen == 1 else f"{key}#{seen}"

    def _decide_tool(self, name: str, tool: Mapping[str, JsonValue]) -> CallDecision:
        """Refuse a call the policy's lists deny; otherwise allowed, or needing an approval."""
        return _decided(
            functools.partial(self._tool_policy, name, tool),
            self.gateway.context.interactive,
            f"tool {name} denied",
        )

    def _tool_policy(self, name: str, tool: Mapping[str, JsonValue], asked: bool) -> Decision:
        return decide(
            self.policy,
            name=name,
            effect_class=str(tool["effectClass"]),
            risk=str(tool["risk"]),
            tool_approval=tool_approval(tool.get("approval")),
            interactive=asked,
        )

    async def _tool_effect(
        self, name: str, tool: JsonObject, args: JsonValue, call_id: str, decided: CallDecision
    ) -> JsonValue:
        entry = registry.lookup(str(tool["kind"]))
        decision = decided.decision
        approval = decision.reason if decision.needs_approval else None
        if entry.is_pure and approval is None:
            return self._answer(entry, name, args, call_id)
        limit = self._limit(entry, name, tool, f"call of tool {name}")
        built = self._build(entry, name, tool, args, limit)
        try:
            confine(entry.effect_operation, built.request)  # a path denial is never held
        except PolicyDeniedError as exc:
            raise PolicyDeniedError(f"tool {name} denied: {exc.message}") from exc
        call_ref = self._call_key(call_id)
        declared = {**tool, "name": name}
        call = self._call(entry, built, limit, declared=declared, tool_call_id=call_ref)
        call = dataclasses.replace(
            call, policy=verdict(decision), provider_call_id=call_id, arguments=args
        )
        if approval is not None:
            capability = tool.get("capability")
            call = dataclasses.replace(
                call,
                approval_reason=approval,
                unattended_denial=decided.unattended_denial,
                agent=self.task.agent,
                capability=str(capability) if capability is not None else entry.policy_name,
            )
        if entry.shape is not None:
            call = dataclasses.replace(call, shape=functools.partial(entry.shape, args))
        # Pure and held: an effect to hold it, which the gateway answers once approved.
        call = dataclasses.replace(call, pure=entry.is_pure)
        return call.shaped(await self._perform(call, limit))

    def _answer(self, entry: Operation, name: str, args: JsonValue, call_id: str) -> JsonValue:
        """A pure tool call answered here, its row and budget unit left to the next write."""
        units = entry.estimate(as_object(args)) if entry.estimate is not None else {}
        key = self._call_key(call_id)
        answered = AnsweredToolCall(
            key, self.task.id, self.attempt, call_id, name, args, args, units
        )
        self.answered.append(answered)
        return args


def _with_listing(name: str, tool: JsonObject, listing: JsonValue) -> JsonObject:
    """An MCP tool's declaration completed by what its server listed (schema, description)."""
    remote = str(tool["tool"])
    found = listed_tool(listing, remote)
    if found is None:
        raise TaskFailure(
            f"MCP server {tool['server']} does not list tool {remote!r} (agent tool {name})"
        )
    description = tool.get("description") or found.get("description") or ""
    return {**tool, "description": description, "inputSchema": found.get("inputSchema")}


def _int(value: JsonValue) -> int:
    return value if isinstance(value, int) else int(str(value))
