"""Checks of an action task against its action kind: the ``with`` keys it reads, and the
templates in the action's own configuration (``core.actionconfig``).

Invariants:
- which ``with`` keys a kind reads comes only from its registry entry (``Operation.with_keys``;
  None admits any key); any other key is a ``schema_violation`` at that key's line/column —
  in the task's ``with``, the action's ``with`` defaults or a ``compensate.with`` — naming the
  keys the kind does read; the entry's ``with_check`` judges the literal values the same way;
- a key the kind needs (``Operation.with_required``) is missing from the merged ``with``
  (action defaults under the task's or compensation's own) ⇒ ``schema_violation`` at the
  task's ``with``; a literal of the wrong JSON kind ⇒ one at the layer that gave it;
- an ``extension.process`` task's wholly literal merged ``with`` is its input: one that breaks
  the action's ``inputSchema`` ⇒ ``schema_violation`` at the offending key's layer (the task's
  ``with`` for a problem of the whole); a templated one is judged when rendered;
- a template in an action's ``args`` / ``env`` is checked like one in ``with``: its syntax once
  per action, and for every task using the action, each ``tasks.X.output`` it reads must be in
  that task's own ``needs``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from agentctl.core import jsonschema, registry
from agentctl.core.actionconfig import templated_strings
from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.ir import Node
from agentctl.core.compiler.templating import (
    OPEN,
    iter_strings,
    task_references,
    template_problem,
)
from agentctl.core.dburl import url_scheme
from agentctl.core.extension import OPERATION as EXTENSION_OPERATION
from agentctl.core.operations import Operation, WithInput
from agentctl.errors import ValidationError


def check_with_keys(kind: str, given: Any, where: str, task_id: str, diags: Collector) -> None:
    """Every key of ``given`` (a ``with`` mapping at dotted path ``where``) is read by ``kind``."""
    entry = registry.find(kind)
    if entry is None or entry.with_keys is None or not isinstance(given, Mapping):
        return
    for key in given:
        if key in entry.with_keys:
            continue
        reads = ", ".join(f"`{k}`" for k in sorted(entry.with_keys))
        help = f"{kind} reads {reads}" if reads else _no_with_help(kind)
        diags.add(
            "schema_violation",
            f"task `{task_id}`: `with.{key}` is not read by a {kind} action",
            f"{where}.{key}",
            help=help,
        )
    for key, problem in entry.with_check(given) if entry.with_check else ():
        diags.add("schema_violation", f"task `{task_id}`: `with.{key}` {problem}", f"{where}.{key}")


def check_required_with(
    kind: str, layers: list[tuple[str, Any]], task_id: str, diags: Collector
) -> None:
    """The keys ``kind`` needs are in the merged ``with`` of ``layers`` — (dotted path,
    mapping) pairs, lowest precedence first, the last one the task's own — and a literal
    value there is of the needed kind. A template is left to be judged when rendered."""
    entry = registry.find(kind)
    if entry is None or not entry.with_required:
        return
    given = {
        key: (where, value)
        for where, layer in layers
        if isinstance(layer, Mapping)
        for key, value in layer.items()
    }
    for needed in entry.with_required:
        if needed.key not in given:
            diags.add(
                "schema_violation",
                f"task `{task_id}`: a {kind} action needs `with.{needed.key}`",
                layers[-1][0],
                help=f"give `{needed.key}` ({_described(needed)}) in the task's `with`",
            )
            continue
        where, value = given[needed.key]
        if not _fits(needed, value):
            diags.add(
                "schema_violation",
                f"task `{task_id}`: `with.{needed.key}` of a {kind} action must be "
                f"{_described(needed)}, got {value!r}",
                f"{where}.{needed.key}",
            )


def _described(needed: WithInput) -> str:
    if needed.kind == "boolean":
        return "true or false (or a template rendering one)"
    if needed.local_path:
        return "a local file path (a string, not a URL)"
    return "a non-empty string" if needed.non_empty else "a string"


def _fits(needed: WithInput, value: Any) -> bool:
    if isinstance(value, str) and OPEN in value:
        return True  # rendered when the task runs, and judged then
    if needed.kind == "boolean":
        return isinstance(value, bool)
    if not isinstance(value, str) or (needed.local_path and url_scheme(value) is not None):
        return False
    return bool(value) or not needed.non_empty


def _no_with_help(kind: str) -> str:
    entry = registry.find(kind)
    if entry is not None and entry.is_process:
        return (
            f"{kind} takes no `with`; configure the action (command, args, env) and use "
            "`${{ … }}` in its args or env values to vary it per task"
        )
    return f"remove `with`: {kind} takes none"


@dataclass(frozen=True)
class ConfigTemplate:
    """A templated string of an action's configuration: its dotted path, its syntax problem
    (None when it parses) and the task ids it reads."""

    where: str
    problem: str | None
    reads: tuple[str, ...]


@dataclass(frozen=True)
class ActionFacts:
    """What checking and drafting a task of action ``name`` need of the action alone, found
    once per action in a compile (``of``; the document does not change during one) instead of
    once per task: its kind and registry entry, whether its ``with`` defaults pass
    ``check_with_keys`` (whose findings name the task, so only a clean result is shared) and
    hold a template, its configuration's templates parsed, and its own ``timeoutSeconds``."""

    name: str
    kind: str
    entry: Operation | None
    defaults_clean: bool
    defaults_templated: bool
    templates: tuple[ConfigTemplate, ...]
    timeout_seconds: int | None

    @classmethod
    def of(cls, name: str, action: Mapping[str, Any]) -> ActionFacts:
        kind = str(action.get("kind"))
        entry = registry.find(kind)
        defaults = action.get("with")
        timeout = action.get("timeoutSeconds")
        return cls(
            name=name,
            kind=kind,
            entry=entry,
            defaults_clean=_keys_clean(entry, defaults),
            defaults_templated=any(OPEN in t or "}}" in t for t in iter_strings(defaults)),
            templates=tuple(_config_templates(name, action)),
            timeout_seconds=whole_number(timeout),
        )


def whole_number(value: Any) -> int | None:
    """``value`` if it is an int (never a bool), else None: a usable ``timeoutSeconds``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _keys_clean(entry: Operation | None, given: Any) -> bool:
    """Whether ``check_with_keys`` finds nothing in ``given`` (for any task)."""
    if entry is None or entry.with_keys is None or not isinstance(given, Mapping):
        return True
    if any(key not in entry.with_keys for key in given):
        return False
    return entry.with_check is None or not list(entry.with_check(given))


def _config_templates(name: str, action: Mapping[str, Any]) -> Iterator[ConfigTemplate]:
    for sub, text in templated_strings(action):
        if OPEN not in text and "}}" not in text:
            continue
        problem = template_problem(text)
        reads = () if problem is not None else tuple(task_references(text))
        yield ConfigTemplate(f"spec.actions.{name}.{sub}", problem, reads)


def check_action(
    node: Node,
    facts: ActionFacts,
    action: Mapping[str, Any],
    graph: Mapping[str, Node],
    diags: Collector,
) -> None:
    """The ``with`` keys of the task and the action, and the action configuration's templates
    (``facts``: the action's, ``ActionFacts.of(name, action)``)."""
    kind, name, entry = facts.kind, facts.name, facts.entry
    task_id = str(node.task.get("id"))
    if entry is not None and entry.with_keys is not None:
        check_with_keys(kind, node.task.get("with"), f"{node.path}.with", task_id, diags)
        if not facts.defaults_clean:
            where = f"spec.actions.{name}.with"
            check_with_keys(kind, action.get("with"), where, task_id, diags)
    if entry is not None and entry.with_required:
        layers = [
            (f"spec.actions.{name}.with", action.get("with")),
            (f"{node.path}.with", node.task.get("with")),
        ]
        check_required_with(kind, layers, task_id, diags)
    if kind == EXTENSION_OPERATION:
        _check_extension_input(node, name, action, diags)
    for template in facts.templates:
        if template.problem is not None:
            diags.add("invalid_template", template.problem, template.where)
            continue
        for read in template.reads:
            _check_read(node, read, template.where, graph, diags)


def _check_extension_input(
    node: Node, name: str, action: Mapping[str, Any], diags: Collector
) -> None:
    """A wholly literal ``with`` (the action's defaults under the task's own) meets the
    extension's ``inputSchema`` — as the task would find when it runs. A templated one is
    judged once rendered: what a template renders to may change what any part must be."""
    layers = [
        (f"spec.actions.{name}.with", action.get("with")),
        (f"{node.path}.with", node.task.get("with")),
    ]
    given: dict[str, Any] = {}
    where: dict[str, str] = {}
    for path, layer in layers:
        if isinstance(layer, Mapping):
            given.update(layer)
            where.update(dict.fromkeys(layer, path))
    schema = action.get("inputSchema")
    if not isinstance(schema, dict) or any(OPEN in t for t in iter_strings(given)):
        return
    try:
        problems = jsonschema.validate(given, schema)
    except ValidationError:
        return  # a malformed schema is reported on its own
    for problem in problems:
        diags.add(
            "schema_violation",
            f"task `{node.task.get('id')}`: `with` breaks the {EXTENSION_OPERATION} action "
            f"`{name}`'s inputSchema: {problem}",
            _problem_path(problem, where, layers[-1][0]),
            help=f"give a `with` that spec.actions.{name}.inputSchema admits",
        )


def _problem_path(problem: str, where: Mapping[str, str], task_with: str) -> str:
    """The dotted path of the top-level ``with`` key a schema problem (``/key…: text``) is
    about, in the layer that gave it — a key the schema does not allow is named only in the
    text of a problem of the whole — else the task's ``with``."""
    pointer, _, text = problem.partition(": ")
    first = pointer.strip("/").split("/", 1)[0]
    if not first:
        first = next((k for k in where if text == f"property {k!r} is not allowed"), "")
    return f"{where[first]}.{first}" if first in where else task_with


def _check_read(
    node: Node, task_id: str, where: str, graph: Mapping[str, Node], diags: Collector
) -> None:
    reader = node.task.get("id")
    if diags.unknown(task_id, graph):
        diags.add("missing_reference", f"task `{reader}` reads unknown task `{task_id}`", where)
    elif task_id not in node.needs:
        diags.add(
            "invalid_template",
            f"task `{reader}` reads tasks.{task_id}.output (in its action's configuration) "
            f"without needing `{task_id}`",
            where,
            help=f"add {task_id} to the needs of {reader}",
        )
