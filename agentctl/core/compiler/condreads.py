"""A condition that reads a task it does not depend on (spec/dsl.md "Port risks").

The needs rule (§4.3) covers ``with`` and ``vars``; the original exempts conditions, so a
``when`` (or a loop's ``while``) may read ``tasks.X.output`` of a task X it does not need, and
``check`` accepts it as the original does. But the runtime context holds only the outputs of
*finished* tasks (§6.5): whether X has finished when the condition is evaluated depends on
declaration order and on ``maxConcurrency``, not on the graph — declared after the reader,
or run beside it, X is missing and the task fails ("undefined value"). So each such read is
reported as a ``warning`` (``condition_read_warnings``); the compile, the digests and the exit
code are unchanged.

Invariants: pure; judged on the authored tasks of each scope (the workflow's, each
sub-workflow's), never per expanded child; a read of a task that is a transitive dependency
(a need, a need's need…) is safe and never reported; reads of unknown tasks are the
compiler's errors, not reported here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from agentctl.core.compiler.diagnostics import Collector, Locator
from agentctl.core.compiler.references import needs_help
from agentctl.core.compiler.templating import condition_tasks
from agentctl.errors import Diagnostic


def _scopes(spec: Mapping[str, Any]) -> Iterator[tuple[str, list[Any]]]:
    """``(dotted path of the task list, its tasks)``: the workflow's, each sub-workflow's."""
    yield "spec.tasks", list(spec.get("tasks") or [])
    for name, sub in (spec.get("subworkflows") or {}).items():
        if isinstance(sub, dict):
            yield f"spec.subworkflows.{name}.tasks", list(sub.get("tasks") or [])


def _conditions(task: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(key path in the task, condition text)`` of a task's ``when`` and loop ``while``."""
    if isinstance(task.get("when"), str):
        yield "when", task["when"]
    loop = task.get("loop")
    if isinstance(loop, dict) and isinstance(loop.get("while"), str):
        yield "loop.while", loop["while"]


class _Ancestry:
    """Each task's transitive needs as a bit set over its scope's tasks, built on demand and
    memoized: one pass over the graph however many conditions ask (a chain of n conditional
    tasks costs n unions of machine words, not n walks of the chain); cycle-safe."""

    def __init__(self, needs: Mapping[str, list[str]]) -> None:
        self._needs = needs
        self._bit = {task: 1 << i for i, task in enumerate(needs)}
        self._memo: dict[str, int] = {}

    def needs(self, task: str, other: str) -> bool:
        """Whether ``task`` transitively needs ``other`` (a task of the scope)."""
        return bool(self._of(task) & self._bit[other])

    def _of(self, task: str) -> int:
        memo, bit, visiting = self._memo, self._bit, set[str]()
        stack = [task]
        while stack:  # iterative post-order: a 10,000-task chain is deeper than the stack
            current = stack[-1]
            if current in memo:
                stack.pop()
                continue
            parents = [n for n in self._needs.get(current, ()) if n in bit]
            todo = [n for n in parents if n not in memo and n not in visiting]
            if todo and current not in visiting:
                visiting.add(current)
                stack.extend(todo)
                continue
            bits = 0
            for parent in parents:  # a parent still being visited is a cycle: left out
                bits |= bit[parent] | memo.get(parent, 0)
            memo[current] = bits
            visiting.discard(current)
            stack.pop()
        return memo[task]


def condition_read_warnings(
    doc: Mapping[str, Any], *, file: str | None = None, locate: Locator | None = None
) -> list[Diagnostic]:
    """A ``warning`` at each condition that reads a task of its scope that is not among its
    task's transitive needs (module docstring)."""
    diags = Collector(file, locate)  # (it locates each path; its findings become warnings)
    for prefix, tasks in _scopes(doc.get("spec") or {}):
        needs = {
            str(t.get("id")): [str(n) for n in t.get("needs") or []]
            for t in tasks
            if isinstance(t, dict)
        }
        ancestry = _Ancestry(needs)
        for index, task in enumerate(tasks):
            if not isinstance(task, dict):
                continue
            reader = str(task.get("id"))
            for where, text in _conditions(task):
                for read in condition_tasks(text):
                    if read in needs and not ancestry.needs(reader, read):
                        diags.add(
                            "invalid_template",
                            f"task `{reader}` condition reads tasks.{read}.output without "
                            f"needing `{read}`: the value exists only if `{read}` happens to "
                            "finish first, so the task may fail with an undefined value",
                            f"{prefix}.{index}.{where}",
                            help=needs_help(reader, read, "condition"),
                        )
    return [replace(d, severity="warning") for d in diags.items]
