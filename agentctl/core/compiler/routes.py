"""Router checks (spec/dsl.md §4.11) and the compiled ``Route`` of a router task.

Invariants of an accepted router: ``select`` is one exact template whose task reads are in the
router's needs; there is at least one case and each has a destination; no two cases have the
same ``equals`` under JSON identity (``1`` ≠ ``"1"``, ``true`` ≠ ``1``, ``1`` ≠ ``1.0``); every
destination is listed once across cases and default, exists, and needs the router; a router
has no ``with`` (nothing would read it: its output is fixed), so a non-empty one is refused.
An ``equals`` value is literal JSON, never rendered: a ``${{`` anywhere in it (a string value
at any depth) is refused, since it would be compared as text with the selected value and the
router would silently take another branch.
"""

from __future__ import annotations

from typing import Any

from agentctl.core.canonical import canonical_json
from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.ir import Node
from agentctl.core.compiler.references import check_reads
from agentctl.core.compiler.templating import (
    OPEN,
    is_exact_template,
    template_problem,
    templated_strings_at,
)
from agentctl.core.plan import Route, RouteCase

_EXPANDED = frozenset({"aggregate", "loop_aggregate", "subworkflow_output"})


def compile_route(node: Node, graph: dict[str, Node], diags: Collector) -> Route:
    route: dict[str, Any] = node.task.get("route") or {}
    select = str(route.get("select", ""))
    check_reads(node, select, "route.select", graph, diags)
    if template_problem(select) is None and not is_exact_template(select):
        diags.add(
            "invalid_template",
            f"router `{node.id}` select must be one exact template",
            f"{node.path}.route.select",
            help='e.g. select: "${{ tasks.scan.output.verdict }}"',
        )
    cases = _check_cases(node, route, diags)
    default = tuple(str(task) for task in route.get("default") or [])
    _check_destinations(node, [*(t for c in cases for t in c.tasks), *default], graph, diags)
    return Route(select=select, cases=tuple(cases), default=default)


def _check_cases(node: Node, route: dict[str, Any], diags: Collector) -> list[RouteCase]:
    raw_cases = list(route.get("cases") or [])
    if not raw_cases:
        diags.add(
            "schema_violation",
            f"router `{node.id}` needs at least one case",
            f"{node.path}.route.cases",
        )
    seen: set[str] = set()
    cases: list[RouteCase] = []
    for index, case in enumerate(raw_cases):
        path = f"{node.path}.route.cases.{index}"
        tasks = tuple(str(task) for task in case.get("tasks") or [])
        if not tasks:
            diags.add(
                "schema_violation", f"router `{node.id}` case {index} has no tasks", f"{path}.tasks"
            )
        _literal_equals(node, case.get("equals"), f"{path}.equals", diags)
        identity = canonical_json(case.get("equals"))
        if identity in seen:
            diags.add(
                "schema_violation",
                f"router `{node.id}` has two cases equal to {identity}",
                f"{path}.equals",
            )
        seen.add(identity)
        cases.append(RouteCase(equals=case.get("equals"), tasks=tasks))
    return cases


def _literal_equals(node: Node, equals: Any, path: str, diags: Collector) -> None:
    """``equals`` holds no template: it is compared as written (spec/dsl.md §4.11)."""
    for where, text in templated_strings_at(equals, path):
        if OPEN in text:
            diags.add(
                "schema_violation",
                f"router `{node.id}` case value {text!r} holds a template; `equals` is a "
                "literal JSON value, compared as written with the selected value",
                where,
                help="write the literal value the select template gives, e.g. equals: approve",
            )


def _check_destinations(
    node: Node, destinations: list[str], graph: dict[str, Node], diags: Collector
) -> None:
    listed: set[str] = set()
    for destination in destinations:
        if destination in listed:
            diags.add(
                "schema_violation",
                f"router `{node.id}` lists destination `{destination}` more than once",
                f"{node.path}.route",
            )
            continue
        listed.add(destination)
        target = graph.get(destination)
        if target is None:
            if diags.unknown(destination, graph):
                diags.add(
                    "missing_reference",
                    f"router `{node.id}` routes to unknown task `{destination}`",
                    f"{node.path}.route",
                )
        elif node.id not in target.needs:
            _not_direct(node.id, destination, target, diags)


def _not_direct(router: str, destination: str, target: Node, diags: Collector) -> None:
    """A destination must need its router directly. An expanded task (foreach, matrix, loop,
    sub-workflow) is an aggregate that needs its children, so it never does, even when the
    task as written lists the router."""
    if target.kind in _EXPANDED:
        diags.add(
            "schema_violation",
            f"routed task `{destination}` expands into child tasks, so it cannot depend "
            f"directly on its router `{router}`",
            f"{target.path}",
            help=f"route to a plain task that needs {router}, and let {destination} need it",
        )
        return
    diags.add(
        "schema_violation",
        f"routed task `{destination}` must need its router `{router}`",
        f"{target.path}.needs",
        help=f"add {router} to the needs of {destination}",
    )
