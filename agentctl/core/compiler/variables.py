"""Variable layers (spec/dsl.md §6.4): var files, CLI variables, and their precedence.

Each task's vars, low → high, whole-key replacement: workflow ``varsFiles`` → workflow
``vars`` → agent ``varsFiles`` → agent ``vars`` → task ``varsFiles`` → task ``vars`` → CLI
``--vars-file`` … → CLI ``--var K=JSON`` … (the CLI layer arrives merged, last wins); the
engine bindings (foreachIndex, matrix, …) are added last by the caller.

Invariants:
- pure: the compiler never reads a file. The caller captures every declared var file's
  object *before* compiling (``CapturedVars.files``, keyed by the path as written); a declared
  file that was not captured is a ``schema_violation`` at its ``varsFiles`` entry;
- no layer may set a reserved engine name (``RESERVED_VARS``); a var file or CLI variable
  that does is a ``schema_violation``;
- no variable's value reads ``vars.*``: variables are rendered against inputs, memory and task
  outputs, never against each other (spec/dsl.md §6.4), so such a read could only fail the
  task when it runs; ``check`` reports it as ``invalid_template`` at the variable (a var file's
  or CLI variable's at the ``varsFiles`` entry, or without a path);
- captured contents count in the plan (merged ``vars`` are part of each task's definition),
  never in the workflow digest, which covers the document as written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.templates import TemplateError, find_references

RESERVED = ("foreachIndex", "matrix", "matrixIndex", "loopIndex", "loopPrevious")


@dataclass(frozen=True)
class CapturedVars:
    """What the caller read before compiling: var files by declared path, CLI vars, and the
    text of each agent's ``instructionsFile`` by declared path (``instructions.py``)."""

    files: Mapping[str, JsonObject] = field(default_factory=dict)
    cli: JsonObject = field(default_factory=dict)
    instructions: Mapping[str, str] = field(default_factory=dict)


def _paths(holder: Any) -> list[str]:
    found = holder.get("varsFiles") if isinstance(holder, dict) else None
    return [str(p) for p in found] if isinstance(found, list) else []


def base_vars(spec: Mapping[str, Any], agent: Any, captured: CapturedVars) -> dict[str, Any]:
    """The layers every task of one agent (or of none) shares, merged in precedence order:
    per holder (spec, then agent) its var files in declared order, then its ``vars``."""
    merged: dict[str, Any] = {}
    _merge_holder(merged, spec, captured)
    _merge_holder(merged, agent, captured)
    return merged


def task_vars(
    base: dict[str, Any], task: Mapping[str, Any], captured: CapturedVars
) -> dict[str, Any]:
    """The task's variable layers merged (bindings not included): a new dict, ``base``
    (``base_vars`` of its agent) under the task's var files and ``vars``, under the CLI
    variables. Once per task: no list of the layers."""
    merged = dict(base)
    _merge_holder(merged, task, captured)
    _merge(merged, captured.cli)
    return merged


def _merge_holder(merged: dict[str, Any], holder: Any, captured: CapturedVars) -> None:
    if not isinstance(holder, dict):
        return
    if holder.get("varsFiles"):
        for path in _paths(holder):
            _merge(merged, captured.files.get(path))
    _merge(merged, holder.get("vars"))


def _merge(merged: dict[str, Any], layer: Any) -> None:
    if layer and isinstance(layer, dict):
        merged.update(layer)


def declared_files(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(dotted path of the varsFiles entry, path as written)`` of every declared var file."""
    spec = doc.get("spec") or {}
    for index, path in enumerate(_paths(spec)):
        yield f"spec.varsFiles.{index}", path
    for name, agent in (spec.get("agents") or {}).items():
        for index, path in enumerate(_paths(agent)):
            yield f"spec.agents.{name}.varsFiles.{index}", path
    for prefix, at, task in _tasks(spec):
        if isinstance(task, dict) and task.get("varsFiles"):  # (most tasks declare none)
            for index, path in enumerate(_paths(task)):
                yield f"{prefix}.{at}.varsFiles.{index}", path


def _tasks(spec: Mapping[str, Any]) -> Iterator[tuple[str, int, Any]]:
    """``(prefix, index, task)``: every task is at dotted path ``f"{prefix}.{index}"``, made
    only where one is reported (not three times a task for every compile)."""
    for index, task in enumerate(spec.get("tasks") or []):
        yield "spec.tasks", index, task
    for name, sub in (spec.get("subworkflows") or {}).items():
        for index, task in enumerate((sub or {}).get("tasks") or []):
            yield f"spec.subworkflows.{name}.tasks", index, task


def check_captured(doc: Mapping[str, Any], captured: CapturedVars, diags: Collector) -> None:
    """Every declared file was captured; no file or CLI variable sets a reserved name."""
    for where, path in declared_files(doc):
        if path not in captured.files:
            not_captured(f"variable file {path!r}", where, diags)
            continue
        _reserved(captured.files[path], f"variable file {path!r}", where, diags)
    _reserved(captured.cli, "the command line", None, diags)


def check_var_reads(doc: Mapping[str, Any], captured: CapturedVars, diags: Collector) -> None:
    """No variable of any layer reads another variable (see the module docstring)."""
    spec = doc.get("spec") or {}
    _var_reads(spec.get("vars"), "", "spec.vars", diags)
    for name, agent in (spec.get("agents") or {}).items():
        _var_reads(agent.get("vars"), "", f"spec.agents.{name}.vars", diags)
    for prefix, index, task in _tasks(spec):
        if task.get("vars"):  # (most tasks have none: no path made for them)
            _var_reads(task.get("vars"), "", f"{prefix}.{index}.vars", diags)
    for where, path in declared_files(doc):
        _var_reads(captured.files.get(path), f"variable file {path!r}: ", where, diags)
    _var_reads(captured.cli, "the command line: ", None, diags)


def _var_reads(layer: Any, what: str, where: str | None, diags: Collector) -> None:
    if not layer or not isinstance(layer, Mapping):
        return
    for name, value in layer.items():
        try:
            references = find_references(value)
        except TemplateError:
            continue  # a syntax error is reported where the task's templates are checked
        for ref in references:
            if ref.root != "vars":
                continue
            diags.add(
                "invalid_template",
                f"{what}vars.{name} reads `{ref.path}`, but variables cannot read variables",
                f"{where}.{name}" if where is not None and not what else where,
                help="variables are rendered against inputs, memory and task outputs: "
                "write the value itself, or read it from an input",
            )


def not_captured(what: str, where: str, diags: Collector) -> None:
    """A declared source file the caller did not read before compiling."""
    diags.add(
        "schema_violation",
        f"{what} was not read before compiling",
        where,
        help="compile through the agentctl CLI, which reads declared files first",
    )


def _reserved(layer: Mapping[str, Any], what: str, where: str | None, diags: Collector) -> None:
    for name in RESERVED:
        if name in layer:
            diags.add(
                "schema_violation",
                f"{what} sets vars.{name}, which is reserved for engine bindings",
                where,
            )
