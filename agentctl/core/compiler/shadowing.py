"""A foreach's ``as`` name set by a variable layer (spec/dsl.md §4.8, §6.4).

The spec reserves the engine names (``foreachIndex``, ``matrix``…) at every variable layer,
and the ``as`` name "in vars": the foreach task's own. So:

- the task's own layers — its ``vars`` (refused by the loader and by ``expand``) and its
  ``varsFiles`` — may not set the name: a var file that does is a ``schema_violation`` at its
  ``varsFiles`` entry (``check_foreach_var_files``), as an inline one is at its key;
- a layer shared with other tasks — the workflow's, the task's agent's, the command line's —
  may: there the name is an ordinary variable of every other task, and in the foreach's
  children the item, bound last, hides it. Since the value given is then not what the
  children see, each such value is reported as a ``warning`` (``foreach_shadow_warnings``),
  never passed over in silence; the compile and the exit code are unchanged.

Invariants: pure; every authored definition (sub-workflow tasks included) is judged once at
its own path, never per expanded child or per invocation; only the value that would win the
name in the task (whole-key replacement, ``variables``) is reported, once for all the tasks it
is hidden from.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agentctl.core.compiler.diagnostics import Collector, Locator
from agentctl.core.compiler.variables import (
    CapturedVars,
    VarLayer,
    authored_tasks,
    cli_layers,
    holder_layers,
    value_label,
)
from agentctl.errors import Diagnostic


def _foreach_tasks(spec: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """``(dotted path, task, as name)`` of every authored foreach task."""
    for prefix, index, task in authored_tasks(spec):
        foreach = task.get("foreach") if isinstance(task, dict) else None
        if isinstance(foreach, dict):
            yield f"{prefix}.{index}", task, str(foreach.get("as") or "item")


def check_foreach_var_files(
    doc: Mapping[str, Any], captured: CapturedVars, diags: Collector
) -> None:
    """A foreach task's own var files may not set its ``as`` name (module docstring)."""
    for path, task, name in _foreach_tasks(doc.get("spec") or {}):
        files = task.get("varsFiles") or []
        for index, file in enumerate(files if isinstance(files, list) else []):
            if name in (captured.files.get(str(file)) or {}):
                diags.add(
                    "schema_violation",
                    f"variable file {str(file)!r} sets vars.{name}, which is reserved for the "
                    f"foreach items of task `{task.get('id')}`",
                    f"{path}.varsFiles.{index}",
                    help=f"rename the variable or the foreach `as` of task `{task.get('id')}`",
                )


def foreach_shadow_warnings(
    doc: Mapping[str, Any],
    captured: CapturedVars,
    *,
    file: str | None = None,
    locate: Locator | None = None,
) -> list[Diagnostic]:
    """A ``warning`` for every value of a shared layer that a foreach item hides, at the value
    (a var file's entry; no path on the command line, where a ``--vars-file`` is the file
    named and a ``--var`` names none), naming the tasks it is hidden in."""
    spec = doc.get("spec") or {}
    # (where, how messages name the value, the variable) → the tasks it is hidden in
    hidden: dict[_Shared, dict[str, None]] = {}
    for _path, task, name in _foreach_tasks(spec):
        found = _winning_shared(spec, task, name, captured)
        if found is not None:
            hidden.setdefault(found, {})[str(task.get("id"))] = None
    warnings = []
    for found, tasks in hidden.items():
        diags = Collector(file, locate)  # (it locates each path; its findings become warnings)
        listed = ", ".join(f"`{task_id}`" for task_id in tasks)
        noun = "task" if len(tasks) == 1 else "tasks"
        diags.add(
            "schema_violation",
            f"{found.label} is hidden in the children of {noun} {listed}, whose foreach binds "
            f"vars.{found.name} to each item",
            found.where,
            help="rename the foreach `as` (or the variable) if the children need both values",
            argv=found.cli_file is not None,
        )
        at = found.cli_file or None
        warnings += [replace(d, severity="warning", file=at or d.file) for d in diags.items]
    return warnings


@dataclass(frozen=True)
class _Shared:
    """The shared layer value that would win a foreach's ``as`` name: ``where`` in the
    document (None on the command line); ``cli_file``: None for a document layer, the file
    of a ``--vars-file``, or "" for ``--var``."""

    where: str | None
    label: str
    name: str
    cli_file: str | None


def _winning_shared(
    spec: Mapping[str, Any], task: Mapping[str, Any], name: str, captured: CapturedVars
) -> _Shared | None:
    """The shared layer value that would win ``name`` in ``task`` had the foreach not bound
    it, or None. A task layer setting it is refused elsewhere."""
    found: _Shared | None = None
    for where, layer, owner in _shared_layers(spec, task, captured):
        if isinstance(layer.values, dict) and name in layer.values:
            at = where if layer.layer.endswith("VarsFiles") or where is None else f"{where}.{name}"
            cli_file = None
            if where is None:
                cli_file = layer.source if layer.layer == "cliVarsFiles" else ""
            found = _Shared(at, value_label(layer, name, owner), name, cli_file)
    return found


def _shared_layers(
    spec: Mapping[str, Any], task: Mapping[str, Any], captured: CapturedVars
) -> Iterator[tuple[str | None, VarLayer, str | None]]:
    """``(where, layer, agent)`` of the layers ``task`` shares with others, low → high:
    ``where`` is a var file's ``varsFiles`` entry, an inline layer's ``vars`` path, or None
    on the command line."""
    yield from _placed(holder_layers(spec, "workflow", "spec", captured), "spec", None)
    uses = str(task.get("uses", ""))
    if uses.startswith("agent:"):
        owner = uses.removeprefix("agent:")
        agent = (spec.get("agents") or {}).get(owner)
        yield from _placed(
            holder_layers(agent, "agent", "", captured), f"spec.agents.{owner}", owner
        )
    for layer in cli_layers(captured):
        yield None, layer, None


def _placed(
    layers: Iterator[VarLayer], base: str, owner: str | None
) -> Iterator[tuple[str | None, VarLayer, str | None]]:
    """Each of one holder's layers with its place (``_shared_layers``); var files come in
    declared order, so their index is their ``varsFiles`` entry's."""
    files = 0
    for layer in layers:
        if layer.layer.endswith("VarsFiles"):
            yield f"{base}.varsFiles.{files}", layer, owner
            files += 1
        else:
            yield f"{base}.vars", layer, owner
