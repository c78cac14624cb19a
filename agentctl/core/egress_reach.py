"""Every URL a plan can reach: what the egress pre-flight judges before a run exists.

Pure: read from the compiled plan and the registry alone. Each task contributes what its
registry entry's ``reach`` says: an agent task its provider's endpoint and the endpoints of
its tools (an ``mcp.tool``'s server), an action task those of its kind (``mcp.call``'s server,
``a2a.delegate``'s Agent Card URL).

Invariants:
- closure only: a provider, server or peer no task uses is not reached (spec/cli.md §12:
  "only closure-reachable providers preflighted");
- a templated server or peer name reaches every declared one, since it may render to any;
  ``named_owners`` (what a run is sure to need secrets for) leaves those out;
- the answer is de-duplicated and sorted by owner then URL, so the first refusal a user
  sees does not depend on task order; ``provider_endpoint_problems`` is sorted by provider.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

from agentctl.core import registry
from agentctl.core.compiler.diagnostics import Locator
from agentctl.core.jsonvalue import JsonValue
from agentctl.core.operations import Endpoint, Operation, ReachInput
from agentctl.core.plan import Plan, PlannedTask, RunConfig
from agentctl.core.providerdefaults import endpoint_problem
from agentctl.errors import Diagnostic


def plan_endpoints(plan: Plan) -> tuple[Endpoint, ...]:
    """The endpoints of every task of ``plan``, each once, sorted."""
    found = {e for task in plan.tasks for e in _task_endpoints(task, plan.run)}
    return tuple(sorted(found, key=lambda e: (e.owner, e.url)))


def named_owners(plan: Plan, task_ids: Collection[str] | None = None) -> set[str]:
    """What the tasks ``task_ids`` (None: every task) are sure to reach, by owner (``MCP server
    x``): endpoints a template may or may not select are left out (``Endpoint.named``)."""
    tasks = plan.tasks if task_ids is None else (t for t in plan.tasks if t.id in task_ids)
    return {e.owner for task in tasks for e in _task_endpoints(task, plan.run) if e.named}


def provider_endpoint_problems(plan: Plan) -> dict[str, str]:
    """Provider name -> why its adapter would refuse its endpoint, for the providers the agent
    tasks of ``plan`` call whose endpoint is not of its kind's form (sorted by name)."""
    providers = {t.agent_config.provider_name: t.agent_config for t in plan.tasks if t.agent_config}
    found: dict[str, str] = {}
    for name in sorted(providers):
        config = providers[name]
        endpoint = config.provider.get("endpoint")
        if isinstance(endpoint, str):
            problem = endpoint_problem(config.provider_kind, endpoint)
            if problem is not None:
                found[name] = problem
    return found


def provider_endpoint_diagnostics(
    plan: Plan, *, file: str | None = None, locate: Locator | None = None
) -> list[Diagnostic]:
    """``provider_endpoint_problems`` as located ``unsupported_capability`` diagnostics (at
    each provider's ``endpoint``): what ``check`` and ``run`` refuse such a workflow with."""
    found = []
    for name, problem in provider_endpoint_problems(plan).items():
        path = f"spec.providers.{name}.endpoint"
        line, column = (locate(path) if locate else None) or (None, None)
        found.append(
            Diagnostic(
                "unsupported_capability",
                f"provider {name}: {problem}",
                file=file,
                line=line,
                column=column,
                path=path,
                help="an endpoint is the full URL of the API operation (docs/providers.md)",
            )
        )
    return found


def _task_endpoints(task: PlannedTask, run: RunConfig) -> Iterator[Endpoint]:
    agent = task.agent_config
    if agent is not None:
        config = {"agent": agent.agent, "provider": agent.provider}
        yield from _reach(task.entry, agent.provider_name, config, None, run)
        for name, tool in agent.tools.items():
            yield from _reach(registry.find(str(tool.get("kind"))), name, tool, None, run)
    elif task.kind == "action":
        yield from _reach(task.entry, task.action or "", task.config(), task.with_, run)


def _reach(
    entry: Operation | None,
    name: str,
    config: Mapping[str, JsonValue],
    with_: JsonValue,
    run: RunConfig,
) -> tuple[Endpoint, ...]:
    if entry is None or entry.reach is None:
        return ()
    return entry.reach(ReachInput(name, config, with_, run.mcp_servers, run.a2a_peers))
