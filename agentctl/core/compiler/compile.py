"""``compile_workflow``: normalized workflow document → immutable, deterministic ``Plan``.

Pipeline: flatten sub-workflows → expand foreach/matrix/loop in declaration position →
resolve ids and kinds → check references, templates, routers, memory writes, capabilities
and compensation → Kahn order → structural budgets → digests and fingerprints.

Invariants: the input document is never mutated; every problem found is reported in one
``ValidationError`` (diagnostics in discovery order); a returned plan satisfies every
invariant documented in ``agentctl.core.plan``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agentctl.core.collector import collector_paused
from agentctl.core.compiler.build import Drafter
from agentctl.core.compiler.capabilities import check_agents
from agentctl.core.compiler.diagnostics import Collector, Locator
from agentctl.core.compiler.digests import (
    Span,
    TaskTexts,
    plan_digest,
    task_json_text,
    workflow_digest_and_text,
)
from agentctl.core.compiler.expand import RESERVED_VARS, expand_sources
from agentctl.core.compiler.instructions import check_instruction_files
from agentctl.core.compiler.ir import Env, Node
from agentctl.core.compiler.memory import check_parallel_writes
from agentctl.core.compiler.order import ancestors, find_cycle, stable_order
from agentctl.core.compiler.references import (
    check_a2a_references,
    check_agent_references,
    check_mcp_references,
    check_needs,
    check_run_outputs,
    resolve_nodes,
)
from agentctl.core.compiler.requirements import plan_requirements
from agentctl.core.compiler.shadowing import check_foreach_var_files
from agentctl.core.compiler.subworkflows import flatten_tasks
from agentctl.core.compiler.variables import (
    CapturedVars,
    check_captured,
    check_var_reads,
    run_vars,
)
from agentctl.core.plan import Plan, PlannedTask, RunConfig


@collector_paused()
def compile_workflow(
    doc: dict[str, Any],
    *,
    file: str | None = None,
    locate: Locator | None = None,
    variables: CapturedVars | None = None,
    bindings: Mapping[str, Mapping[str, Any]] | None = None,
) -> Plan:
    """Compile a schema-valid normalized document; raise ``ValidationError`` on any problem.
    ``variables``: captured var files and CLI values; ``bindings``: ``_bound`` (ValueError)."""
    diags = Collector(file, locate)
    env = Env.of(doc, variables)
    sources = flatten_tasks(doc, diags)
    graph = resolve_nodes(_bound(expand_sources(sources, diags), bindings), env, diags)
    run_level = _check_document(doc, env, graph, diags)
    drafter = Drafter(env, graph, diags)
    drafts = {task_id: drafter.draft(node) for task_id, node in graph.items()}
    drafter.var_reads.report_shared()
    order = _order(graph, diags)
    runtime = env.spec.get("runtime") or {}
    max_concurrency = int(runtime.get("maxConcurrency") or 1)
    _check_graph(order, max_concurrency, drafts, graph, diags)
    _check_structural_budgets(graph, runtime, diags)
    diags.raise_if_any()
    assert order is not None  # a missing order always comes with a diagnostic
    tasks, texts, stored = _finish(drafts, order, env)
    name = str(doc["metadata"]["name"])
    digest, text = workflow_digest_and_text(doc, sources)
    requirements = plan_requirements(list(tasks), env)
    plan = Plan(
        name=name,
        workflow_digest=digest,
        plan_digest=plan_digest(name, digest, tuple(order), max_concurrency, texts, requirements),
        max_concurrency=max_concurrency,
        order=tuple(order),
        tasks=tasks,
        requirements=requirements,
        run=run_config(env.spec, run_level),
    )
    return plan.carrying_document_text(doc, text).carrying_stored_tasks(stored)


def _bound(nodes: list[Node], bindings: Mapping[str, Mapping[str, Any]] | None) -> list[Node]:
    """``nodes`` with the caller's engine bindings set: values no document can declare (a
    compensation step carries its source foreach/matrix/loop child's), counted in the task's
    fingerprint and the plan digest as an expanded child's are. Naming a task the document
    lacks is the caller's bug, not the author's: it raises instead of being a diagnostic."""
    if not bindings:
        return nodes
    missing = set(bindings) - {node.id for node in nodes}
    if missing:
        raise ValueError(f"bindings for tasks the document lacks: {sorted(missing)}")
    for node in nodes:
        if node.id in bindings:
            node.bindings = dict(bindings[node.id])
    return nodes


def _finish(
    drafts: dict[str, PlannedTask], order: list[str], env: Env
) -> tuple[tuple[PlannedTask, ...], Iterator[str], tuple[str, ...] | None]:
    """The tasks in ``order``, finished (``_finalize``); their ``task_json`` texts, cut as they
    are taken from the stored forms' texts (only one text a task is held); and those stored
    forms' texts when every task has one (a plan with sub-workflow boundaries or
    agent tasks with their own timeout: None)."""
    encoder = TaskTexts(env)
    finished = [_finalize(drafts[task_id], i, encoder) for i, task_id in enumerate(order)]
    whole = all(span is not None for _, span in finished)
    stored = tuple(text for text, _ in finished) if whole else None
    texts = (task_json_text(text, span) for text, span in finished)
    return tuple(drafts[task_id] for task_id in order), texts, stored


def run_config(spec: dict[str, Any], run_level: dict[str, Any]) -> RunConfig:
    """The run-level settings the plan carries for the coordinator (outside every digest);
    ``run_level``: the run's variables its outputs read (``{}`` when they read none)."""
    memory = spec.get("memory") or {}
    outputs = spec.get("outputs") or {}
    return RunConfig(
        policy=spec.get("policy") or {},
        working_memory=memory.get("working") or {},
        long_term=memory.get("longTerm"),
        budgets=(spec.get("runtime") or {}).get("budgets") or {},
        outputs=outputs,
        vars=run_level,
        compensation=spec.get("compensation") or {},
        mcp_servers=spec.get("mcpServers") or {},
        pricing=(spec.get("runtime") or {}).get("pricing"),
        a2a_peers=spec.get("a2aPeers") or {},
    )


def _finalize(draft: PlannedTask, position: int, encoder: TaskTexts) -> tuple[str, Span]:
    """Give the draft its position and fingerprint; returns its text and span (``TaskTexts``).

    Both are set in place: a draft is this compile's own object, seen by nothing else until
    the plan holds it, so the copy of its ~30 fields ``dataclasses.replace`` would make (one
    per task, ~5 us each) is not needed to keep any finished task unchanged. The fingerprint
    does not cover the position."""
    fingerprint, text, span = encoder.fingerprint_and_text(draft, position)
    object.__setattr__(draft, "position", position)
    object.__setattr__(draft, "definition_fingerprint", fingerprint)
    return text, span


def _order(graph: dict[str, Node], diags: Collector) -> list[str] | None:
    needs = {task_id: node.needs for task_id, node in graph.items()}
    order, unplaced = stable_order(list(graph), needs)
    if not unplaced:
        return order
    cycle = find_cycle(unplaced, needs)
    diags.add(
        "dependency_cycle",
        f"task dependency cycle: {' -> '.join(cycle)}",
        f"{graph[cycle[0]].path}.needs",
        help="remove one of these needs to break the cycle",
    )
    return None


def _check_graph(
    order: list[str] | None,
    max_concurrency: int,
    drafts: dict[str, PlannedTask],
    graph: dict[str, Node],
    diags: Collector,
) -> None:
    """Parallel memory-write conflicts, only possible when tasks may run concurrently."""
    if order is not None and max_concurrency > 1:
        writes = {task_id: draft.memory_writes for task_id, draft in drafts.items()}
        needs = {task_id: node.needs for task_id, node in graph.items()}
        check_parallel_writes(order, writes, ancestors(order, needs), graph, diags)


def _check_document(
    doc: dict[str, Any], env: Env, graph: dict[str, Node], diags: Collector
) -> dict[str, Any]:
    """Checks of the document as a whole: captured variables and instruction files, needs, the
    run's outputs, agents, reserved names. The run's own variables when its outputs read
    them (the plan carries them then), else ``{}``."""
    run_level = run_vars(env.spec, env.variables)
    check_captured(doc, env.variables, diags)
    check_foreach_var_files(doc, env.variables, diags)
    check_var_reads(doc, env.variables, diags)
    check_instruction_files(doc, env.variables, diags)
    check_needs(graph, diags)
    reads_vars = check_run_outputs(env.spec.get("outputs"), graph, run_level, diags)
    check_agent_references(env, diags)
    check_mcp_references(env, graph, diags)
    check_a2a_references(env, graph, diags)
    check_agents(env, diags)
    _check_reserved_layers(env, diags)
    return run_level if reads_vars else {}


def _check_reserved_layers(env: Env, diags: Collector) -> None:
    layers = [("spec.vars", env.spec.get("vars"))]
    layers += [
        (f"spec.agents.{name}.vars", agent.get("vars")) for name, agent in env.agents.items()
    ]
    for path, layer in layers:
        for name in RESERVED_VARS:
            if isinstance(layer, dict) and name in layer:
                diags.add(
                    "schema_violation",
                    f"vars.{name} is reserved for engine bindings",
                    f"{path}.{name}",
                )


def _check_structural_budgets(
    graph: dict[str, Node], runtime: dict[str, Any], diags: Collector
) -> None:
    budgets = runtime.get("budgets") or {}
    counts = {
        "maxTasks": len(graph),
        "maxExpansionItems": sum(1 for n in graph.values() if n.expansion in ("foreach", "matrix")),
        "maxLoopIterations": sum(1 for n in graph.values() if n.expansion == "loop"),
    }
    what = {
        "maxTasks": "tasks",
        "maxExpansionItems": "foreach/matrix children",
        "maxLoopIterations": "loop iterations",
    }
    for key, count in counts.items():
        limit = budgets.get(key)
        if isinstance(limit, int) and count > limit:
            diags.add(
                "schema_violation",
                f"the plan has {count} {what[key]}, over runtime.budgets.{key} = {limit}",
                f"spec.runtime.budgets.{key}",
            )
