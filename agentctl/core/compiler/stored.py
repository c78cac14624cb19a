"""The compiled plan as stored with its run: ``plan_to_stored`` and ``plan_from_stored``.

``resume``, ``fork`` and ``compensate`` load the plan a run was created with instead of parsing
and compiling its workflow again; this module is the exact, versioned JSON form of a ``Plan``.

Invariants:
- ``plan_from_stored(plan_to_stored(plan)) == plan`` for every compiled plan (tested over every
  example and the compiler's generated graphs), including the carried run configuration;
- a task's stored shape is its digest shape ``task_json`` plus ``operation`` (and
  ``subworkflow`` on sub-workflow boundaries, ``agentTimeoutSeconds`` on agent tasks that give
  a ``timeoutSeconds``: both present only when set, so older stored plans still load and the
  stored form of a plan that does not use them is unchanged);
  shared definitions (actions, agents with their provider and tools) are stored once and
  shared again on load;
- a stored plan of an unknown ``format`` is refused, never guessed at;
- the tasks of the plan a compile made are written as the texts it carries
  (``Plan.stored_tasks``: joined from the runs of canonical JSON made for the digests, the
  very bytes encoding each stored task gives), once, then let go; any other plan's tasks, or
  that plan's again, are encoded.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from agentctl.core.canonical import Items, streamed_canonical_pieces
from agentctl.core.compiler.serialize import task_json
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.plan import (
    AgentConfig,
    Compensation,
    Plan,
    PlannedTask,
    RetryPolicy,
    Route,
    RouteCase,
    RunConfig,
)
from agentctl.errors import FutureVersionError

STORED_PLAN_FORMAT = 1


def plan_to_stored(plan: Plan) -> JsonObject:
    """The whole plan as plain JSON (see the module invariants)."""
    stored = _stored_head(plan)
    stored["tasks"] = [_stored_task(task) for task in plan.tasks]
    return stored


def plan_to_stored_text(plan: Plan) -> str:
    """``canonical_json(plan_to_stored(plan))``, encoded task by task: the tasks' JSON is
    never held as one tree beside the text (~15 MB for 10,000 tasks)."""
    return "".join(plan_to_stored_pieces(plan))


def plan_to_stored_pieces(plan: Plan) -> Iterator[str]:
    """The pieces ``plan_to_stored_text`` joins (``streamed_canonical_pieces``), made as they
    are taken: the ledger stores them without the whole text (6.5 MB at 10,000 tasks)."""
    stored: dict[str, Any] = dict(_stored_head(plan))
    texts = plan.stored_tasks()  # the compile's, when the plan is the one it made
    if texts is not None:
        stored["tasks"] = Items(_handed_over(plan, texts), encoded=True)
    else:
        stored["tasks"] = Items(_stored_task(task) for task in plan.tasks)
    return streamed_canonical_pieces(stored)


def _handed_over(plan: Plan, texts: tuple[str, ...]) -> Iterator[str]:
    """``texts``; once all are taken, the plan lets them go (a stored plan made whole is not
    made again by a run; if it is, its tasks are encoded as for any plan)."""
    yield from texts
    plan.let_go_stored_tasks()


def _stored_head(plan: Plan) -> JsonObject:
    """Everything of the stored form but its tasks (shared definitions collected once)."""
    actions: JsonObject = {}
    agents: JsonObject = {}
    for task in plan.tasks:
        if task.action is not None and task.action_config is not None:
            actions[task.action] = task.action_config
        if task.agent is not None and task.agent_config is not None:
            agents[task.agent] = _agent_json(task.agent_config)
    return {
        "format": STORED_PLAN_FORMAT,
        "name": plan.name,
        "workflowDigest": plan.workflow_digest,
        "planDigest": plan.plan_digest,
        "maxConcurrency": plan.max_concurrency,
        "order": list(plan.order),
        "requirements": plan.requirements,
        "run": _run_json(plan.run),
        "actions": actions,
        "agents": agents,
    }


def _stored_task(task: PlannedTask) -> JsonObject:
    stored: JsonObject = task_json(task)  # a new dict: completed here, not copied again
    stored["operation"] = task.operation
    if task.subworkflow is not None:
        stored["subworkflow"] = task.subworkflow
    if task.agent_timeout_seconds is not None:
        stored["agentTimeoutSeconds"] = task.agent_timeout_seconds
    return stored


def plan_from_stored(data: JsonObject) -> Plan:
    """The plan ``plan_to_stored`` wrote; ``FutureVersionError`` for an unknown format."""
    if data.get("format") != STORED_PLAN_FORMAT:
        raise FutureVersionError(
            f"stored plan format {data.get('format')!r} is not {STORED_PLAN_FORMAT}, "
            "the one this build reads"
        )
    raw: Any = data
    actions = raw["actions"]
    agents = {name: _agent(value) for name, value in raw["agents"].items()}
    tasks = tuple(_task(task, actions, agents) for task in raw["tasks"])
    return Plan(
        name=raw["name"],
        workflow_digest=raw["workflowDigest"],
        plan_digest=raw["planDigest"],
        max_concurrency=raw["maxConcurrency"],
        order=tuple(raw["order"]),
        tasks=tasks,
        requirements=raw["requirements"],
        run=_run(raw["run"]),
    )


def _run_json(run: RunConfig) -> JsonObject:
    return {
        "policy": run.policy,
        "workingMemory": run.working_memory,
        "longTerm": run.long_term,
        "budgets": run.budgets,
        "outputs": run.outputs,
        "vars": run.vars,
        "compensation": run.compensation,
        "mcpServers": run.mcp_servers,
        "pricing": run.pricing,
        "a2aPeers": run.a2a_peers,
    }


def _run(raw: Any) -> RunConfig:
    return RunConfig(
        policy=raw["policy"],
        working_memory=raw["workingMemory"],
        long_term=raw["longTerm"],
        budgets=raw["budgets"],
        outputs=raw["outputs"],
        vars=raw.get("vars") or {},  # absent from plans stored before outputs read vars
        compensation=raw["compensation"],
        mcp_servers=raw.get("mcpServers") or {},  # absent in plans stored before MCP ran
        pricing=raw.get("pricing"),  # absent in plans stored before pricing was carried
        a2a_peers=raw.get("a2aPeers") or {},  # absent from plans stored before A2A ran
    )


def _agent_json(config: AgentConfig) -> JsonObject:
    return {
        "agent": config.agent,
        "providerName": config.provider_name,
        "provider": config.provider,
        "tools": dict(config.tools.items()),
    }


def _agent(raw: Any) -> AgentConfig:
    return AgentConfig(
        agent=raw["agent"],
        provider_name=raw["providerName"],
        provider=raw["provider"],
        tools=raw["tools"],
    )


def _task(raw: Any, actions: Any, agents: dict[str, AgentConfig]) -> PlannedTask:
    action, agent = raw["action"], raw["agent"]
    return PlannedTask(
        id=raw["id"],
        position=raw["position"],
        kind=raw["kind"],
        uses=raw["uses"],
        action=action,
        agent=agent,
        needs=tuple(raw["needs"]),
        with_=raw["with"],
        vars=raw["vars"],
        bindings=raw["bindings"],
        when=raw["when"],
        retry=_retry(raw["retry"]),
        timeout_seconds=raw["timeoutSeconds"],
        failure=raw["failure"],
        memory_writes=tuple(raw["memoryWrites"]),
        output_schema=raw["outputSchema"],
        compensate=_compensation(raw["compensate"]),
        route=_route(raw["route"]),
        children=tuple(raw["children"]),
        parent=raw["parent"],
        guard=raw["guard"],
        max_iterations=raw["maxIterations"],
        definition_fingerprint=raw["definitionFingerprint"],
        operation=raw["operation"],
        action_config=actions.get(action) if action is not None else None,
        agent_config=agents.get(agent) if agent is not None else None,
        subworkflow=raw.get("subworkflow"),
        agent_timeout_seconds=raw.get("agentTimeoutSeconds"),  # absent: stored before it
    )


def _retry(raw: Any) -> RetryPolicy:
    return _retry_policy(raw["maxAttempts"], raw["backoffMs"])


@functools.lru_cache(maxsize=64)
def _retry_policy(max_attempts: int, backoff_ms: int) -> RetryPolicy:
    """Retry policies are few and immutable: one shared instance each (large plans load faster)."""
    return RetryPolicy(max_attempts=max_attempts, backoff_ms=backoff_ms)


def _compensation(raw: Any) -> Compensation | None:
    if raw is None:
        return None
    return Compensation(
        action=raw["action"],
        with_=raw["with"],
        retry=_retry(raw["retry"]),
        timeout_seconds=raw["timeoutSeconds"],
    )


def _route(raw: Any) -> Route | None:
    if raw is None:
        return None
    cases = tuple(RouteCase(equals=c["equals"], tasks=tuple(c["tasks"])) for c in raw["cases"])
    return Route(select=raw["select"], cases=cases, default=tuple(raw["default"]))
