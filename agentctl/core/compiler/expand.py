"""Static expansion of foreach, matrix and loop tasks (spec/dsl.md §4.8).

Each expanding task becomes its children, in expansion order, followed by the parent id as a
pure aggregate needing all of them. Child ids are ``PARENT--NNNN-D``: a 4-digit index and the
first 12 hex of sha256 over the compact sorted-key JSON (non-ASCII kept) of the child's engine
bindings — foreach ``{<as>: item, foreachIndex: i}``, matrix ``{matrix: {...}, matrixIndex: i}``
(axes in sorted name order, first axis slowest), loop ``{loopIndex: i, loopPrevious: ...}``.

Invariants: children copy the authored definition (failure, retry, compensate, the whole
memoryWrites set, the parent's needs); nothing here depends on data known only at run time;
an expansion over its ``maxItems`` is reported and produces no children (never a huge graph).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

from agentctl.core.canonical import json_digest
from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.ir import Node, Source
from agentctl.core.compiler.templating import is_exact_template, template_problem

RESERVED_VARS = ("foreachIndex", "matrix", "matrixIndex", "loopIndex", "loopPrevious")
_LOOP_OUTPUT = re.compile(r"(?<![A-Za-z0-9_.-])loop\.output")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def child_id(parent: str, index: int, bindings: dict[str, Any]) -> str:
    """The pinned id of one expanded child."""
    return f"{parent}--{index:04d}-{json_digest(bindings)[:12]}"


def expand_sources(sources: list[Source], diags: Collector) -> list[Node]:
    """Every source as graph nodes, in expanded declaration order."""
    nodes: list[Node] = []
    for source in sources:
        nodes.extend(_expand_one(source, diags))
    return nodes


def _expand_one(source: Source, diags: Collector) -> list[Node]:
    task = source.task
    if source.role == "subworkflow_input":
        return [_plain(source, kind="subworkflow_input")]
    if source.role == "subworkflow_output":
        return [_plain(source, kind="subworkflow_output", children=source.children)]
    _check_reserved_vars(source, diags)
    if task.get("loop") is not None and _loop_allowed(source, diags):
        return _expand_loop(source)
    fans_out = task.get("foreach") is not None or task.get("matrix") is not None
    if fans_out and _fanout_allowed(source, diags):
        return _expand_fanout(source, diags)
    return [_plain(source, when=task.get("when"))]


def _plain(
    source: Source,
    *,
    kind: str | None = None,
    when: str | None = None,
    children: tuple[str, ...] = (),
) -> Node:
    return Node(
        id=str(source.task["id"]),
        source=source,
        task=source.task,
        needs=list(source.task["needs"]),
        kind=kind,
        when=when,
        children=children,
        parent=source.parent,
    )


def _check_reserved_vars(source: Source, diags: Collector) -> None:
    task = source.task
    if not task.get("vars"):
        return  # (most tasks: no vars, nothing reserved to find)
    reserved = list(RESERVED_VARS)
    foreach = task.get("foreach")
    if isinstance(foreach, dict):
        reserved.append(str(foreach.get("as", "item")))
    for name in reserved:
        if name in (task.get("vars") or {}):
            diags.add(
                "schema_violation",
                f"task `{task['id']}` declares vars.{name}, a name reserved for engine bindings",
                f"{source.path}.vars.{name}",
            )


def _loop_allowed(source: Source, diags: Collector) -> bool:
    task = source.task
    clashes = [key for key in ("when", "foreach", "matrix", "route") if task.get(key) is not None]
    if task.get("uses") == "router":
        clashes.append("uses: router")
    for clash in clashes:
        diags.add(
            "schema_violation",
            f"loop task `{task['id']}` cannot also declare {clash}",
            f"{source.path}.{clash.split(':')[0]}",
            help="the loop's `while` guard is its condition" if clash == "when" else None,
        )
    guard = task["loop"].get("while")
    rewritten = _LOOP_OUTPUT.sub("vars.loopPrevious", guard) if isinstance(guard, str) else ""
    problem = template_problem(rewritten) if rewritten else None
    if problem is not None:
        diags.add("invalid_template", problem, f"{source.path}.loop.while")
        return False
    if not is_exact_template(rewritten):
        diags.add(
            "invalid_template",
            f"loop task `{task['id']}` needs `while` to be one exact template",
            f"{source.path}.loop.while",
            help='write the guard as "${{ vars.loopIndex < 3 }}"',
        )
        return False
    return not clashes


def _fanout_allowed(source: Source, diags: Collector) -> bool:
    task = source.task
    ok = True
    if task.get("foreach") is not None and task.get("matrix") is not None:
        diags.add(
            "schema_violation",
            f"task `{task['id']}` cannot declare both foreach and matrix",
            f"{source.path}.matrix",
        )
        ok = False
    if task.get("route") is not None or task.get("uses") == "router":
        diags.add(
            "schema_violation",
            f"router task `{task['id']}` cannot be expanded with foreach or matrix",
            f"{source.path}.route",
        )
        ok = False
    return ok


def _expand_fanout(source: Source, diags: Collector) -> list[Node]:
    task = source.task
    if task.get("foreach") is not None:
        bindings = _foreach_bindings(source, diags)
        expansion = "foreach"
    else:
        bindings = _matrix_bindings(source, diags)
        expansion = "matrix"
    parent = str(task["id"])
    children: list[Node] = []
    for index, values in enumerate(bindings):
        children.append(
            Node(
                id=child_id(parent, index, values),
                source=source,
                task=task,
                needs=list(task["needs"]),
                bindings=values,
                when=task.get("when"),
                parent=parent,
                expansion=expansion,
            )
        )
    return [*children, _aggregate(source, children, kind="aggregate")]


def _aggregate(source: Source, children: list[Node], *, kind: str) -> Node:
    ids = tuple(child.id for child in children)
    return Node(
        id=str(source.task["id"]),
        source=source,
        task=source.task,
        # With no children the aggregate still waits for what the parent waited for.
        needs=list(ids) if ids else list(source.task["needs"]),
        kind=kind,
        children=ids,
        parent=source.parent,
    )


def _foreach_bindings(source: Source, diags: Collector) -> list[dict[str, Any]]:
    foreach = source.task["foreach"]
    items = list(foreach.get("items") or [])
    name = str(foreach.get("as") or "item")
    limit = int(foreach.get("maxItems") or 32)
    if not _IDENTIFIER.fullmatch(name):
        diags.add(
            "schema_violation",
            f"foreach `as` must be an identifier, got {name!r}",
            f"{source.path}.foreach.as",
        )
    if len(items) > limit:
        diags.add(
            "schema_violation",
            f"task `{source.task['id']}` foreach has {len(items)} items, more than "
            f"maxItems {limit}",
            f"{source.path}.foreach.items",
            help="raise foreach.maxItems (at most 256) or shorten the list",
        )
        return []
    return [{name: item, "foreachIndex": index} for index, item in enumerate(items)]


def _matrix_bindings(source: Source, diags: Collector) -> list[dict[str, Any]]:
    matrix = source.task["matrix"]
    axes: dict[str, list[Any]] = matrix.get("axes") or {}
    limit = int(matrix.get("maxItems") or 32)
    names = sorted(axes)
    if not names:
        diags.add(
            "schema_violation",
            f"task `{source.task['id']}` matrix needs at least one axis",
            f"{source.path}.matrix.axes",
        )
        return []
    count = 1
    for name in names:
        count *= len(axes[name])
    if count > limit:
        diags.add(
            "schema_violation",
            f"task `{source.task['id']}` matrix has {count} combinations, more than "
            f"maxItems {limit}",
            f"{source.path}.matrix",
            help="raise matrix.maxItems (at most 256) or remove axis values",
        )
        return []
    # itertools.product varies the last axis fastest, so the first sorted axis is slowest.
    combos = itertools.product(*(axes[name] for name in names))
    return [
        {"matrix": dict(zip(names, combo, strict=True)), "matrixIndex": index}
        for index, combo in enumerate(combos)
    ]


def _expand_loop(source: Source) -> list[Node]:
    task = source.task
    loop = task["loop"]
    guard = _LOOP_OUTPUT.sub("vars.loopPrevious", str(loop["while"]))
    parent = str(task["id"])
    children: list[Node] = []
    for index in range(int(loop.get("maxIterations") or 1)):
        previous = children[-1].id if children else None
        bindings = {
            "loopIndex": index,
            "loopPrevious": loop.get("initial")
            if previous is None
            else f"${{{{ tasks.{previous}.output }}}}",
        }
        children.append(
            Node(
                id=child_id(parent, index, bindings),
                source=source,
                task=task,
                needs=[*task["needs"], *([previous] if previous else [])],
                bindings=bindings,
                when=guard,
                parent=parent,
                expansion="loop",
            )
        )
    aggregate = _aggregate(source, children, kind="loop_aggregate")
    aggregate.guard = guard
    aggregate.max_iterations = len(children)
    return [*children, aggregate]
