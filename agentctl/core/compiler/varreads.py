"""Template checks of variables, each at the layer and key that writes it (spec/dsl.md §4.3,
§6.4).

A task renders every one of its merged variables (``core.evaluate.task_context``), so each
template a variable holds must parse, name tasks of the plan and — for the value that wins its
key in a task — read only tasks in that task's own ``needs``. Where each finding goes:

- a value's syntax and unknown-task findings: at the value as written (``spec.vars.KEY``,
  ``spec.agents.NAME.vars.KEY``, a task's ``vars.KEY`` in its authored definition, a var
  file's ``varsFiles`` entry; a command-line variable has no path), once, whether or not a task
  ends up with the value — it is wrong wherever it stands;
- a read of a task the reader does not need, judged per task for the value that wins the key
  there (whole-key replacement as in ``variables``; an engine binding of the same name hides
  it): a task's own layers are reported for that task; a layer every task (or every task of an
  agent) gets — workflow, agent, command line — once per key and task read, naming every task
  that gets it without needing that task (``report_shared``), with a help that can fix it (no
  task can need itself).

Invariants: pure; a shared layer is walked once per compile, not once per task; a task with no
variables of its own, when no shared value reads a task, costs a lookup; engine bindings
(foreach items, matrix axes, loop ``initial``) are no layer's and are checked by ``build``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agentctl.core.compiler.diagnostics import Collector
from agentctl.core.compiler.ir import Env, Node
from agentctl.core.compiler.references import needs_help
from agentctl.core.compiler.templating import (
    OPEN,
    iter_strings,
    task_references,
    template_problem,
    templated_strings_at,
)
from agentctl.core.compiler.variables import VarLayer, cli_layers, holder_layers, value_label

Scope = Literal["workflow", "agent", "task", "cli"]


@dataclass(frozen=True)
class VarRead:
    """A variable value that reads task outputs. ``name``: its key; ``where``: the dotted path
    reported (None on the command line); ``label``: how messages name it ("" for a task's own
    inline ``vars``, whose path says it all); ``scope``/``owner``: its holder (``owner`` the
    agent's name for ``agent``); ``tasks``: the ids it reads, each of the plan."""

    name: str
    where: str | None
    label: str
    scope: Scope
    owner: str | None
    tasks: tuple[str, ...]


@dataclass(frozen=True)
class Layer:
    """One layer as the needs rule folds it: every name it sets (a name set without a task
    read hides a lower layer's read of that name) and the reads among them, by name."""

    names: tuple[str, ...]
    reads: Mapping[str, VarRead]


@dataclass(frozen=True)
class _Holder:
    """Who declares a run of layers. ``base``: its dotted path (None on the command line);
    ``owner``: the agent's name; ``reader``/``foreign``: for a task, its id in messages and the
    ids its sub-workflow scope already reported (``Source.foreign``)."""

    scope: Scope
    base: str | None
    owner: str | None = None
    reader: str | None = None
    foreign: frozenset[str] = frozenset()


class VarReads:
    """One compile's variable template checks (module docstring): shared layers are checked
    when made, a task's own when ``check`` meets it; ``report_shared`` ends the compile's."""

    def __init__(self, env: Env, graph: Mapping[str, Node], diags: Collector) -> None:
        self._graph, self._diags, self._captured = graph, diags, env.variables
        spec, captured = env.spec, env.variables
        self._workflow = self._layers(holder_layers(spec, "workflow", "spec", captured), _WF)
        self._agents = {
            name: self._layers(
                holder_layers(agent, "agent", f"spec.agents.{name}", captured),
                _Holder("agent", f"spec.agents.{name}", owner=name),
            )
            for name, agent in env.agents.items()
        }
        self._cli = self._layers(cli_layers(captured), _CLI)
        self._cli_reads = any(layer.reads for layer in self._cli)
        self._bases: dict[str | None, dict[str, VarRead]] = {}
        # (a shared read, a task it reads) → the tasks getting it without needing that task
        self._missing: dict[tuple[VarRead, str], dict[str, None]] = {}

    def check(self, node: Node, agent: str | None) -> None:
        """The task's own layers, and the needs rule for every value winning a key in it."""
        base = self._base(agent)
        own = self._own_layers(node)
        if not base and not self._cli_reads and not any(layer.reads for layer in own):
            return  # (most tasks: nothing they render reads a task)
        winners = dict(base)
        for layer in (*own, *self._cli):
            _fold(winners, layer)
        for name in node.bindings:
            winners.pop(name, None)  # the binding is rendered, not the variable it hides
        for read in winners.values():
            for task_id in read.tasks:
                if task_id not in node.needs:
                    self._not_needed(node, read, task_id)

    def report_shared(self) -> None:
        """One ``invalid_template`` per shared value and task it reads, at the value."""
        for (read, task_id), readers in self._missing.items():
            names = list(readers)
            noun, verb = ("task", "gets") if len(names) == 1 else ("tasks", "get")
            listed = ", ".join(f"`{name}`" for name in names)
            self._diags.add(
                "invalid_template",
                f"{read.label} reads tasks.{task_id}.output, and {noun} {listed} {verb} it "
                f"without needing `{task_id}`",
                read.where,
                help=_shared_help(read, task_id, names),
            )

    def _base(self, agent: str | None) -> dict[str, VarRead]:
        known = self._bases.get(agent)
        if known is None:
            known = {}
            for layer in (*self._workflow, *self._agents.get(agent or "", ())):
                _fold(known, layer)
            self._bases[agent] = known
        return known

    def _own_layers(self, node: Node) -> tuple[Layer, ...]:
        task = node.task
        if not task.get("vars") and not task.get("varsFiles"):
            return ()
        reader = _reader(node)
        holder = _Holder("task", node.path, reader=reader, foreign=node.source.foreign)
        return self._layers(holder_layers(task, "task", node.path, self._captured), holder)

    def _layers(self, layers: Iterator[VarLayer], holder: _Holder) -> tuple[Layer, ...]:
        made: list[Layer] = []
        files = 0  # the index of the next var file in the holder's `varsFiles`
        for layer in layers:
            is_file = layer.layer.endswith("VarsFiles")
            # (A file that was not captured holds None: ``variables`` reports it.)
            if isinstance(layer.values, dict):
                if is_file:
                    made.append(self._file_layer(layer, holder, files))
                else:
                    made.append(self._inline_layer(layer, holder))
            files += is_file
        return tuple(made)

    def _file_layer(self, layer: VarLayer, holder: _Holder, index: int) -> Layer:
        where = None if holder.base is None else f"{holder.base}.varsFiles.{index}"
        reads: dict[str, VarRead] = {}
        for name, value in layer.values.items():
            texts = (text for text in iter_strings(value) if OPEN in text or "}}" in text)
            label = value_label(layer, name)
            self._read(reads, name, ((where, text) for text in texts), label, holder)
        return Layer(tuple(layer.values), reads)

    def _inline_layer(self, layer: VarLayer, holder: _Holder) -> Layer:
        values: dict[str, Any] = layer.values
        reads: dict[str, VarRead] = {}
        for name, value in values.items():
            label = value_label(layer, name, holder.owner)
            if holder.base is None:  # (``--var``: no document path)
                texts = (text for text in iter_strings(value) if OPEN in text or "}}" in text)
                self._read(reads, name, ((None, t) for t in texts), label, holder)
            else:
                at = templated_strings_at(value, f"{holder.base}.vars.{name}")
                self._read(reads, name, at, label, holder)
        return Layer(tuple(values), reads)

    def _read(
        self,
        reads: dict[str, VarRead],
        name: str,
        texts: Iterator[tuple[str | None, str]],
        label: str,
        holder: _Holder,
    ) -> None:
        """Check one variable's templated strings; its ``VarRead`` into ``reads`` if it reads
        tasks of the plan (each reported at its string's path: the first one's is kept)."""
        found: dict[str, None] = {}
        first: str | None = None
        for where, text in texts:
            first = first or where
            found.update(dict.fromkeys(self._text_reads(text, where, label, holder)))
        if found:
            reads[name] = VarRead(name, first, label, holder.scope, holder.owner, tuple(found))

    def _text_reads(
        self, text: str, where: str | None, label: str, holder: _Holder
    ) -> Iterator[str]:
        """The tasks of the plan ``text`` reads; its syntax and unknown tasks reported."""
        diags = self._diags
        problem = template_problem(text)
        if problem is not None:
            diags.add("invalid_template", f"{label}: {problem}" if label else problem, where)
            return
        for task_id in task_references(text):
            if task_id in holder.foreign:
                continue  # reported where the sub-workflow names it
            if diags.unknown(task_id, self._graph):
                diags.add("missing_reference", _unknown_message(holder, label, task_id), where)
            elif task_id in self._graph:
                yield task_id

    def _not_needed(self, node: Node, read: VarRead, task_id: str) -> None:
        if read.scope != "task":
            self._missing.setdefault((read, task_id), {})[_reader(node)] = None
            return
        reader = _reader(node)
        context = f" (in {read.label})" if read.label else ""
        self._diags.add(
            "invalid_template",
            f"task `{reader}` reads tasks.{task_id}.output{context} without needing `{task_id}`",
            read.where,
            help=needs_help(reader, task_id, context),
        )


_WF = _Holder("workflow", "spec")
_CLI = _Holder("cli", None)


def _fold(winners: dict[str, VarRead], layer: Layer) -> None:
    """Whole-key replacement: each name the layer sets now wins with its read, or none."""
    if not winners and not layer.reads:
        return
    for name in layer.names:
        read = layer.reads.get(name)
        if read is None:
            winners.pop(name, None)
        else:
            winners[name] = read


def _reader(node: Node) -> str:
    """How messages name the task that renders ``node``'s variables: a sub-workflow's input
    boundary by its invocation, whose ``needs`` it takes; any other by its authored id (every
    child of one expansion by its parent's)."""
    if node.source.role == "subworkflow_input" and node.source.parent:
        return node.source.parent
    return str(node.task["id"])


def _unknown_message(holder: _Holder, label: str, task_id: str) -> str:
    if holder.scope == "task":
        context = f" (in {label})" if label else ""
        return f"task `{holder.reader}` reads unknown task `{task_id}`{context}"
    return f"{label} reads unknown task `{task_id}`"


def _shared_help(read: VarRead, task_id: str, readers: list[str]) -> str:
    """What fixes a shared value read by tasks that do not need ``task_id``: adding it to
    their needs, unless one of them is ``task_id`` itself; else giving the value only to the
    tasks that need ``task_id``."""
    if read.scope == "cli":
        move = f"pass no `{read.name}` on the command line: set vars.{read.name}"
    else:
        move = f"set vars.{read.name}"
    move += f" in the vars of the tasks that need {task_id} instead"
    if task_id not in readers:
        return f"add {task_id} to the needs of {', '.join(readers)}, or {move}"
    who = {
        "workflow": "every task gets the workflow's variables",
        "agent": f"every task of agent `{read.owner}` gets its variables",
        "cli": "every task gets the command line's variables",
    }.get(read.scope, "")
    return f"{who}, {task_id} included, and a task cannot need itself: {move}"
