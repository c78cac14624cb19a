"""Where each task's winning variables come from, never what they are (``agentctl explain``).

Job: from a compiled plan, the document it was compiled from and the captured sources, say
which layer (``variables.LAYERS``) and which source (a var file's path as written, the dotted
path of an inline ``vars``, ``--var``) won each variable of every task, in compiled order —
expanded foreach/matrix/loop children and sub-workflow tasks included, as the plan has them;
an engine binding (``foreachIndex``, ``matrix``…) is layer ``engineBinding``. Also every
layer the workflow and command line declare, with the names it sets, and where each agent's
instructions come from.

Invariants:
- pure: reads no file (the caller captured them), changes nothing;
- no variable value and no instruction text is in the result: names, layers, sources, and a
  ``sha256:`` digest of an instruction file's captured text only;
- the precedence is ``variables``' own (``task_origins``): this module repeats no merge rule.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentctl.core.canonical import sha256_hex
from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.expand import expand_sources
from agentctl.core.compiler.ir import Node
from agentctl.core.compiler.subworkflows import flatten_tasks
from agentctl.core.compiler.variables import (
    CapturedVars,
    VarLayer,
    authored_tasks,
    cli_layers,
    holder_layers,
    task_origins,
)
from agentctl.core.plan import Plan, PlannedTask

ENGINE = "engineBinding"


@dataclass(frozen=True)
class Origin:
    """The layer (``variables.LAYERS`` or ``engineBinding``) and source that won one name."""

    layer: str
    source: str

    def to_json(self) -> dict[str, str]:
        return {"layer": self.layer, "source": self.source}


@dataclass(frozen=True)
class DeclaredLayer:
    """One layer as declared: ``at`` is its holder's dotted path (None on the command line)."""

    layer: str
    source: str
    at: str | None
    names: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "layer": self.layer,
            "source": self.source,
            "at": self.at,
            "names": list(self.names),
        }


@dataclass(frozen=True)
class TaskOrigins:
    """One compiled task's variables by name, each with the origin that won it."""

    task_id: str
    agent: str | None
    variables: Mapping[str, Origin]

    def to_json(self) -> dict[str, Any]:
        names = {name: origin.to_json() for name, origin in sorted(self.variables.items())}
        return {"taskId": self.task_id, "agent": self.agent, "variables": names}


@dataclass(frozen=True)
class InstructionSource:
    """Where an agent's instructions come from; ``digest`` only for a captured file."""

    agent: str
    source: str  # "inline" or the instructionsFile path as written
    digest: str | None

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "source": self.source, "digest": self.digest}


@dataclass(frozen=True)
class VariableExplanation:
    """The whole report (JSON kind ``VariableExplanation``)."""

    workflow: str
    plan_digest: str
    layers: tuple[DeclaredLayer, ...]
    tasks: tuple[TaskOrigins, ...]
    instructions: tuple[InstructionSource, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "workflow": self.workflow,
            "planDigest": self.plan_digest,
            "layers": [layer.to_json() for layer in self.layers],
            "tasks": [task.to_json() for task in self.tasks],
            "instructions": [source.to_json() for source in self.instructions],
        }


def explain_variables(
    doc: Mapping[str, Any], plan: Plan, captured: CapturedVars
) -> VariableExplanation:
    """The report for ``plan``, compiled from ``doc`` (packs merged) with ``captured``."""
    spec = doc.get("spec") or {}
    nodes = _nodes(doc)
    tasks = tuple(_task(spec, nodes[task.id], task, captured) for task in plan.tasks)
    return VariableExplanation(
        workflow=plan.name,
        plan_digest=plan.plan_digest,
        layers=tuple(_declared(spec, captured)),
        tasks=tasks,
        instructions=tuple(_instructions(spec.get("agents") or {}, captured)),
    )


def _nodes(doc: Mapping[str, Any]) -> dict[str, Node]:
    """The plan's tasks as the compiler expanded them, by id: each keeps the authored
    definition (its ``vars``/``varsFiles``) and its dotted path. The document compiled, so
    nothing is reported here."""
    diags = Collector(None, None)
    return {node.id: node for node in expand_sources(flatten_tasks(dict(doc), diags), diags)}


def _task(
    spec: Mapping[str, Any], node: Node, planned: PlannedTask, captured: CapturedVars
) -> TaskOrigins:
    """A task that renders nothing has no variables in the plan, and none here."""
    if not planned.vars:
        return TaskOrigins(planned.id, planned.agent, {})
    won = task_origins(spec, planned.agent, node.path, node.task, captured)
    origins = {name: Origin(layer.layer, layer.source) for name, layer in won.items()}
    origins.update(dict.fromkeys(node.bindings, Origin(ENGINE, node.expansion or "engine")))
    return TaskOrigins(planned.id, planned.agent, origins)


def _declared(spec: Mapping[str, Any], captured: CapturedVars) -> Iterator[DeclaredLayer]:
    """Every layer the document and command line declare, in precedence order per holder."""
    yield from _listed(holder_layers(spec, "workflow", "spec", captured), "spec")
    for name, agent in (spec.get("agents") or {}).items():
        where = f"spec.agents.{name}"
        yield from _listed(holder_layers(agent, "agent", where, captured), where)
    for prefix, index, task in authored_tasks(spec):
        where = f"{prefix}.{index}"
        yield from _listed(holder_layers(task, "task", where, captured), where)
    yield from _listed(cli_layers(captured), None)


def _listed(layers: Iterator[VarLayer], at: str | None) -> Iterator[DeclaredLayer]:
    for layer in layers:
        values = layer.values
        names = tuple(sorted(values)) if isinstance(values, dict) else ()
        yield DeclaredLayer(layer.layer, layer.source, at, names)


def _instructions(agents: Mapping[str, Any], captured: CapturedVars) -> Iterator[InstructionSource]:
    for name, agent in agents.items():
        written = agent.get("instructionsFile") if isinstance(agent, dict) else None
        if not isinstance(written, str):
            yield InstructionSource(name, "inline", None)
            continue
        text = captured.instructions.get(written)
        digest = None if text is None else "sha256:" + sha256_hex(text)
        yield InstructionSource(name, written, digest)
