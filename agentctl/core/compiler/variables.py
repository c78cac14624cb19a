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
  never in the workflow digest, which covers the document as written;
- one precedence, one merge: every layer is named by ``holder_layers``/``cli_layers`` and
  folded by ``_fold``, which yields the merged values (``base_vars``, ``task_vars``) and, for
  ``explain`` (``task_origins``), which layer each winning key came from — never its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.jsonvalue import JsonObject
from agentctl.core.templates import TemplateError, find_references

RESERVED = ("foreachIndex", "matrix", "matrixIndex", "loopIndex", "loopPrevious")


LAYERS = (
    "workflowVarsFiles",
    "workflowVars",
    "agentVarsFiles",
    "agentVars",
    "taskVarsFiles",
    "taskVars",
    "cliVarsFiles",
    "cliVars",
)
CLI_VARS = "--var"  # the source of the ``--var`` layer (a ``--vars-file`` layer's is its path)


@dataclass(frozen=True)
class VarLayer:
    """One layer of variables: ``layer`` names it (one of ``LAYERS``); ``source`` is a var
    file's path as written, the dotted document path of an inline ``vars``, or ``CLI_VARS``;
    ``values`` is what it sets (None for a declared file that was not captured)."""

    layer: str
    source: str
    values: Any


@dataclass(frozen=True)
class CapturedVars:
    """What the caller read before compiling: var files by declared path, CLI vars, and the
    text of each agent's ``instructionsFile`` by declared path (``instructions.py``).

    ``cli`` is the whole CLI layer merged (what a compile reads); ``cli_layers`` says how it
    came about, in command-line precedence: a ``cliVarsFiles`` layer per ``--vars-file`` (its
    path as given), then one ``cliVars`` layer (source ``CLI_VARS``) for every ``--var`` —
    build both with ``from_cli_layers``. Empty when a caller gave ``cli`` alone: it is then
    one ``--var`` layer."""

    files: Mapping[str, JsonObject] = field(default_factory=dict)
    cli: JsonObject = field(default_factory=dict)
    instructions: Mapping[str, str] = field(default_factory=dict)
    cli_layers: tuple[VarLayer, ...] = ()

    @classmethod
    def from_cli_layers(
        cls,
        files: Mapping[str, JsonObject],
        layers: list[VarLayer],
        instructions: Mapping[str, str],
    ) -> CapturedVars:
        """``cli`` merged from ``layers`` by the one fold every layer goes through."""
        merged: dict[str, Any] = {}
        _fold(merged, layers)
        return cls(files=files, cli=merged, instructions=instructions, cli_layers=tuple(layers))


def _paths(holder: Any) -> list[str]:
    found = holder.get("varsFiles") if isinstance(holder, dict) else None
    return [str(p) for p in found] if isinstance(found, list) else []


def base_vars(spec: Mapping[str, Any], agent: Any, captured: CapturedVars) -> dict[str, Any]:
    """The layers every task of one agent (or of none) shares, merged in precedence order:
    per holder (spec, then agent) its var files in declared order, then its ``vars``."""
    merged: dict[str, Any] = {}  # (sources unused here: "" for the agent's path)
    _fold(merged, holder_layers(spec, "workflow", "spec", captured))
    _fold(merged, holder_layers(agent, "agent", "", captured))
    return merged


def task_vars(
    base: dict[str, Any], task: Mapping[str, Any], captured: CapturedVars
) -> dict[str, Any]:
    """The task's variable layers merged (bindings not included): a new dict, ``base``
    (``base_vars`` of its agent) under the task's var files and ``vars``, under the CLI
    variables (``captured.cli``, merged once by ``from_cli_layers``)."""
    merged = dict(base)
    # (Sources are not kept here: "" stands for the paths ``task_origins`` is given.)
    _fold(merged, holder_layers(task, "task", "", captured))
    if captured.cli:
        merged.update(captured.cli)
    return merged


def run_vars(spec: Mapping[str, Any], captured: CapturedVars) -> dict[str, Any]:
    """The variables of the run as a whole, which ``spec.outputs`` reads: the workflow's layers
    (var files, then ``vars``) under the CLI variables — no agent's or task's, which are
    theirs alone."""
    merged = base_vars(spec, None, captured)
    if captured.cli:
        merged.update(captured.cli)
    return merged


def task_origins(
    spec: Mapping[str, Any],
    agent_name: str | None,
    task_path: str,
    task: Mapping[str, Any],
    captured: CapturedVars,
) -> dict[str, VarLayer]:
    """Which layer won each of a task's variables (name → that layer), the same layers and
    fold as ``base_vars`` + ``task_vars`` (bindings not included). ``agent_name``: the task's
    agent, if any; ``task_path``: the task's dotted document path."""
    origins: dict[str, VarLayer] = {}
    merged: dict[str, Any] = {}
    _fold(merged, holder_layers(spec, "workflow", "spec", captured), origins)
    if agent_name is not None:
        agent = (spec.get("agents") or {}).get(agent_name)
        where = f"spec.agents.{agent_name}"
        _fold(merged, holder_layers(agent, "agent", where, captured), origins)
    _fold(merged, holder_layers(task, "task", task_path, captured), origins)
    _fold(merged, cli_layers(captured), origins)
    return origins


def holder_layers(
    holder: Any, scope: str, where: str, captured: CapturedVars
) -> Iterator[VarLayer]:
    """The layers of one holder (the spec, an agent, a task; ``scope`` names it in
    ``LAYERS``, ``where`` is its dotted path), low → high: its var files in declared order,
    then its ``vars``. A file that was not captured holds None (reported elsewhere)."""
    if not isinstance(holder, dict):
        return
    if holder.get("varsFiles"):
        for path in _paths(holder):
            yield VarLayer(f"{scope}VarsFiles", path, captured.files.get(path))
    if holder.get("vars"):
        yield VarLayer(f"{scope}Vars", f"{where}.vars", holder["vars"])


def value_label(layer: VarLayer, name: str, owner: str | None = None) -> str:
    """How messages name variable ``name`` as ``layer`` sets it (``owner``: the agent of an
    agent layer); "" for a task's own ``vars``, whose dotted path names it."""
    if layer.layer.endswith("VarsFiles"):
        what = "--vars-file" if layer.layer == "cliVarsFiles" else "variable file"
        return f"vars.{name} of {what} {layer.source!r}"
    if layer.layer == "workflowVars":
        return f"workflow variable `{name}`"
    if layer.layer == "agentVars":
        return f"variable `{name}` of agent `{owner}`"
    return f"--var {name}" if layer.layer == "cliVars" else ""


def cli_layers(captured: CapturedVars) -> Iterator[VarLayer]:
    """The command line's layers in precedence order (see ``CapturedVars``)."""
    if captured.cli_layers:
        yield from captured.cli_layers
    elif captured.cli:
        yield VarLayer("cliVars", CLI_VARS, captured.cli)


def _fold(
    merged: dict[str, Any],
    layers: Iterable[VarLayer],
    origins: dict[str, VarLayer] | None = None,
) -> None:
    """Whole-key replacement, later layers winning; ``origins`` (when given) gets the layer
    and source of each key set."""
    for layer in layers:
        if not layer.values or not isinstance(layer.values, dict):
            continue
        merged.update(layer.values)
        if origins is not None:
            origins.update(dict.fromkeys(layer.values, layer))


def declared_files(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(dotted path of the varsFiles entry, path as written)`` of every declared var file."""
    spec = doc.get("spec") or {}
    for index, path in enumerate(_paths(spec)):
        yield f"spec.varsFiles.{index}", path
    for name, agent in (spec.get("agents") or {}).items():
        for index, path in enumerate(_paths(agent)):
            yield f"spec.agents.{name}.varsFiles.{index}", path
    for prefix, at, task in authored_tasks(spec):
        if isinstance(task, dict) and task.get("varsFiles"):  # (most tasks declare none)
            for index, path in enumerate(_paths(task)):
                yield f"{prefix}.{at}.varsFiles.{index}", path


def authored_tasks(spec: Mapping[str, Any]) -> Iterator[tuple[str, int, Any]]:
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
    for prefix, index, task in authored_tasks(spec):
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
            continue  # a syntax error is reported at the variable by ``varreads``
        for ref in references:
            if ref.root != "vars":
                continue
            diags.add(
                "invalid_template",
                f"{what}vars.{name} reads `{ref.path}`, but variables cannot read variables",
                f"{where}.{name}" if where is not None and not what else where,
                help="variables are rendered against inputs, memory and task outputs: "
                "write the value itself, or read it from an input",
                argv=where is None,  # only the command line's layer has no place in a file
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
                argv=where is None,  # only the command line's layer has no place in a file
            )
