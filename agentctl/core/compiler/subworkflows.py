"""Sub-workflow flattening (spec/dsl.md §4.9): ``uses: workflow:N`` becomes ordinary tasks.

An invocation ``INV`` of ``N@VERSION`` becomes, in declaration position: the input boundary
``INV--inputs-H`` (H = first 8 hex of sha256("N@VERSION")), every task of the definition as
``INV--LOCAL`` (each needing the boundary), then the output aggregate ``INV``.

Invariants:
- references are rewritten only inside ``${{ }}`` spans (and in bare ``when`` text):
  ``inputs.`` → ``tasks.<boundary>.output.``, ``memory.`` → ``memory.<prefix>``, and
  ``tasks.LOCAL`` → ``tasks.INV--LOCAL`` for ids local to the definition;
- a definition sees only its own tasks and its inputs: a task id it names (a template, a
  condition, ``needs``, a route destination, its ``outputs``) that is not one of its tasks is a
  ``missing_reference`` — left as it is, it would read or wait for the caller's task of that
  id, whatever the invoking workflow happens to call its tasks;
- literal working-memory keys / long-term namespaces get the prefix ``INV__`` (``-`` → ``_``);
  a templated one cannot be isolated and is rejected (``unsupported_capability``); two
  invocations whose prefixes are equal (``x-y`` and ``x_y``) are a ``schema_violation``, since
  they would share every key;
- nesting works by flattening the inner definition first and rewriting the result again, so
  every level adds its own namespace; a definition reached again on its own call stack is a
  ``dependency_cycle``;
- every ``inputs.NAME`` a definition reads is a key of its invocation's boundary (the
  ``inputs`` defaults and the invocation's ``with`` keys), else ``missing_reference`` at the
  read in the definition;
- inputs known at compile time (defaults ⊕ the invocation's ``with`` without a template) that
  fail the definition's ``inputSchema`` are a ``schema_violation`` at the invocation's ``with``:
  the boundary would fail the same way on every run.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from agentctl.core.canonical import sha256_hex
from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.ir import DEFAULT_RETRY, Source, with_defaults
from agentctl.core.compiler.templating import (
    OPEN,
    iter_strings,
    map_expressions,
    map_strings,
    templated_strings_at,
)
from agentctl.core.jsonschema import validate
from agentctl.core.templates import referenced_input_names
from agentctl.errors import ValidationError

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?"
)
_ROOT_REF = re.compile(r"(?<![A-Za-z0-9_.-])(inputs|memory|tasks)\.([A-Za-z0-9_-]+)")
_KEYED_MEMORY_KINDS = {
    "builtin.memory.read": "key",
    "builtin.memory.write": "key",
    "builtin.long_term_memory.promote": "key",
}
_NAMESPACED_MEMORY_KINDS = {
    "builtin.long_term_memory.read": "namespace",
    "builtin.long_term_memory.write": "namespace",
    "builtin.long_term_memory.search": "namespace",
}
# The task keys whose templates flattening rewrites (``_Scope.rewrite_task``).
_REWRITTEN = ("with", "vars", "when", "route", "loop", "foreach", "compensate")
# Keys an invocation may not carry, with the value meaning "not written".
_INVOCATION_FORBIDDEN: dict[str, Any] = {
    "when": None,
    "foreach": None,
    "matrix": None,
    "loop": None,
    "route": None,
    "compensate": None,
    "outputSchema": None,
    "timeoutSeconds": None,
    "vars": {},
    "memoryWrites": [],
    "varsFiles": [],
    "retry": DEFAULT_RETRY,
}


def flatten_tasks(doc: dict[str, Any], diags: Collector) -> list[Source]:
    """The workflow's tasks with every sub-workflow invocation inlined, in declaration order."""
    flattener = _Flattener(doc, diags)
    out: list[Source] = []
    for index, task in enumerate(doc["spec"]["tasks"]):
        flattener.place(with_defaults(task), f"spec.tasks.{index}", [], out)
    _check_prefixes(out, diags)
    return out


def input_reads(definition: Any, base: str) -> Iterator[tuple[str, str]]:
    """``(dotted path, input name)`` of every ``inputs.NAME`` the definition's own tasks and
    ``outputs`` read, in the places flattening rewrites (a bare ``when`` included)."""
    for index, child in enumerate(definition.get("tasks") or []):
        at = f"{base}.tasks.{index}"
        rendered = {key: child.get(key) for key in _REWRITTEN if isinstance(child, dict)}
        for where, text in templated_strings_at(rendered, at):
            for name in sorted(referenced_input_names(text)):
                yield where, name
        when = child.get("when") if isinstance(child, dict) else None
        if isinstance(when, str) and OPEN not in when:
            for name in sorted(referenced_input_names("${{ " + when + " }}")):
                yield f"{at}.when", name
    for where, text in templated_strings_at(definition.get("outputs"), f"{base}.outputs"):
        for name in sorted(referenced_input_names(text)):
            yield where, name


def _check_prefixes(sources: list[Source], diags: Collector) -> None:
    """No two invocations share a memory prefix. ``INV__`` spells ``-`` as ``_``, so ``x-y``
    and ``x_y`` would read and write each other's keys; a nested invocation's prefix is its
    flattened id's (``OUTER--INNER`` → ``OUTER__INNER__``, the outer prefix then the inner)."""
    seen: dict[str, str] = {}
    for source in sources:
        if source.role != "subworkflow_output":
            continue
        inv = str(source.task["id"])
        prefix = inv.replace("-", "_") + "__"
        other = seen.setdefault(prefix, inv)
        if other != inv:
            diags.add(
                "schema_violation",
                f"sub-workflow invocations `{other}` and `{inv}` share the memory prefix "
                f"`{prefix}`: they would read and write each other's working-memory keys",
                f"{source.path}.id",
                help="rename one of them: the prefix spells `-` as `_`",
            )


class _Flattener:
    def __init__(self, doc: dict[str, Any], diags: Collector) -> None:
        spec = doc["spec"]
        self.subworkflows: dict[str, Any] = spec.get("subworkflows") or {}
        self.actions: dict[str, Any] = spec.get("actions") or {}
        self.diags = diags

    def place(self, task: dict[str, Any], path: str, stack: list[str], out: list[Source]) -> None:
        uses = str(task.get("uses", ""))
        if not uses.startswith("workflow:"):
            out.append(Source(task=task, path=path))
            return
        name = uses.removeprefix("workflow:")
        definition = self.subworkflows.get(name)
        if definition is None:
            self.diags.add(
                "missing_reference",
                f"task `{task['id']}` uses unknown sub-workflow `{name}`",
                f"{path}.uses",
                help="declare it under spec.subworkflows",
            )
            return
        if name in stack:
            cycle = " -> ".join([*stack[stack.index(name) :], name])
            self.diags.add("dependency_cycle", f"sub-workflow cycle: {cycle}", f"{path}.uses")
            return
        self._check_invocation(task, path, name, definition)
        self._check_input_reads(task, name, definition)
        out.extend(self._invoke(task, path, name, definition, stack))

    def _check_input_reads(self, task: dict[str, Any], name: str, definition: Any) -> None:
        """Every ``inputs.NAME`` the definition reads is a key of the invocation's boundary
        (the definition's ``inputs`` defaults and the invocation's ``with``, both known
        here): another would fail the reading task on every run, as an internal path."""
        given = task.get("with")
        known = {*(definition.get("inputs") or {}), *(given if isinstance(given, dict) else {})}
        base = f"spec.subworkflows.{name}"
        for where, missing in input_reads(definition, base):
            if missing not in known:
                self.diags.add(
                    "missing_reference",
                    f"sub-workflow `{name}` (invoked as `{task['id']}`) reads `inputs.{missing}`"
                    ", which is neither one of its declared inputs nor given by the invocation",
                    where,
                    help=f"declare `{missing}` under {base}.inputs with a default, or give it "
                    "in the invocation's `with`",
                )

    def _check_invocation(
        self, task: dict[str, Any], path: str, name: str, definition: dict[str, Any]
    ) -> None:
        for key, unset in _INVOCATION_FORBIDDEN.items():
            if task.get(key) is not None and task.get(key) != unset:
                self.diags.add(
                    "schema_violation",
                    f"sub-workflow invocation `{task['id']}` may carry only needs, with and "
                    f"failure; `{key}` is not allowed",
                    f"{path}.{key}",
                )
        version = str(definition.get("version", ""))
        if not _SEMVER.fullmatch(version):
            self.diags.add(
                "schema_violation",
                f"sub-workflow `{name}` version {version!r} is not a semantic version",
                f"spec.subworkflows.{name}.version",
                help="use MAJOR.MINOR.PATCH, e.g. 0.1.0",
            )

    def _invoke(
        self,
        task: dict[str, Any],
        path: str,
        name: str,
        definition: dict[str, Any],
        stack: list[str],
    ) -> list[Source]:
        inv = str(task["id"])
        version = str(definition.get("version", ""))
        boundary = f"{inv}--inputs-{sha256_hex(f'{name}@{version}')[:8]}"
        local: list[Source] = []
        for index, child in enumerate(definition.get("tasks") or []):
            child_path = f"spec.subworkflows.{name}.tasks.{index}"
            self.place(with_defaults(child), child_path, [*stack, name], local)
        scope = _Scope(inv, boundary, {source.task["id"] for source in local}, name)
        direct = [source for source in local if source.parent is None]
        direct_ids = {source.task["id"] for source in direct}
        for source in local:
            # Entry tasks start the invocation: direct tasks and nested input boundaries.
            entry = source.parent is None or (
                source.role == "subworkflow_input" and source.parent in direct_ids
            )
            self._namespace(source, scope, entry=entry)
        members = (boundary, *(source.task["id"] for source in direct))
        return [
            self._input_boundary(task, path, definition, boundary, f"{name}@{version}"),
            *local,
            self._output_boundary(task, path, definition, scope, f"{name}@{version}", members),
        ]

    def _input_boundary(
        self,
        task: dict[str, Any],
        path: str,
        definition: dict[str, Any],
        boundary: str,
        workflow: str,
    ) -> Source:
        values = {**(definition.get("inputs") or {}), **(task.get("with") or {})}
        self._check_literal_inputs(task, path, values, definition.get("inputSchema"), workflow)
        spec = with_defaults(
            {
                "id": boundary,
                "uses": task["uses"],
                "needs": list(task.get("needs") or []),
                "with": values,
                "failure": task.get("failure", "stop"),
                "outputSchema": definition.get("inputSchema"),
            }
        )
        return Source(
            task=spec,
            path=path,
            role="subworkflow_input",
            subworkflow=workflow,
            parent=str(task["id"]),
        )

    def _check_literal_inputs(
        self, task: dict[str, Any], path: str, values: Any, schema: Any, workflow: str
    ) -> None:
        if schema is None or any(OPEN in text for text in iter_strings(values)):
            return  # a template renders at run time, where the boundary checks it
        try:
            problems = validate(values, schema)
        except ValidationError:
            return  # a malformed schema is reported at the definition's inputSchema
        if problems:
            self.diags.add(
                "schema_violation",
                f"task `{task['id']}`: the inputs of {workflow} do not match its inputSchema: "
                f"{problems[0]}",
                f"{path}.with",
                help="the inputs are the definition's `inputs` defaults with this `with` over them",
            )

    def _output_boundary(
        self,
        task: dict[str, Any],
        path: str,
        definition: dict[str, Any],
        scope: _Scope,
        workflow: str,
        members: tuple[str, ...],
    ) -> Source:
        outputs = map_strings(definition.get("outputs") or {}, scope.rewrite_template)
        foreign = frozenset(scope.foreign)  # reported here once, not again by the reads check
        self._report_foreign(scope, "its outputs refer", f"spec.subworkflows.{scope.name}.outputs")
        spec = with_defaults(
            {
                "id": scope.inv,
                "uses": task["uses"],
                "needs": list(members),
                "with": outputs,
                "failure": task.get("failure", "stop"),
                "outputSchema": definition.get("outputSchema"),
            }
        )
        return Source(
            task=spec,
            path=path,
            role="subworkflow_output",
            subworkflow=workflow,
            children=members,
            foreign=foreign,
        )

    def _namespace(self, source: Source, scope: _Scope, *, entry: bool) -> None:
        is_direct = source.parent is None
        task = scope.rewrite_task(source.task)
        if entry:  # a nested definition's own tasks were checked by its scope
            label = source.task["id"] if is_direct else source.parent  # (the invocation)
            source.foreign |= frozenset(scope.foreign)
            self._report_foreign(scope, f"its task `{label}` refers", source.path)
        scope.foreign.clear()
        if entry and scope.boundary not in task["needs"]:
            task["needs"] = [*task["needs"], scope.boundary]
        source.parent = scope.inv if is_direct else scope.local_id(str(source.parent))
        source.children = tuple(scope.local_id(child) for child in source.children)
        self._prefix_memory_key(task, source.path, scope, report=is_direct)
        source.task = task

    def _report_foreign(self, scope: _Scope, where: str, path: str) -> None:
        for task_id in scope.foreign:
            self.diags.add(
                "missing_reference",
                f"sub-workflow `{scope.name}`: {where} to task `{task_id}`, which is not "
                "one of the sub-workflow's tasks",
                path,
                help="a sub-workflow sees only its own tasks and its inputs: pass the value "
                "in through the invocation's `with` and read it as `inputs.NAME`",
            )
        scope.foreign.clear()

    def _prefix_memory_key(
        self, task: dict[str, Any], path: str, scope: _Scope, *, report: bool
    ) -> None:
        action = self.actions.get(str(task.get("uses", "")).removeprefix("action:"))
        if not isinstance(action, dict) or not str(task.get("uses", "")).startswith("action:"):
            return
        kind = str(action.get("kind"))
        field = _KEYED_MEMORY_KINDS.get(kind) or _NAMESPACED_MEMORY_KINDS.get(kind)
        with_ = task["with"]
        if field is None or not isinstance(with_.get(field), str):
            return
        value: str = with_[field]
        if OPEN in value:
            if report:
                self.diags.add(
                    "unsupported_capability",
                    f"task `{task['id']}` in a sub-workflow uses a templated memory "
                    f"{field}; sub-workflow state needs a literal {field} to be isolated",
                    f"{path}.with.{field}",
                )
            return
        task["with"] = {**with_, field: scope.memory_prefix + value}


class _Scope:
    """The renaming applied to the tasks of one invocation."""

    def __init__(self, inv: str, boundary: str, local_ids: set[str], name: str) -> None:
        self.inv = inv
        self.boundary = boundary
        self.local_ids = local_ids
        self.name = name  # the definition's
        self.memory_prefix = inv.replace("-", "_") + "__"
        # Task ids the definition names that are not its own (in order, once each), since the
        # caller last took them.
        self.foreign: dict[str, None] = {}

    def local_id(self, task_id: str) -> str:
        return f"{self.inv}--{task_id}" if task_id in self.local_ids else task_id

    def ref(self, task_id: str) -> str:
        """A task the definition names: its namespaced id, noted when it is not local."""
        if task_id not in self.local_ids:
            self.foreign[task_id] = None
        return self.local_id(task_id)

    def _rewrite_expression(self, expression: str) -> str:
        def replace(match: re.Match[str]) -> str:
            root, first = match.group(1), match.group(2)
            if root == "inputs":
                return f"tasks.{self.boundary}.output.{first}"
            if root == "memory":
                return f"memory.{self.memory_prefix}{first}"
            return f"tasks.{self.ref(first)}"

        return _ROOT_REF.sub(replace, expression)

    def rewrite_template(self, text: str) -> str:
        return map_expressions(text, self._rewrite_expression)

    def rewrite_condition(self, text: str) -> str:
        # Bare conditions (no braces) are legal in `when`; rewrite them whole.
        if OPEN in text:
            return self.rewrite_template(text)
        return self._rewrite_expression(text)

    def rewrite_task(self, original: dict[str, Any]) -> dict[str, Any]:
        task = copy.deepcopy(original)
        task["id"] = self.local_id(str(task["id"]))
        task["needs"] = [self.ref(need) for need in task["needs"]]
        for key in ("with", "vars"):
            task[key] = map_strings(task[key], self.rewrite_template)
        task["memoryWrites"] = [self.memory_prefix + key for key in task["memoryWrites"]]
        if isinstance(task.get("when"), str):
            task["when"] = self.rewrite_condition(task["when"])
        self._rewrite_structures(task)
        return task

    def _rewrite_structures(self, task: dict[str, Any]) -> None:
        route = task.get("route")
        if isinstance(route, dict):
            route["select"] = self.rewrite_template(str(route.get("select", "")))
            for case in route.get("cases") or []:
                case["tasks"] = [self.ref(t) for t in case.get("tasks") or []]
            route["default"] = [self.ref(t) for t in route.get("default") or []]
        loop = task.get("loop")
        if isinstance(loop, dict):
            if isinstance(loop.get("while"), str):
                loop["while"] = self.rewrite_template(loop["while"])
            loop["initial"] = map_strings(loop.get("initial"), self.rewrite_template)
        foreach = task.get("foreach")
        if isinstance(foreach, dict):
            foreach["items"] = map_strings(foreach.get("items") or [], self.rewrite_template)
        compensate = task.get("compensate")
        if isinstance(compensate, dict):
            compensate["with"] = map_strings(compensate.get("with") or {}, self.rewrite_template)
