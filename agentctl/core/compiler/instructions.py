"""Agent instructions (spec/dsl.md §5): the text an ``instructionsFile`` names, and the
templates in an agent's instructions.

Invariants:
- pure: the compiler never reads a file. The caller captures each declared instruction file's
  text before compiling (``CapturedVars.instructions``, keyed by the path as written); an
  agent whose file was captured compiles as if its ``instructions`` were that text (its
  ``instructionsFile`` kept beside it as provenance), so the plan, each task's fingerprint
  and each model call's recorded input carry the text, while the workflow digest covers the
  document as written; a declared file that was not captured is a ``schema_violation``;
- instructions are a template rendered per task against the task's context, like ``with``:
  its syntax is checked once per agent, and every ``tasks.X.output`` it reads must be in the
  ``needs`` of each task using the agent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.templating import OPEN, task_references, template_problem
from agentctl.core.compiler.variables import CapturedVars, not_captured


class Reader(Protocol):
    """What the checks need of a graph node (``ir.Node``; ``ir`` imports this module)."""

    task: dict[str, Any]
    needs: list[str]

    @property
    def path(self) -> str: ...


def _instruction_files(agents: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(agent name, path as written)`` of every agent with an ``instructionsFile``."""
    for name, agent in agents.items():
        written = agent.get("instructionsFile") if isinstance(agent, dict) else None
        if isinstance(written, str):
            yield name, written


def declared_instruction_files(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(dotted path of the instructionsFile, path as written)`` of every agent that has one."""
    for name, written in _instruction_files((doc.get("spec") or {}).get("agents") or {}):
        yield f"spec.agents.{name}.instructionsFile", written


def resolved_agents(agents: Mapping[str, Any], captured: CapturedVars) -> dict[str, Any]:
    """``agents`` with each captured ``instructionsFile`` read into ``instructions`` (copies:
    the document itself is never changed)."""
    resolved = dict(agents)
    for name, written in _instruction_files(agents):
        if written in captured.instructions:
            resolved[name] = {**agents[name], "instructions": captured.instructions[written]}
    return resolved


def check_instruction_files(
    doc: Mapping[str, Any], captured: CapturedVars, diags: Collector
) -> None:
    for where, written in declared_instruction_files(doc):
        if written not in captured.instructions:
            not_captured(f"instruction file {written!r}", where, diags)


def check_instructions(
    node: Reader, named: tuple[str, Mapping[str, Any]], graph: Mapping[str, Any], diags: Collector
) -> None:
    """The syntax of the agent's instructions (reported at the agent), and each task output
    they read against the task's own ``needs`` (reported at the task); ``named``: the agent's
    name and definition."""
    agent_name, agent = named
    text = agent.get("instructions")
    if not isinstance(text, str) or (OPEN not in text and "}}" not in text):
        return
    source = "instructions" if agent.get("instructionsFile") is None else "instructionsFile"
    problem = template_problem(text)
    if problem is not None:
        where = f"spec.agents.{agent_name}.{source}"
        diags.add("invalid_template", f"agent `{agent_name}` instructions: {problem}", where)
        return
    reader = node.task.get("id")
    for read in task_references(text):
        if diags.unknown(read, graph):
            diags.add(
                "missing_reference",
                f"task `{reader}` reads unknown task `{read}` (in agent `{agent_name}`'s "
                "instructions)",
                f"spec.agents.{agent_name}.{source}",
            )
        elif read not in node.needs:
            diags.add(
                "invalid_template",
                f"task `{reader}` reads tasks.{read}.output (in agent `{agent_name}`'s "
                f"instructions) without needing `{read}`",
                f"{node.path}.needs",
                help=f"add {read} to the needs of {reader}",
            )
