"""Which finished tasks' outputs each planned task reads, so a coordinator keeps only those.

A task reads the outputs of its needs (dependency skips, routers, previews), of its children
(aggregates, loop guards) and of every task a template or condition in its definition names —
``with``, ``vars``, ``when``, the loop ``guard``, the router's ``select`` and the action or
agent configuration (conditions may name tasks outside ``needs``, spec/dsl.md §4). The run's
output reads the tasks ``spec.outputs`` names, or every finished task when it is empty.

Invariant: each answer is a superset of what evaluating the task can read — an output missing
from it would fail that task's template at run time, so when in doubt a source is scanned.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from agentctl.core.conditions import TemplateError, parse_condition
from agentctl.core.plan import Plan, PlannedTask
from agentctl.core.templates import referenced_task_ids


def task_reads(task: PlannedTask, shared: SharedReads | None = None) -> tuple[str, ...]:
    """The distinct tasks whose outputs preparing ``task`` may read (needs first); ``shared``
    remembers the reads of the definitions tasks share, for a pass over a whole plan."""
    # Only the sources a task has are scanned (most have no vars, route, condition or
    # children): a run's first pass over a plan calls this once per task.
    sources: list[Sequence[str]] = [task.children] if task.children else []
    for value in (task.with_, task.vars):
        if value:
            sources.append(_named(value))
    if task.route is not None:
        sources.append(_named(task.route.select))
    for definition in _definitions(task):
        sources.append(_named(definition) if shared is None else shared.of(definition))
    sources += [_condition_reads(c) for c in (task.when, task.guard) if c]
    found = dict.fromkeys(task.needs)
    for names in sources:
        if names:  # most are empty: no dict made for them
            found.update(dict.fromkeys(names))
    found.pop(task.id, None)
    if len(found) == len(task.needs):
        return task.needs  # the common case: share the plan's tuple, allocate nothing
    return tuple(found)


class SharedReads:
    """The reads of each definition object seen (an action's configuration is one dict for
    every task using it), so a pass over a plan scans each once, not once per task.

    Keyed by identity, and each key's object is kept referenced here, so an id cannot be
    reused by another object while this lives; a plan is not mutated after compiling."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[object, list[str]]] = {}

    def of(self, definition: object) -> list[str]:
        hit = self._seen.get(id(definition))
        if hit is not None and hit[0] is definition:
            return hit[1]
        found = _named(definition)
        self._seen[id(definition)] = (definition, found)
        return found


def run_output_reads(plan: Plan) -> tuple[str, ...] | None:
    """The tasks ``spec.outputs`` reads; None when it is empty (the output is every task's)."""
    if not plan.run.outputs:
        return None
    return tuple(_named(plan.run.outputs))


def _definitions(task: PlannedTask) -> Iterator[Any]:
    """The action or agent definitions ``task`` was compiled from, shared with its siblings."""
    if task.action_config is not None:
        yield task.action_config
    if task.agent_config is not None:
        yield task.agent_config.agent
        yield task.agent_config.tools


def _named(value: Any) -> list[str]:
    if not _mentions_tasks(value):
        return []
    try:
        return referenced_task_ids(value)
    except TemplateError:  # the compiler rejected it already; nothing can be read
        return []


def _condition_reads(text: str) -> list[str]:
    found = _named(text)
    try:
        task_id = parse_condition(text).reference.task_id
    except TemplateError:
        return found
    return found if task_id is None else [*found, task_id]


def _mentions_tasks(value: Any) -> bool:
    """Whether a string value of ``value`` contains ``tasks`` — every task read is spelled
    ``tasks.ID.output``, so anything else is not parsed at all (most values, e.g. an action's
    ``kind``, are plain text)."""
    if isinstance(value, str):
        return "tasks" in value
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, list):
        return False
    for item in value:  # scalars inline: most values (a task's `with`) are flat
        if isinstance(item, str):
            if "tasks" in item:
                return True
        elif isinstance(item, dict | list) and _mentions_tasks(item):
            return True
    return False
