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


def _ancestors(task_id: str, needs: Mapping[str, list[str]]) -> set[str]:
    """Every task ``task_id`` transitively needs (cycle-safe)."""
    seen: set[str] = set()
    stack = list(needs.get(task_id, []))
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(needs.get(current, []))
    return seen


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
        for index, task in enumerate(tasks):
            if not isinstance(task, dict):
                continue
            reader = str(task.get("id"))
            for where, text in _conditions(task):
                for read in condition_tasks(text):
                    if read in needs and read not in _ancestors(reader, needs):
                        diags.add(
                            "invalid_template",
                            f"task `{reader}` condition reads tasks.{read}.output without "
                            f"needing `{read}`: the value exists only if `{read}` happens to "
                            "finish first, so the task may fail with an undefined value",
                            f"{prefix}.{index}.{where}",
                            help=needs_help(reader, read, "condition"),
                        )
    return [replace(d, severity="warning") for d in diags.items]
